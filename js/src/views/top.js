// @ts-check
// The Top view: the layers that cost the most themselves (their ops folded in, the ops named), and
// the same summed per module type (prof.by_type()). The ranking is pure (node --test); the lists
// are plain DOM.
import { shownSpec } from "../columns.js";
import { cellPercent, formatTime } from "../format.js";
import { fillLabel, h, labelElement, typeTag } from "../dom.js";
import { makeMatcher } from "../search.js";
import { expandTo, rowOfPath, stepRows, viewedTable } from "../tree.js";

/** @import { Data, Context, ViewFace } from "../types.js" */

/**
 * The self column the Top view ranks by for a metric: the metric when it is a self column, the
 * self column whose subtree it is for a total (CPU total -> Self CPU), else the threshold
 * column's (Self CPU).
 * @param {Data} data @param {string} metric
 */
export function topColumn(data, metric) {
  const spec = data.spec[metric];
  if (spec?.rollup === "self" && spec.layer_alt) return metric;
  const selfOf = (/** @type {string} */ total) => data.vocab.columns.find((c) => c.subtree === total && c.layer_alt);
  return (selfOf(metric) ?? selfOf(data.vocab.threshold_column))?.name ?? metric;
}

/**
 * Layers (modules and regions, the viewed root aside) of `root`'s subtree ranked by their self
 * value with their ops folded in (the layer column: what the layer itself costs), the largest
 * first; each with its op children, largest first, so the op behind a layer's cost shows.
 * @param {Data} data @param {number} root @param {string} selfColumn @param {number} [limit]
 * @returns {{row: number, value: number, ops: {row: number, value: number}[]}[]}
 */
export function topLayers(data, root, selfColumn, limit = 100) {
  const spec = data.spec[selfColumn];
  const values = data.num[spec.layer_alt || selfColumn];
  const sub = data.num[spec.subtree || selfColumn];
  const rows = [];
  for (let i = root + 1; i < data.end[root]; i++) {
    if (data.layerCodes.has(data.kind[i]) && values[i] > 0) rows.push(i);
  }
  rows.sort((a, b) => values[b] - values[a] || a - b);
  return rows.slice(0, limit).map((i) => {
    const ops = [];
    for (let c = data.childStart[i]; c < data.childStart[i + 1]; c++) {
      const k = data.childIndex[c];
      if (!data.layerCodes.has(data.kind[k]) && sub[k] > 0) ops.push({ row: k, value: sub[k] });
    }
    ops.sort((a, b) => b.value - a.value || a.row - b.row);
    return { row: i, value: values[i], ops };
  });
}

/**
 * The ranked layers with each layer of every `ProfilerStep#N` folded into one (its path without
 * the step; the steps' own rows are one, "ProfilerStep#*"): own times and ops added up, the row
 * with the most own time kept (what a click opens), `steps` how many steps it ran in (0 for a row
 * under no step). Costliest first.
 * @param {Data} data @param {{row: number, value: number, ops: {row: number, value: number}[]}[]} ranked
 * @returns {{row: number, value: number, ops: {row: number, value: number}[], key: string, steps: number}[]}
 */
export function foldStepLayers(data, ranked) {
  const prefix = data.vocab.step_prefix;
  /** @type {Map<string, {row: number, value: number, best: number, key: string, steps: number, ops: Map<string, {row: number, value: number}>}>} */
  const groups = new Map();
  for (const t of ranked) {
    const path = data.path[t.row];
    const inStep = !!prefix && path.startsWith(prefix);
    const cut = inStep ? path.indexOf("/") : -1;
    // A step's own row: every step's own time is one line, "ProfilerStep#*".
    const key = cut > 0 ? path.slice(cut + 1) : inStep ? prefix + "*" : path;
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { row: t.row, value: 0, best: -Infinity, key, steps: 0, ops: new Map() }));
    g.value += t.value;
    if (inStep) g.steps++;
    if (t.value > g.best) [g.best, g.row] = [t.value, t.row];
    for (const o of t.ops) {
      const op = g.ops.get(data.name[o.row]);
      if (op) op.value += o.value;
      else g.ops.set(data.name[o.row], { ...o });
    }
  }
  return [...groups.values()]
    .map((g) => ({ row: g.row, value: g.value, key: g.key, steps: g.steps, ops: [...g.ops.values()].sort((a, b) => b.value - a.value || a.row - b.row) }))
    .sort((a, b) => b.value - a.value || a.row - b.row);
}

/**
 * _tree/aggregate.py by_type over `root`'s subtree: module metrics summed per class, slowest
 * (CPU total) first. Totals come from the outermost module of each class only (a Sequential in
 * a Sequential is not counted twice: a module counts as nested when a module of its class is
 * above it with only modules between); self values and calls add up everywhere. A column missing
 * from the whole table stays NaN. One pre-order pass with the path from the root as a stack.
 * @param {Data} data @param {number} [root]
 * @returns {{type: string, modules: number, sums: Record<string, number>}[]}
 */
