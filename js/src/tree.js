// @ts-check
// Moving in the tree: the steps of a run and the part of it viewed, a row by its path, and what
// clicks do to the `expanded` list (the defaults mirror src/torchprof/_views/state.py).
import { cached } from "./payload.js";
import { isStepRow, selectRows } from "./rows.js";

/** @import { Data, ViewState, Viewed } from "./types.js" */

/**
 * _tree/aggregate.py step_rows: rows of the ProfilerStep regions not inside another step, in the
 * order they ran.
 * @param {Data} data @returns {number[]}
 */
export function stepRows(data) {
  const out = [];
  for (let i = 0; i < data.n; ) {
    if (isStepRow(data, i)) {
      out.push(i);
      i = data.end[i];
    } else {
      i++;
    }
  }
  const exec = data.num[data.roles.order];
  // A table without an execution order (a comparison, whose steps are folded into one
  // ProfilerStep#* row) has no steps to pick.
  return exec ? out.sort((a, b) => exec[a] - exec[b]) : [];
}

/**
 * The table and root row a `step` state value views: the whole run (""), the folded steps
 * ("all"), or one step by number; an unknown step views the whole run.
 * @param {Data} data @param {string} step
 * @returns {Viewed}
 */
export function viewedTable(data, step) {
  if (step && step === data.vocab.all_steps && data.folded) return { table: data.folded.table, root: 0, folded: data.folded };
  if (step) {
    const name = data.vocab.step_prefix + step;
    for (const row of stepRows(data)) if (data.name[row] === name) return { table: data, root: row, folded: null };
  }
  return { table: data, root: 0, folded: null };
}

/**
 * The row of a path in a table, or -1.
 * @param {Data} data @param {string} path
 */
export function rowOfPath(data, path) {
  if (!path) return -1;
  const index = cached(data, "rowOfPath", () => new Map(data.path.map((p, i) => [p, i])));
  return index.get(path) ?? -1;
}

// -- expansion helpers (what clicks do to the `expanded` list) --------------------------------

/**
 * Paths expanded by default: every layer one level below `root` with children, so rows down to
 * two levels below it show; with ops shown also the layers two levels below that hold only ops.
 * Same as _views/state.py default_expanded.
 * @param {Data} data @param {boolean} showOps @param {number} [root]
 */
export function defaultExpanded(data, showOps, root = 0) {
  const { depth } = data;
  const out = [];
  const top = depth[root];
  for (let i = root + 1; i < data.end[root]; i++) {
    const d = depth[i] - top;
    if (d === 1 && data.layerCodes.has(data.kind[i]) && data.childStart[i + 1] > data.childStart[i]) out.push(data.path[i]);
    else if (showOps && d === 2 && isLeafLayer(data, i)) out.push(data.path[i]);
  }
  return out;
}

/**
 * A layer whose children are all ops or kernels (and there is at least one).
 * @param {Data} data @param {number} i
 */
export function isLeafLayer(data, i) {
  const layers = data.layerCodes;
  if (!layers.has(data.kind[i])) return false;
  const { childStart, childIndex, kind } = data;
  if (childStart[i + 1] === childStart[i]) return false;
  for (let c = childStart[i]; c < childStart[i + 1]; c++) if (layers.has(kind[childIndex[c]])) return false;
  return true;
}

/** Every row that has children: "expand all". @param {Data} data */
export function allExpandable(data) {
  const out = [];
  for (let i = 1; i < data.n; i++) if (data.childStart[i + 1] > data.childStart[i]) out.push(data.path[i]);
  return out;
}

/** `list` with `path` added or removed. @param {string[]} list @param {string} path */
export function toggleExpanded(list, path) {
  return list.includes(path) ? list.filter((p) => p !== path) : [...list, path];
}

/** @param {string[]} list @param {string[]} paths */
export function withPaths(list, paths) {
  const have = new Set(list);
  const added = paths.filter((p) => !have.has(p) && (have.add(p), true));
  return added.length ? [...list, ...added] : list;
}

/**
 * `expanded` plus the ancestors of every row the filters select, so a search shows its matches
 * even inside collapsed layers. Returns the same list when nothing had to open.
 * @param {Data} data @param {ViewState} state @param {string[]} list
 */
export function expandMatches(data, state, list) {
  const shown = selectRows(data, state);
  const root = state.root ?? 0;
  const open = [];
  for (let i = root + 1; i < data.end[root]; i++) {
    const p = data.parent[i];
    if (shown[i] && p > root && shown[p] === 1) {
      open.push(data.path[p]);
      shown[p] = 2; // listed once
    }
  }
  return withPaths(list, open);
}

/**
 * `expanded` plus the shown leaf layers, so turning ops on shows the ops of the layers in view.
 * @param {Data} data @param {number[]} rows @param {string[]} list
 */
export function expandLeafLayers(data, rows, list) {
  return withPaths(list, rows.filter((i) => i > 0 && isLeafLayer(data, i)).map((i) => data.path[i]));
}

/**
 * `expanded` plus every ancestor of row `i` below `root`, so the row shows (a selection made in
 * the Flame or Top view, revealed in the table).
 * @param {Data} data @param {number} i @param {number} root @param {string[]} list
 */
export function expandTo(data, i, root, list) {
  const open = [];
  for (let p = data.parent[i]; p > root; p = data.parent[p]) open.push(data.path[p]);
  return withPaths(list, open.reverse());
}

/**
 * Paths to expand so that row `i` shows: its ancestors below the root.
 * @param {Data} data @param {number} i
 */
export function ancestorPaths(data, i) {
  const out = [];
  for (let p = data.parent[i]; p > 0; p = data.parent[p]) out.push(data.path[p]);
  return out.reverse();
}

/**
 * Children of every row in execution order (the order they first ran: conv1, bn1, relu, ...),
 * made once per table.
 * @param {Data} data @returns {{start: Int32Array, index: Int32Array}}
 */
export function execChildren(data) {
  return cached(data, "execChildren", () => {
    const exec = data.num[data.roles.order];
    const index = Int32Array.from(data.childIndex);
    if (!exec) return { start: data.childStart, index }; // a table without it (a comparison): row order
    for (let i = 0; i < data.n; i++) {
      const a = data.childStart[i];
      const b = data.childStart[i + 1];
      if (b - a > 1) index.subarray(a, b).sort((x, y) => exec[x] - exec[y] || x - y);
    }
    return { start: data.childStart, index };
  });
}

/**
 * The nodes from the layout's root down to `i` (the Flame view's breadcrumb).
 * @param {Data} data @param {number} root @param {number} i @returns {number[]}
 */
export function ancestry(data, root, i) {
  const out = [];
  for (let p = i; p >= 0; p = data.parent[p]) {
    out.push(p);
    if (p === root) return out.reverse();
  }
  return [root];
}
