// @ts-check
// The Steps view: each recorded step's CPU time as a stacked bar of its parts (data loading,
// forward, backward, optimizer, communication, the rest: src/torchprof/_tree/steps.py, the
// vocabulary's `step_parts`), slow steps marked, and how much the steps' wall times spread. A
// click on a step shows it: the table of that step alone.
import { stepOpening } from "../answers.js";
import { h } from "../dom.js";
import { formatPercent, formatTime, missing } from "../format.js";

/** @import { Data, Context, ViewFace } from "../types.js" */

/** Words for the parts (the payload names them `<part>_us`). */
const PART_WORDS = /** @type {Record<string, string>} */ ({ data: "data loading", comm: "communication", other: "other (Python, idle)" });

/** A part's name in words: "data_us" -> "data loading". @param {string} part */
export function partLabel(part) {
  const bare = part.replace(/_us$/, "");
  return PART_WORDS[bare] ?? bare;
}

/**
 * The bars (pure: node-tested): per step its number, wall time, parts (µs, and share of the
 * longest step's total, which is the full bar), device idle time and slow flag; then the median,
 * least and most wall time and their spread ((max - min) / median).
 * @param {Data} data
 */
export function stepBars(data) {
  const parts = /** @type {string[]} */ (data.vocab.step_parts || []);
  const [idleKey, slowKey] = /** @type {string[]} */ (data.vocab.step_extra || []);
  const steps = data.steps.map((/** @type {Record<string, any>} */ s) => {
    const values = parts.map((p) => (missing(s[p] ?? NaN) ? 0 : Math.max(0, s[p])));
    return { step: String(s.step), wall: s.wall_us ?? NaN, values, total: values.reduce((a, b) => a + b, 0),
      idle: idleKey ? s[idleKey] ?? NaN : NaN, slow: slowKey ? !!s[slowKey] : false };
  });
  const longest = Math.max(0, ...steps.map((s) => s.total));
  const walls = steps.map((s) => s.wall).filter((v) => !missing(v)).sort((a, b) => a - b);
  const median = walls.length ? (walls.length % 2 ? walls[(walls.length - 1) / 2] : (walls[walls.length / 2 - 1] + walls[walls.length / 2]) / 2) : NaN;
  const min = walls.length ? walls[0] : NaN;
  const max = walls.length ? walls[walls.length - 1] : NaN;
  return {
    parts,
    steps: steps.map((s) => ({ ...s, shares: s.values.map((v) => (longest > 0 ? v / longest : 0)) })),
    median, min, max, spread: median > 0 ? (max - min) / median : NaN,
  };
}

/**
 * The Steps view.
 * @implements {ViewFace}
 */
class StepsView {
  /** @param {Context} ctx */
  constructor(ctx) {
    this.ctx = ctx;
    this.el = h("div", { class: `tp-panel tp-panel-${ctx.view} tp-steps-view`, "data-view": ctx.view, "data-testid": ctx.view });
    this.onClick = this.onClick.bind(this);
    this.el.addEventListener("click", this.onClick);
    this.build();
  }

  build() {
    const bars = stepBars(this.ctx.data);
    const legend = h("div", { class: "tp-steps-legend" });
    bars.parts.forEach((p, k) => legend.append(h("span", { class: "tp-steps-key" }, h("span", { class: `tp-part tp-part-${k}` }), partLabel(p))));
    const slow = bars.steps.filter((s) => s.slow).map((s) => "#" + s.step);
    const spread = `${bars.steps.length} steps · wall median ${formatTime(bars.median)}, min ${formatTime(bars.min)}, max ${formatTime(bars.max)}`
      + (missing(bars.spread) ? "" : ` · spread ${formatPercent(bars.spread, 1)} of the median`)
      + (slow.length ? ` · slow: ${slow.join(", ")}` : " · no slow step");
    const list = h("div", { class: "tp-steps-list", role: "list" });
    for (const s of bars.steps) {
      const bar = h("span", { class: "tp-steps-bar" });
      s.values.forEach((v, k) => {
        if (v <= 0) return;
        const seg = h("span", { class: `tp-part tp-part-${k}`, title: `${partLabel(bars.parts[k])}: ${formatTime(v)} (${formatPercent(v, s.total)})` });
        seg.style.width = (100 * s.shares[k]).toFixed(3) + "%";
        bar.append(seg);
      });
      const title = bars.parts.map((p, k) => `${partLabel(p)} ${formatTime(s.values[k])}`).join("\n") + (missing(s.idle) ? "" : `\ndevice idle ${formatTime(s.idle)}`);
      list.append(h("button", { type: "button", class: `tp-steps-row${s.slow ? " tp-slow" : ""}`, role: "listitem", "data-testid": "step-bar", "data-step": s.step, title: `step ${s.step}: click to show it\n${title}` },
        h("span", { class: "tp-steps-name", text: `#${s.step}` }), bar,
        h("span", { class: "tp-steps-wall", text: formatTime(s.wall) + (missing(s.idle) ? "" : ` · idle ${formatTime(s.idle)}`) }),
        h("span", { class: "tp-steps-flag", text: s.slow ? "slow" : "" })));
    }
    this.el.replaceChildren(h("div", { class: "tp-steps-note", "data-testid": "steps-spread", text: spread }), legend, list);
  }

  /** @param {Event} event */
  onClick(event) {
    const button = /** @type {HTMLElement|null} */ (/** @type {HTMLElement} */ (event.target).closest("[data-step]"));
    if (!button) return;
    const { ctx } = this;
    const st = ctx.state();
    const step = /** @type {string} */ (button.dataset.step);
    ctx.change({ step, view: ctx.rowsView, selected: "", zoom: "", expanded: stepOpening(ctx.data, step, st.expandedList, !!st.show_ops) });
  }

  /** @param {import("../types.js").FullState} st */
  update(st) {
    for (const b of this.el.querySelectorAll("[data-step]")) b.setAttribute("aria-current", String(/** @type {HTMLElement} */ (b).dataset.step === st.step));
  }

  resized() {}

  destroy() {
    this.el.removeEventListener("click", this.onClick);
  }
}

/** @param {Context} ctx @returns {ViewFace} */
export function create(ctx) {
  return new StepsView(ctx);
}

/** A profile with recorded steps whose payload splits them. @param {Data} data */
export const offered = (data) => data.steps.length > 0 && Array.isArray(data.vocab.step_parts);

/** The Steps view acts on none of the shared controls. @type {import("../types.js").ControlUse} */
export const controls = {};