export function byType(data, root = 0) {
  const moduleCode = data.moduleCode;
  const additive = data.vocab.columns.filter((c) => ["total", "self", "count"].includes(c.rollup) && c.name in data.num);
  /** @type {Map<string, {type: string, modules: number, sums: Record<string, number>}>} */
  const groups = new Map();
  /** @type {number[]} */
  const path = [];
  /** @type {Map<string, number>[]} */
  const runs = [new Map()];
  for (let i = root; i < data.end[root]; i++) {
    while (path.length && path[path.length - 1] !== data.parent[i]) {
      const top = /** @type {number} */ (path.pop());
      if (data.kind[top] === moduleCode) {
        const counts = runs[runs.length - 1];
        const t = String(data.type[top]);
        counts.set(t, /** @type {number} */ (counts.get(t)) - 1);
      } else {
        runs.pop();
      }
    }
    if (data.kind[i] === moduleCode) {
      const t = String(data.type[i]);
      const counts = runs[runs.length - 1];
      const nested = (counts.get(t) || 0) > 0;
      counts.set(t, (counts.get(t) || 0) + 1);
      let g = groups.get(t);
      if (!g) {
        g = { type: t, modules: 0, sums: Object.fromEntries(additive.map((c) => [c.name, 0])) };
        groups.set(t, g);
      }
      g.modules++;
      for (const c of additive) {
        if (nested && c.rollup === "total") continue;
        const v = data.num[c.name][i];
        g.sums[c.name] += Number.isNaN(v) ? 0 : v;
      }
    } else {
      runs.push(new Map());
    }
    path.push(i);
  }
  const out = [...groups.values()];
  for (const c of additive) {
    if (data.allNaN[c.name] || data.num[c.name].subarray(1).every(Number.isNaN)) for (const g of out) g.sums[c.name] = NaN;
  }
  const size = data.vocab.threshold_column;
  return out.sort((a, b) => b.sums[size] - a.sums[size]);
}

/**
 * An op's name as a short note shows it: an autograd engine range by its node ("ConvolutionBackward0
 * (bwd)", not "autograd::engine::evaluate_function: ConvolutionBackward0").
 * @param {Data} data @param {number} i
 */
export function shortOpName(data, i) {
  const name = data.name[i];
  const prefix = data.vocab.backward_prefix;
  return prefix && name.startsWith(prefix) ? `${name.slice(prefix.length)} (bwd)` : name;
}

// -- the Top view -----------------------------------------------------------------------------

/**
 * The Top view: the layers that cost the most themselves (self time with their ops folded in,
 * the ops named), and the same summed per module type (prof.by_type()).
 * @param {Context} ctx @returns {ViewFace}
 */
