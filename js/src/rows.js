// @ts-check
// The view rules, exactly src/torchprof/_views/rows.py: which rows of the viewed subtree show, in
// which order, with which values. A pytest cross-check runs both on the same trees and states.
import { cached, column, isTextColumn } from "./payload.js";
import { makeMatcher } from "./search.js";

/** @import { Data, Vocab, ViewState } from "./types.js" */

/**
 * A column name for a sort key (torch-style aliases accepted; unknown keys sort by the state's
 * default, CPU total).
 * @param {Vocab} vocab
 * @param {string|string[]|null|undefined} key
 */
export function resolveSort(vocab, key) {
  const fallback = stateDefaults(vocab).sort_by;
  if (Array.isArray(key)) key = key[0];
  if (!key) return fallback;
  key = vocab.sort_aliases[key] || key;
  return vocab.columns.some((c) => c.name === key && c.sortable) ? key : fallback;
}

/**
 * Whether sorting by `key` starts ascending: text (A to Z) and the execution order (first to
 * last) do; numbers start with the largest.
 * @param {Data} data @param {string} key
 */
export function sortsAscending(data, key) {
  return isTextColumn(data, key) || key === data.roles.order;
}

/**
 * The view state's defaults, by key (the vocabulary's `state`).
 * @param {Vocab} vocab @returns {Record<string, any>}
 */
export function stateDefaults(vocab) {
  return Object.fromEntries(vocab.state.map((k) => [k.name, k.default]));
}

/**
 * The selection half of visibleRows: 1 for rows of `root`'s subtree that the filters keep (kind,
 * threshold on CPU total, search) and for their ancestors up to `root`, before expansion and
 * sorting. O(n).
 * @param {Data} data @param {ViewState} state
 */
export function selectRows(data, state) {
  const { n, parent, kind, depth } = data;
  const shown = new Uint8Array(n);
  if (n === 0) return shown;
  const root = state.root ?? 0;
  const end = data.end[root];
  const showOps = !!state.show_ops;
  const values = data.num[data.vocab.threshold_column];
  const base = values[root];
  const minPct = Number(state.min_pct) || 0;
  const usePct = minPct > 0 && !Number.isNaN(base) && base !== 0;
  const match = makeMatcher(data, state.search);
  const maxDepth = state.max_depth ?? null;
  const layers = data.layerCodes;

  shown[root] = 1;
  for (let i = root + 1; i < end; i++) {
    if (!showOps && !layers.has(kind[i])) continue;
    if (maxDepth !== null && depth[i] > maxDepth) continue;
    if (usePct) {
      const v = values[i];
      if (Number.isNaN(v) || (100 * Math.abs(v)) / Math.abs(base) < minPct) continue;
    }
    if (match && !match(i)) continue;
    shown[i] = 1;
  }
  // Ancestors of shown rows: parents precede children in pre-order, so one backward sweep.
  for (let i = end - 1; i > root; i--) if (shown[i]) shown[parent[i]] = 1;
  return shown;
}

/**
 * _views/rows.py shown_values: the values a view shows for `name` given the rows it shows. A
 * self column (one with a `subtree` column) folds in, on each row, the op and kernel children the
 * view does not show, so a number only changes when a row appears or disappears beside it. Where
 * no op child shows this is the layer column, where all show the self column; in between, self
 * plus each hidden child in row order (the same additions, in the same order, as Python's).
 * @param {Data} data @param {string} name @param {Uint8Array} shown
 * @returns {Float64Array}
 */
