// @ts-check
// The table's columns: which the profile has data for (as src/torchprof/_views/cells.py), and
// widths that never truncate a number.
import { formatPercent, formatValue } from "./format.js";

/** @import { Data, Folded } from "./types.js" */

/**
 * The widest texts a numeric column can show: a value of each magnitude the column reaches at
 * its longest rounding (9.999 -> "10.00", 999.9 -> "1000", 1023 B), its extremes, with a sign
 * when it has negative values. Measuring these (not every row) sizes the column in O(decades).
 * @param {string} unit @param {number} lo @param {number} hi
 * @returns {string[]}
 */
export function widthSamples(unit, lo, hi) {
  const top = Math.max(Math.abs(lo), Math.abs(hi));
  if (!Number.isFinite(top)) return [];
  if (unit === "int") return [String(Math.round(hi)), String(Math.round(lo))];
  const out = new Set([formatValue(unit, hi), formatValue(unit, lo)]);
  const values = [];
  for (let e = -3; 10 ** e <= top * 10; e++) for (const m of [9.999, 99.99, 999.9, 1023.9]) values.push(m * 10 ** e);
  if (unit === "bytes") for (let k = 0; 1024 ** k <= top; k++) values.push(1023.9 * 1024 ** k);
  for (const v of values) {
    if (v > top) continue;
    out.add(formatValue(unit, v));
    if (lo < 0) out.add(formatValue(unit, -v));
  }
  return [...out];
}

/** The widest percentages a column can show. @param {number} lo @param {number} hi @param {number} base */
export function percentSamples(lo, hi, base) {
  if (!base || Number.isNaN(base)) return [];
  const out = new Set(["9.9%", formatPercent(hi, base), formatPercent(lo, base)]);
  if (Math.abs(hi / base) >= 0.1) out.add("99%");
  if (lo < 0) out.add("-9.9%");
  out.delete("");
  return [...out];
}

export const NODE_MIN = 168; // px the Node column keeps before the table scrolls sideways
export const NODE_MAX = 440; // px at most that the Node column claims for its names (longer ones give way)
export const CELL_PAD = 16; // horizontal padding of a cell
export const PCT_GAP = 4;

/**
 * Column widths for the space available. Numbers keep their measured width; the Node column
 * claims the room its names need (`nodeNeed`, the widest row's indent, name and type tag; at
 * least `nodeMin`, at most NODE_MAX) before the percentages: they show only when every column
 * fits with them and the names; the Node column takes the rest. Where even the bare numbers and
 * the names do not fit, the table scrolls sideways (the Node column stays pinned), so no number
 * and no name is cut. A header wraps between words, so its widest word counts.
 * @param {{value: number, pct: number, head: number}[]} cols measured px, padding not included
 * @param {number} available @param {number} [nodeMin] @param {number} [nodeNeed]
 * @returns {{showPct: boolean, widths: number[], minWidth: number, node: number}}
 */
export function tableLayout(cols, available, nodeMin = NODE_MIN, nodeNeed = 0) {
  const node = Math.ceil(Math.max(nodeMin, Math.min(NODE_MAX, nodeNeed)));
  /** @param {boolean} pct */
  const widths = (pct) => cols.map((c) => Math.ceil(Math.max(c.head, c.value + (pct && c.pct ? PCT_GAP + c.pct : 0)) + CELL_PAD));
  const sum = (/** @type {number[]} */ w) => w.reduce((a, b) => a + b, 0);
  const withPct = widths(true);
  if (node + sum(withPct) <= available) return { showPct: true, widths: withPct, minWidth: node + sum(withPct), node };
  const bare = widths(false);
  return { showPct: false, widths: bare, minWidth: node + sum(bare), node };
}

/**
 * A column of the table as the view draws it.
 * @typedef {object} ViewColumn
 * @property {string} key the registry column (what sorting uses)
 * @property {string} label
 * @property {string} title
 * @property {string} type "node" (the Node column: names) or the column's unit: "time" | "bytes" | "count" | "int"
 * @property {string} [of] the column whose root value is 100%
 * @property {string} [family]
 * @property {string} [self] for totals: the self column shown on hover
 * @property {boolean} sortable a header click sorts by it
 * @property {"low"|"high"} [spread] the folded steps' least or most value of `key`, not its mean
 * @property {string} [unknown] what a missing value is written as, where it means unknown (FLOPs)
 * @property {Float64Array} [values] filled on each update
 * @property {number} [base]
 */

/** The type of the Node column (the tree of names), beside the numbers' units. */
export const NODE = "node";

/**
 * Does the profile have something to show in this column (not all missing, not all zero)?
 * @param {Data} data @param {string} name
 */
export function hasData(data, name) {
  if (name === data.roles.calls) return data.n > 0; // a row that ran has calls, however many
  const values = data.num[name];
  if (!values || data.allNaN[name]) return false;
  for (let i = 1; i < values.length; i++) if (!Number.isNaN(values[i]) && values[i] !== 0) return true;
  return false;
}

/**
 * The column spec a view's self column is named by: with the op rows hidden its layer column
 * (Own CPU: the layer's ops folded in, prof.df's layer_self_cpu_us), else its own.
 * @param {Data} data @param {string} name @param {boolean} showOps
 */
export function shownSpec(data, name, showOps) {
  const spec = data.spec[name];
  return !showOps && spec?.layer_alt ? data.spec[spec.layer_alt] || spec : spec;
}

/**
 * The table's columns for this profile: the registry's view columns that have data (as
 * _views/cells.py view_columns), after the Node column. With `folded` (every step folded into
 * one tree) the CPU total is followed by its least and most of any step. A self column is named
 * for what it shows: without op rows, its layer column's values ("Own CPU": the layer's ops
 * folded in, as prof.df's layer_self_cpu_us), with them its own ("Self CPU", as prof.df's
 * self_cpu_us), so one label means one figure everywhere.
 * @param {Data} data @param {Folded|null} [folded] @param {boolean} [showOps]
 * @returns {ViewColumn[]}
 */
export function columnsFor(data, folded = null, showOps = true) {
  /** @type {ViewColumn[]} */
  const cols = [{ key: data.roles.name, label: data.spec[data.roles.name].label, type: NODE, title: "Layer, region, op or kernel; hover for path, type and input shapes", sortable: true }];
  const shown = new Set(data.vocab.view_columns.filter((c) => hasData(data, c)));
  for (const name of data.vocab.view_columns) {
    const spec = data.spec[name];
    if (!shown.has(name) || (spec.needs && !shown.has(spec.needs))) continue;
    const self = data.vocab.columns.find((c) => c.subtree === name);
    const named = shownSpec(data, name, showOps);
    const title = named !== spec ? `${named.about} (${spec.label} with the op rows shown)`
      : spec.layer_alt ? `${spec.about} An op row the threshold hides folds into its layer's figure.` : spec.about;
    cols.push({ key: name, label: named.label, type: spec.unit, title, of: spec.percent_of, family: spec.family, self: self?.name, sortable: true,
      unknown: spec.unknown ? data.vocab.unknown_mark : undefined });
    if (folded && name === data.vocab.threshold_column && folded.low[name]) {
      for (const [spread, word] of /** @type {const} */ ([["low", "min"], ["high", "max"]])) {
        cols.push({ key: name, label: `${spec.label} ${word}`, type: spec.unit, title: `The ${word === "min" ? "least" : "most"} ${spec.label} of any of the ${folded.count} steps (0 where a step did not run the row)`,
          of: spec.percent_of, family: spec.family, spread, sortable: false });
      }
    }
  }
  return cols;
}