export function create(ctx) {
  const { data } = ctx;
  const layersBox = h("div", { class: "tp-top-list", role: "list", "data-testid": "top-layers" });
  const typesBox = h("div", { class: "tp-top-list", role: "list", "data-testid": "top-types" });
  const layersTitle = h("h3", { class: "tp-top-title" });
  // The same layer in every ProfilerStep#N is one line, unless the user unfolds the steps.
  const foldBox = /** @type {HTMLInputElement} */ (h("input", { type: "checkbox", "data-testid": "top-fold-steps", checked: true }));
  const foldLabel = h("label", { class: "tp-ctl tp-top-fold", title: "Add up each layer over the ProfilerStep#N rows it ran in" }, foldBox, " fold steps");
  const typesTitle = h("h3", { class: "tp-top-title" });
  const el = h("div", { class: `tp-panel tp-panel-${ctx.view}`, "data-view": ctx.view },
    h("section", { class: "tp-top-section" }, h("div", { class: "tp-top-head" }, layersTitle, foldLabel), layersBox),
    h("section", { class: "tp-top-section" }, typesTitle, typesBox));
  let viewed = viewedTable(data, "");
  /** @type {import("../types.js").FullState|null} */
  let last = null;

  /**
   * One ranked line: rank, name (its path on hover), a tag, the value with its share and a bar,
   * and a note.
   * @param {number} rank @param {string} name @param {string} title @param {string} tag
   * @param {string} value @param {string} pct @param {number} share @param {string} note
   */
  function line(rank, name, title, tag, value, pct, share, note) {
    const label = labelElement();
    fillLabel(label, name, null);
    const bar = h("span", { class: "tp-bar" });
    bar.style.width = Math.max(0, Math.min(100, share)) + "%";
    return h("div", { class: "tp-top-row", role: "listitem", title },
      h("span", { class: "tp-top-rank", text: String(rank) }),
      h("span", { class: "tp-top-name" }, label, h("span", { class: "tp-tag", text: tag })),
      h("span", { class: "tp-top-value tp-num" }, bar, h("span", { class: "tp-v", text: value }), h("span", { class: "tp-pct", text: pct })),
      h("span", { class: "tp-top-note", text: note }));
  }

  /** @param {Event} event */
  function onClick(event) {
    const row = /** @type {HTMLElement|null} */ (/** @type {HTMLElement} */ (event.target).closest(".tp-top-row[data-path]"));
    if (row) ctx.change({ selected: /** @type {string} */ (row.dataset.path) });
  }

  /** @param {Event} event */
  function onOpen(event) {
    const row = /** @type {HTMLElement|null} */ (/** @type {HTMLElement} */ (event.target).closest(".tp-top-row[data-path]"));
    if (!row) return;
    if (event instanceof KeyboardEvent && event.key !== "Enter") return;
    const path = /** @type {string} */ (row.dataset.path);
    const i = rowOfPath(viewed.table, path);
    ctx.change({ view: ctx.rowsView, selected: path, expanded: expandTo(viewed.table, i, viewed.root, ctx.state().expandedList) });
  }

  el.addEventListener("click", onClick);
  foldBox.addEventListener("change", () => last && face.update(last, viewed, /** @type {any} */ (null)));
  el.addEventListener("dblclick", onOpen);
  el.addEventListener("keydown", onOpen);

  /** @type {ViewFace} */
  const face = {
    el,
    update(st, nextViewed) {
      last = st;
      viewed = nextViewed;
      const table = viewed.table;
      const root = viewed.root;
      const selfColumn = topColumn(table, st.metric);
      const spec = table.spec[selfColumn];
      const base = table.num[spec.percent_of || table.vocab.threshold_column][root];
      const label = shownSpec(table, selfColumn, false).label;  // (its values: the layer column, as the table names it)
      const match = makeMatcher(table, st.search);
      const steps = root === 0 && !viewed.folded && stepRows(table).length > 1;
      foldLabel.hidden = !steps;
      const fold = steps && foldBox.checked;
      const layers = topLayers(table, root, selfColumn, match || fold ? Infinity : 100).filter((t) => !match || match(t.row));
      const top = (fold ? foldStepLayers(table, layers) : layers.map((t) => ({ ...t, key: "", steps: 0 }))).slice(0, 100);
      layersTitle.textContent = `Layers by ${label} (their ops folded in)${match ? ` · matching “${st.search.trim()}”` : ""}`;
      const selected = rowOfPath(table, st.selected);
      layersBox.replaceChildren(...top.map((t, k) => {
        const i = t.row;
        const ops = t.ops.slice(0, 3).map((o) => `${shortOpName(table, o.row)} ${cellPercent(o.value, t.value) || formatTime(o.value)}`).join(", ");
        const tag = typeTag(table, i);
        const where = t.key || (table.path[i].startsWith(table.path[root]) && root ? table.path[i].slice(table.path[root].length + 1) : table.path[i]);
        const inSteps = t.steps > 1 ? `in ${t.steps} steps` : "";
        const note = [inSteps, ops ? "ops: " + ops : ""].filter(Boolean).join(" · ");
        const row = line(k + 1, where, `${table.path[i]}${inSteps ? ` (the costliest of its ${t.steps} steps; the time adds them up)` : ""}\n${label}: ${formatTime(t.value)}${ops ? "\nops: " + ops : ""}\nDouble-click or Enter: show in the table`,
          tag, formatTime(t.value), cellPercent(t.value, base), (100 * t.value) / base, note);
        row.dataset.path = table.path[i];
        row.tabIndex = 0;
        if (i === selected) row.classList.add("tp-selected");
        return row;
      }));
      const alt = spec.layer_alt || selfColumn;
      const groups = byType(table, root);
      const totalColumn = spec.subtree || table.vocab.threshold_column;
      typesTitle.textContent = `Module types by ${label} (prof.by_type())`;
      const ranked = groups.filter((g) => g.sums[alt] > 0).sort((a, b) => b.sums[alt] - a.sums[alt]);
      const calls = (/** @type {{sums: Record<string, number>}} */ g) => g.sums[table.roles.calls];
      typesBox.replaceChildren(...ranked.map((g, k) => line(k + 1, g.type, `${g.type}: ${g.modules} modules\n${label} (ops folded in): ${formatTime(g.sums[alt])}\n${table.spec[totalColumn].label} (outermost of each): ${formatTime(g.sums[totalColumn])}\ncalls: ${calls(g)}`,
        `${g.modules}×`, formatTime(g.sums[alt]), cellPercent(g.sums[alt], base), (100 * g.sums[alt]) / base,
        `${table.spec[totalColumn].label} ${formatTime(g.sums[totalColumn])} · ${calls(g)} call${calls(g) === 1 ? "" : "s"}${viewed.folded ? ` in ${viewed.folded.count} steps` : ""}`)));
      if (!top.length) layersBox.append(h("p", { class: "tp-empty", text: "No layer has self time here." }));
    },
    resized() {},
    destroy() {},
  };
  return face;
}

/** The shared control the Top view acts on: the search picks the layers ranked. @type {import("../types.js").ControlUse} */
export const controls = { search: true };