export function shownValues(data, name, shown) {
  const spec = data.spec[name];
  const values = data.num[name];
  if (!spec || !spec.subtree || !spec.layer_alt) return values;
  const layer = data.num[spec.layer_alt];
  const sub = data.num[spec.subtree];
  const { n, parent, kind, layerCodes } = data;
  const opKids = new Int32Array(n);
  const shownKids = new Int32Array(n);
  const hiddenSum = new Float64Array(n);
  for (let i = 1; i < n; i++) {
    if (layerCodes.has(kind[i])) continue;
    const p = parent[i];
    opKids[p]++;
    if (shown[i]) shownKids[p]++;
    else if (!Number.isNaN(sub[i])) hiddenSum[p] += sub[i];
  }
  const out = Float64Array.from(values);
  for (let i = 0; i < n; i++) {
    if (opKids[i] === 0 || shownKids[i] === 0) out[i] = layer[i];
    else if (shownKids[i] < opKids[i] && !Number.isNaN(values[i])) out[i] = values[i] + hiddenSum[i];
  }
  return out;
}

/**
 * _views/rows.py natural_key: runs of digits compare as numbers (at any length: by digit count,
 * then digits), a digit run before text at the same place, case-insensitively.
 * @param {string} text @returns {[number, number, string][]}
 */
export function naturalKey(text) {
  /** @type {[number, number, string][]} */
  const out = [];
  const parts = text.toLowerCase().split(/(\d+)/);
  for (let k = 0; k < parts.length; k++) {
    const part = parts[k];
    if (!part) continue;
    if (k % 2) {
      const digits = part.replace(/^0+/, "") || "0";
      out.push([0, digits.length, digits]);
    } else {
      out.push([1, 0, part]);
    }
  }
  return out;
}

/**
 * Compares two natural keys the way Python compares the lists of tuples (code point order for
 * the text, like Python's str comparison).
 * @param {[number, number, string][]} a @param {[number, number, string][]} b
 */
export function compareNatural(a, b) {
  const m = Math.min(a.length, b.length);
  for (let k = 0; k < m; k++) {
    const x = a[k];
    const y = b[k];
    if (x[0] !== y[0]) return x[0] - y[0];
    if (x[1] !== y[1]) return x[1] - y[1];
    if (x[2] !== y[2]) return compareCodePoints(x[2], y[2]);
  }
  return a.length - b.length;
}

/** Python's str order (by code point; JS `<` compares UTF-16 units). @param {string} a @param {string} b */
function compareCodePoints(a, b) {
  const x = Array.from(a);
  const y = Array.from(b);
  const m = Math.min(x.length, y.length);
  for (let k = 0; k < m; k++) {
    if (x[k] !== y[k]) return /** @type {number} */ (x[k].codePointAt(0)) - /** @type {number} */ (y[k].codePointAt(0));
  }
  return x.length - y.length;
}

/**
 * _views/rows.py is_step_row: a `ProfilerStep#N` region (steps keep the order they ran).
 * @param {Data} data @param {number} i
 */
export function isStepRow(data, i) {
  return data.kind[i] === data.stepCode && data.name[i].startsWith(data.vocab.step_prefix);
}

/**
 * How siblings compare for a sort key: numbers descending or ascending, text in natural order;
 * missing values last either way; ties 0 (the sort is stable, so they keep tree order).
 * @param {Data} data @param {string} key @param {boolean} ascending @param {Uint8Array} shown
 * @returns {{compare: (a: number, b: number) => number, present: (i: number) => boolean}}
 */
function siblingCompare(data, key, ascending, shown) {
  const sign = ascending ? 1 : -1;
  if (isTextColumn(data, key)) {
    const text = column(data, key);
    const keys = cached(data, "natural:" + key, () => Array.from(/** @type {ArrayLike<any>} */ (text), (v) => (v === null || v === undefined ? null : naturalKey(String(v)))));
    return {
      compare: (a, b) => sign * compareNatural(/** @type {any} */ (keys[a]), /** @type {any} */ (keys[b])),
      present: (i) => keys[i] !== null,
    };
  }
  const order = key in data.num ? shownValues(data, key, shown) : /** @type {Float64Array} */ (column(data, key));
  return {
    compare: (a, b) => {
      const va = order[a];
      const vb = order[b];
      return ascending ? va - vb : vb - va;
    },
    present: (i) => !Number.isNaN(order[i]),
  };
}

