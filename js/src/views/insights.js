// @ts-check
// The Insights view: what to fix first (prof.insights(), src/torchprof/_views/insights.py), one
// finding per row, ranked by the time at stake: the rule, its share and time, what was seen and
// what to try. Each row links to the rows it points to: a click opens the first in the table
// (expanded, scrolled to, selected), a path's own link opens that one.
import { openRow } from "../answers.js";
import { h } from "../dom.js";
import { formatPercent, formatTime, missing } from "../format.js";
import { rowOfPath } from "../tree.js";

/** @import { Data, Context, ViewFace } from "../types.js" */

/**
 * One finding as the view lists it: the payload's finding (keys from the vocabulary's
 * `insight_columns`) with its figures written out and its paths' rows (-1: not in this table).
 * @typedef {object} InsightRow
 * @property {string} rule @property {string} title the rule in words ("host sync")
 * @property {string} figures "23% of the run · 1.20s at stake", as far as known
 * @property {string} message @property {string} advice
 * @property {{path: string, row: number}[]} links
 */

/**
 * The findings of a payload as rows (pure: node-tested). The payload's findings are in rank order
 * already (time at stake, memory findings after).
 * @param {Data} data @returns {InsightRow[]}
 */
export function insightRows(data) {
  const found = Array.isArray(data.fields.insights) ? data.fields.insights : [];
  const [rule, atStake, share, paths, message, advice] = data.vocab.insight_columns || [];
  return found.map((/** @type {Record<string, any>} */ f) => {
    const figures = [];
    if (!missing(f[share] ?? NaN)) figures.push(`${formatPercent(f[share], 1)} of the ${missing(f[atStake] ?? NaN) ? "memory peak" : "run"}`);
    if (!missing(f[atStake] ?? NaN)) figures.push(`${formatTime(f[atStake])} at stake`);
    const list = Array.isArray(f[paths]) ? f[paths] : [];
    return {
      rule: String(f[rule] ?? ""),
      title: String(f[rule] ?? "").replace(/_/g, " "),
      figures: figures.join(" · "),
      message: String(f[message] ?? ""),
      advice: String(f[advice] ?? ""),
      links: list.map((/** @type {string} */ p) => ({ path: String(p), row: rowOfPath(data, String(p)) })),
    };
  });
}

/**
 * The Insights view: a list of findings, or a line saying no rule fired.
 * @implements {ViewFace}
 */
class InsightsView {
  /** @param {Context} ctx */
  constructor(ctx) {
    this.ctx = ctx;
    this.el = h("div", { class: `tp-panel tp-panel-${ctx.view} tp-insights`, "data-view": ctx.view, "data-testid": ctx.view });
    this.onClick = this.onClick.bind(this);
    this.el.addEventListener("click", this.onClick);
    this.build();
  }

  build() {
    const rows = insightRows(this.ctx.data);
    if (!rows.length) {
      this.el.replaceChildren(h("p", { class: "tp-insights-none", "data-testid": "insights-none",
        text: "No findings: none of torchprof's rules (data loading, host syncs, device idle, exposed communication, optimizer, torch.compile, activations, low MFU, memory limit, Python overhead) fired on this profile." }));
      return;
    }
    const list = h("ol", { class: "tp-insight-list", role: "list" });
    rows.forEach((r, k) => {
      const first = r.links.find((l) => l.row >= 0);
      const links = h("span", { class: "tp-insight-paths" });
      for (const l of r.links.slice(0, 8)) {
        if (l.row >= 0) links.append(h("button", { type: "button", class: "tp-link", "data-row": l.row, title: "Show this row in the table", text: l.path }));
        else links.append(h("span", { text: l.path }));
      }
      if (r.links.length > 8) links.append(h("span", { text: `… ${r.links.length - 8} more` }));
      list.append(h("li", {
        class: "tp-insight", "data-testid": "insight", "data-rule": r.rule, "data-row": first ? first.row : null,
        tabindex: "0", title: first ? "Click to show it in the table" : null,
      },
      h("div", { class: "tp-insight-head" }, h("span", { class: "tp-insight-rank", text: `${k + 1}.` }),
        h("b", { class: "tp-insight-rule", text: r.title }), h("span", { class: "tp-insight-figures", text: r.figures })),
      h("div", { class: "tp-insight-message", text: r.message }),
      h("div", { class: "tp-insight-advice" }, h("span", { class: "tp-stat-k", text: "Try: " }), r.advice),
      links));
    });
    this.el.replaceChildren(h("div", { class: "tp-insights-note", text: `${rows.length} finding${rows.length === 1 ? "" : "s"}, the most time at stake first` }), list);
    this.el.addEventListener("keydown", (event) => {
      const item = /** @type {HTMLElement} */ (event.target).closest(".tp-insight");
      if (item && (event.key === "Enter" || event.key === " ") && event.target === item) {
        event.preventDefault();
        this.open(item);
      }
    });
  }

  /** @param {Element} el */
  open(el) {
    const row = Number(/** @type {HTMLElement} */ (el).dataset.row);
    if (el.getAttribute("data-row") !== null && row >= 0) openRow(this.ctx, row);
  }

  /** @param {Event} event */
  onClick(event) {
    const target = /** @type {HTMLElement} */ (event.target);
    const link = target.closest(".tp-link[data-row]");
    if (link) return this.open(link);
    const item = target.closest(".tp-insight");
    if (item && !window.getSelection()?.toString()) this.open(item);
  }

  update() {}

  resized() {}

  destroy() {
    this.el.removeEventListener("click", this.onClick);
  }
}

/** @param {Context} ctx @returns {ViewFace} */
export function create(ctx) {
  return new InsightsView(ctx);
}

/** A profile's payload carries its findings (a comparison's has none to show). @param {Data} data */
export const offered = (data) => Array.isArray(data.fields.insights) && !!data.vocab.insight_columns;

/** Its button says how many findings there are. @param {Data} data */
export const badge = (data) => (Array.isArray(data.fields.insights) && data.fields.insights.length ? String(data.fields.insights.length) : "");

/** The Insights view acts on none of the shared controls. @type {import("../types.js").ControlUse} */
export const controls = {};
