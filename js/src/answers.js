// @ts-check
// What the views that answer share: the headline above the controls (the costliest layer and
// module type, MFU), the hot path the table marks, and opening one row of the whole run in the
// table from another view (Insights, Steps, Memory): ancestors expanded, selected, scrolled to.
import { h } from "./dom.js";
import { visibleRows } from "./rows.js";
import { defaultExpanded, expandTo, rowOfPath, viewedTable, withPaths } from "./tree.js";

/** @import { Data, Context } from "./types.js" */

/**
 * The rows of the whole run's hot path (src/torchprof/_tree/hotpath.py, the payload's
 * `hot_path`), from the root down; empty when the payload has none (a comparison).
 * @param {Data} data @returns {Set<number>}
 */
export function hotRows(data) {
  const hot = data.fields.hot_path;
  return new Set(hot && Array.isArray(hot.rows) ? hot.rows.filter((/** @type {number} */ r) => r > 0 && r < data.n) : []);
}

/**
 * The headline's pieces: its text (the summary's `headline`, as the terminal and Markdown say it)
 * and the row of the costliest layer it names (-1: none), which the headline links to.
 * @param {Data} data @returns {{text: string, row: number}}
 */
export function headlineOf(data) {
  const text = typeof data.summary.headline === "string" ? data.summary.headline : "";
  const layer = data.fields.hot_path?.layer;
  const bottleneck = data.summary.bottleneck;
  let row = typeof layer === "number" && layer > 0 && layer < data.n ? layer : -1;
  if (row < 0 && bottleneck && typeof bottleneck.path === "string") row = rowOfPath(data, bottleneck.path);
  return { text, row };
}

/**
 * The headline line: one sentence, its costliest layer a link that opens that row in the table.
 * Null when the summary has none.
 * @param {Data} data @returns {HTMLElement|null}
 */
export function buildHeadline(data) {
  const { text, row } = headlineOf(data);
  if (!text) return null;
  const line = h("div", { class: "tp-headline", "data-testid": "headline" });
  // The headline names a layer by its key (a module's path, a region without its step), else its path.
  const names = row > 0 ? [data.summary.bottleneck?.layer, data.summary.bottleneck?.path, data.path[row], data.name[row]] : [];
  const name = names.find((n) => typeof n === "string" && n && text.includes(n)) || "";
  const at = name ? text.indexOf(name) : -1;
  if (at < 0) {
    line.textContent = text;
    return line;
  }
  const link = h("button", { type: "button", class: "tp-link", "data-testid": "headline-layer", "data-row": row, title: "Show this layer in the table", text: name });
  line.append(text.slice(0, at), link, text.slice(at + name.length));
  return line;
}

/**
 * What opens row `i` of the whole run in the table view: the run viewed, the row selected (the
 * table scrolls to it and highlights it), its ancestors expanded, and the threshold and search
 * cleared when they would hide it (the user asked for that row).
 * @param {Context} ctx @param {number} i @returns {Record<string, any>}
 */
export function openRowValues(ctx, i) {
  const { data } = ctx;
  const st = ctx.state();
  /** @type {Record<string, any>} */
  const values = { view: ctx.rowsView, step: "", selected: data.path[i], expanded: expandTo(data, i, 0, st.expandedList) };
  if (!visibleRows(data, { ...st, expanded: new Set(values.expanded), root: 0 }).rows.includes(i)) Object.assign(values, { min_pct: 0, search: "" });
  return values;
}

/** Opens row `i` of the whole run in the table (see openRowValues). @param {Context} ctx @param {number} i */
export function openRow(ctx, i) {
  if (i >= 0 && i < ctx.data.n) ctx.change(openRowValues(ctx, i));
}

/**
 * The whole run's hot path as the paths to open in the part of the run viewed: in one step, the
 * same layers in that step (`ProfilerStep#2/Net.fc` for `ProfilerStep#5/Net.fc`); in the steps
 * folded into one tree, the layers without their step. Paths the viewed table lacks are left out.
 * @param {Data} data @param {import("./types.js").Viewed} viewed @returns {string[]}
 */
export function hotPathIn(data, viewed) {
  const hot = data.fields.hot_path;
  if (!hot || !Array.isArray(hot.open)) return [];
  const prefix = data.vocab.step_prefix;
  const out = [];
  for (const p of /** @type {string[]} */ (hot.open)) {
    const inStep = !!prefix && p.startsWith(prefix);
    const cut = inStep ? p.indexOf("/") : -1;
    if (inStep && cut < 0) continue; // the step row itself: the viewed root
    const key = cut > 0 ? p.slice(cut + 1) : p;
    const path = viewed.folded ? key : viewed.root === 0 ? p : `${viewed.table.path[viewed.root]}/${key}`;
    if (rowOfPath(viewed.table, path) >= 0) out.push(path);
  }
  return out;
}

/**
 * The rows a step opens with, as the whole run does: two levels below its root and the hot path.
 * @param {Data} data @param {string} step @param {string[]} list the expanded paths now @param {boolean} showOps
 */
export function stepOpening(data, step, list, showOps) {
  const viewed = viewedTable(data, step);
  return withPaths(withPaths(list, defaultExpanded(viewed.table, showOps, viewed.root)), hotPathIn(data, viewed));
}