/**
 * Rows to show, in display order, from `state.root` down: exactly _views/rows.py visible_rows.
 *
 * A row is selected when its kind is shown (layers, plus ops and kernels with show_ops), its CPU
 * total is at least min_pct percent of the root's, and it matches the search; ancestors of
 * selected rows are shown too. Collapsed rows (not in `expanded`, a Set of paths; null = all
 * expanded) hide their children. Siblings are sorted by sort_by (shownValues; stable, missing
 * values last, text in natural order) after the ProfilerStep rows among them, which keep the
 * order they ran in. O(n) plus the sibling sorts.
 *
 * Returns {rows, hasKids, shown}: hasKids[i] = 1 when row i has children under the current
 * filters (whether or not it is expanded), i.e. when it gets a caret; shown is selectRows'.
 * @param {Data} data @param {ViewState} state
 * @returns {{rows: number[], hasKids: Uint8Array, shown: Uint8Array}}
 */
export function visibleRows(data, state) {
  const { n } = data;
  const hasKids = new Uint8Array(n);
  if (n === 0) return { rows: [], hasKids, shown: new Uint8Array(0) };
  const root = state.root ?? 0;
  const key = resolveSort(data.vocab, state.sort_by);
  const ascending = !!state.ascending;
  const expanded = state.expanded ?? null;
  const shown = selectRows(data, state);
  const { childStart, childIndex } = data;
  const { compare, present } = siblingCompare(data, key, ascending, shown);
  const exec = data.num[data.roles.order];
  /** @param {number[]} kids */
  const order = (kids) => {
    const steps = kids.filter((k) => isStepRow(data, k));
    const rest = steps.length ? kids.filter((k) => !isStepRow(data, k)) : kids;
    const have = rest.filter(present);
    have.sort(compare);
    if (have.length < rest.length) for (const k of rest) if (!present(k)) have.push(k);
    if (!steps.length) return have;
    if (exec) steps.sort((a, b) => exec[a] - exec[b]);
    return steps.concat(have);
  };

  const rows = [];
  const stack = [root];
  while (stack.length) {
    const i = /** @type {number} */ (stack.pop());
    rows.push(i);
    let kids = [];
    for (let c = childStart[i]; c < childStart[i + 1]; c++) {
      const k = childIndex[c];
      if (shown[k]) kids.push(k);
    }
    if (kids.length === 0) continue;
    hasKids[i] = 1;
    if (expanded !== null && i !== root && !expanded.has(data.path[i])) continue;
    if (kids.length > 1) kids = order(kids);
    for (let k = kids.length - 1; k >= 0; k--) stack.push(kids[k]);
  }
  return { rows, hasKids, shown };
}

/**
 * Why rows of the viewed subtree are not shown, for the "N rows hidden" note: `below` fail the
 * threshold, `unmatched` pass it but not the search, `ops` are op and kernel rows hidden while
 * "aten ops" is off. Rows kept as ancestors of shown rows are not hidden; rows under a collapsed
 * row are not counted (their caret says they are there).
 * @param {Data} data @param {ViewState} state @param {Uint8Array} [shown] selectRows(data, state)
 */
export function hiddenCounts(data, state, shown = selectRows(data, state)) {
  const root = state.root ?? 0;
  const end = data.end[root];
  const values = data.num[data.vocab.threshold_column];
  const base = values[root];
  const minPct = Number(state.min_pct) || 0;
  const usePct = minPct > 0 && !Number.isNaN(base) && base !== 0;
  const showOps = !!state.show_ops;
  let below = 0;
  let unmatched = 0;
  let ops = 0;
  for (let i = root + 1; i < end; i++) {
    if (shown[i]) continue;
    if (!showOps && !data.layerCodes.has(data.kind[i])) ops++;
    else if (usePct && (Number.isNaN(values[i]) || (100 * Math.abs(values[i])) / Math.abs(base) < minPct)) below++;
    else unmatched++;
  }
  return { below, unmatched, ops };
}
