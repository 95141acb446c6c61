// @ts-check
// The controls above the views: the view switcher, the step picker, the min-% slider, "aten ops",
// the search, the sort, expand/collapse, CSV export and the row count, and the note on hidden
// rows. Each control shows only in the views whose module lists it (ControlUse). The slider's
// scale and the note's words are pure (node --test).
import { NODE, columnsFor, shownSpec } from "./columns.js";
import { h } from "./dom.js";
import { hiddenCounts, resolveSort, sortsAscending, visibleRows } from "./rows.js";
import { stepOpening } from "./answers.js";
import { expandLeafLayers, expandMatches, stepRows, viewedTable } from "./tree.js";

/** @import { Data, FullState, ControlUse, Viewed, Visible } from "./types.js" */

export const SLIDER_STEPS = 1000;
const SLIDER_DECADES = [-2, 2]; // 0.01% .. 100%, one decade per quarter of the track

/**
 * The min-% slider is logarithmic: position 0 is 0% (nothing hidden), then 0.01% to 100% in
 * equal steps per decade, rounded to two significant digits. On the old linear 0-100 track a
 * 27 px drag jumped to 16%; here the first quarter of the track covers 0.01-0.1%.
 * @param {number} position 0..SLIDER_STEPS
 */
export function sliderToPct(position) {
  if (!(position > 0)) return 0;
  const [lo, hi] = SLIDER_DECADES;
  const pct = 10 ** (lo + ((hi - lo) * Math.min(position, SLIDER_STEPS)) / SLIDER_STEPS);
  return Number(pct.toPrecision(2));
}

/** The slider position of a percentage (the inverse of sliderToPct, to the nearest step). @param {number} pct */
export function pctToSlider(pct) {
  if (!(pct > 0)) return 0;
  const [lo, hi] = SLIDER_DECADES;
  const position = Math.round(((Math.log10(pct) - lo) / (hi - lo)) * SLIDER_STEPS);
  return Math.max(1, Math.min(SLIDER_STEPS, position));
}

/** A threshold as the slider's label writes it: "0%", "0.01%", "1.5%", "20%". @param {number} pct */
export function pctLabel(pct) {
  return `${Number(Number(pct).toPrecision(2))}%`;
}

/**
 * The "N rows hidden" note: what hides rows and how many, in words; "" when nothing is hidden
 * by the threshold or the search.
 * @param {{below: number, unmatched: number}} counts @param {number} minPct @param {string} search
 */
export function hiddenNote(counts, minPct, search) {
  const parts = [];
  if (counts.below) parts.push(`${counts.below} below ${pctLabel(minPct)} of CPU total`);
  if (counts.unmatched) parts.push(`${counts.unmatched} not matching “${search.trim()}”`);
  if (!parts.length) return "";
  const total = counts.below + counts.unmatched;
  return `${total} ${total === 1 ? "row" : "rows"} hidden (${parts.join(", ")})`;
}

// -- the DOM ----------------------------------------------------------------------------------

/**
 * The controls' elements, built once per payload.
 * @typedef {object} Controls
 * @property {HTMLElement} bar the row of controls
 * @property {HTMLElement} switcher
 * @property {HTMLSelectElement|null} step
 * @property {HTMLInputElement} slider
 * @property {HTMLElement} sliderValue
 * @property {HTMLInputElement} ops
 * @property {HTMLInputElement} search
 * @property {HTMLSelectElement} sort
 * @property {HTMLElement} rowCount
 * @property {HTMLElement} note the hidden-rows note (below the bar)
 * @property {HTMLElement} noteText
 * @property {Record<string, ControlUse>} uses the controls each offered view acts on
 */

/** "Table", "Flame", "Top", from the vocabulary's view names. @param {string} view */
export const viewLabel = (view) => view.charAt(0).toUpperCase() + view.slice(1);

/**
 * The step picker: the whole run, every step folded into one tree (two steps or more), each step.
 * Null for a run without steps.
 * @param {Data} data
 */
function stepPicker(data) {
  const steps = stepRows(data);
  if (!steps.length) return null;
  const step = /** @type {HTMLSelectElement} */ (h("select", { class: "tp-select", "data-testid": "step", "aria-label": "Part of the run viewed" },
    h("option", { value: "", text: "whole run" })));
  if (data.folded) step.append(h("option", { value: data.vocab.all_steps, text: `all ${data.folded.count} steps (mean)` }));
  for (const row of steps) {
    const number = data.name[row].slice(data.vocab.step_prefix.length);
    step.append(h("option", { value: number, text: `step #${number}` }));
  }
  return step;
}

/** The sort picker: execution order (where the table has one), name, then every numeric column. @param {Data} data */
function sortPicker(data) {
  const R = data.roles;
  const sort = /** @type {HTMLSelectElement} */ (h("select", { class: "tp-select", "data-testid": "sort", "aria-label": "Sort siblings by" }));
  if (data.spec[R.order]) sort.append(h("option", { value: R.order, text: "execution order" }));
  sort.append(h("option", { value: R.name, text: "name (natural)" }));
  for (const col of columnsFor(data)) if (col.type !== NODE) sort.append(h("option", { value: col.key, text: col.label }));
  return sort;
}

/**
 * Builds the controls for the views offered, in the vocabulary's order.
 * @param {Data} data @param {[string, ControlUse][]} views each offered view and the controls it acts on
 * @returns {Controls}
 */
export function buildControls(data, views) {
  const uses = Object.fromEntries(views);
  // data-for: the views a control acts on (hidden in the others, so none sits there doing nothing).
  const usedBy = (/** @type {(use: ControlUse) => boolean|undefined} */ acts) => views.filter(([, use]) => acts(use)).map(([name]) => name).join(" ");
  const switcher = h("div", { class: "tp-switch", role: "group", "aria-label": "View" },
    ...views.map(([view]) => h("button", { type: "button", class: "tp-switch-btn", "data-view": view, "data-testid": `view-${view}`, text: viewLabel(view) })));
  const step = stepPicker(data);
  const slider = /** @type {HTMLInputElement} */ (h("input", { type: "range", min: "0", max: String(SLIDER_STEPS), step: "1", "data-testid": "min-pct", "aria-label": "Minimum percent of CPU total" }));
  const sliderValue = h("output", { class: "tp-slider-value", "data-testid": "min-pct-value" });
  const ops = /** @type {HTMLInputElement} */ (h("input", { type: "checkbox", "data-testid": "show-ops" }));
  const search = /** @type {HTMLInputElement} */ (h("input", { type: "search", "data-testid": "search", "data-for": usedBy((u) => u.search), placeholder: "Find: name, glob * ?, or path:…", "aria-label": "Find rows by name (glob * ?), or by path after path:", spellcheck: "false" }));
  const sort = sortPicker(data);
  const rowCount = h("span", { class: "tp-count", "data-testid": "row-count", "aria-live": "polite", "data-for": usedBy((u) => u.rowCount) });
  const bar = h("div", { class: "tp-controls" },
    switcher,
    ...(step ? [h("label", { class: "tp-ctl", title: "View one step (percentages are of that step), every step folded into one tree (mean, min and max per row), or the whole run" }, "step ", step)] : []),
    h("label", { class: "tp-ctl", "data-for": usedBy((u) => u.threshold), title: "Hide rows whose CPU total is below this share of the viewed root's (whatever the sort); the ancestors of shown rows stay. Logarithmic: 0, then 0.01% to 100%." }, "min ", slider, sliderValue, h("span", { class: "tp-ctl-unit", text: "of CPU total" })),
    h("label", { class: "tp-ctl", "data-for": usedBy((u) => u.ops), title: "Show aten ops and kernels under their layers. Numbers never change silently: a layer's Self counts every op row that is not shown" }, ops, " aten ops"),
    search,
    h("label", { class: "tp-ctl", "data-for": usedBy((u) => u.sort) }, "sort ", sort),
    h("button", { type: "button", class: "tp-btn", "data-for": usedBy((u) => u.expand), "data-testid": "expand-all", text: "Expand all" }),
    h("button", { type: "button", class: "tp-btn", "data-for": usedBy((u) => u.expand), "data-testid": "collapse-all", text: "Collapse all" }),
    h("button", { type: "button", class: "tp-btn", "data-testid": "export-csv", title: "Download every row of the part of the run viewed as CSV (the DataFrame's columns), whatever is expanded or filtered", text: "Export CSV" }),
    rowCount);
  const noteText = h("span", { "data-testid": "hidden-note" });
  const note = h("div", { class: "tp-note", hidden: true }, noteText, " ", h("button", { type: "button", class: "tp-link", "data-testid": "show-hidden", text: "Show them" }));
  return { bar, switcher, step, slider, sliderValue, ops, search, sort, rowCount, note, noteText, uses };
}

/**
 * The controls as the state says: values, the view pressed, the controls of other views hidden,
 * the hidden-rows note and the row count.
 * @param {Controls} c @param {Data} data @param {FullState} st @param {string} view the view shown
 * @param {Viewed} viewed @param {Visible} vis
 */
export function showControls(c, data, st, view, viewed, vis) {
  c.slider.value = String(pctToSlider(st.min_pct || 0));
  c.sliderValue.textContent = pctLabel(st.min_pct || 0);
  c.ops.checked = !!st.show_ops;
  // A self column is named for what the table shows in it (columns.js columnsFor): "Own CPU"
  // with the op rows hidden, "Self CPU" with them listed; the picker says what the header says.
  for (const o of c.sort.options) if (data.spec[o.value]?.layer_alt) o.textContent = shownSpec(data, o.value, !!st.show_ops).label;
  if (c.search.value !== st.search) c.search.value = st.search;
  const active = resolveSort(data.vocab, st.sort_by);
  if (![...c.sort.options].some((o) => o.value === active)) c.sort.append(h("option", { value: active, text: data.spec[active]?.label || active }));
  c.sort.value = active;
  if (c.step) c.step.value = st.step;
  for (const b of c.switcher.children) b.setAttribute("aria-pressed", String(/** @type {HTMLElement} */ (b).dataset.view === view));
  for (const control of c.bar.querySelectorAll("[data-for]")) {
    /** @type {HTMLElement} */ (control).hidden = !(/** @type {HTMLElement} */ (control).dataset.for || "").split(" ").includes(view);
  }
  const hidden = hiddenCounts(viewed.table, { ...st, root: viewed.root }, vis.shown);
  const text = c.uses[view]?.hiddenNote ? hiddenNote(hidden, st.min_pct || 0, st.search) : "";
  c.note.hidden = !text;
  c.noteText.textContent = text;
  c.note.title = hidden.ops && !st.show_ops ? `${hidden.ops} op and kernel rows are folded into their layers (tick “aten ops” to list them)` : "";
  c.rowCount.textContent = `${vis.rows.length} of ${viewed.table.end[viewed.root] - viewed.root} rows`;
}

/**
 * What an input in the controls changes (the slider, the search box), or null for another
 * element. A search opens the layers that hold its matches.
 * @param {Controls} c @param {Data} data @param {FullState} st @param {EventTarget|null} target
 * @returns {Record<string, any>|null}
 */
export function inputChange(c, data, st, target) {
  if (target === c.slider) return { min_pct: sliderToPct(Number(c.slider.value)) };
  if (target !== c.search) return null;
  const text = c.search.value;
  /** @type {Record<string, any>} */
  const values = { search: text };
  if (text.trim()) {
    const viewed = viewedTable(data, st.step);
    const opened = expandMatches(viewed.table, { ...st, search: text, root: viewed.root }, st.expandedList);
    if (opened !== st.expandedList) values.expanded = opened;
  }
  return values;
}

/**
 * What a change in the controls changes ("aten ops", the sort, the step), or null for another
 * element. Ticking ops opens the layers in view that hold only ops; a step opens as the whole
 * run does (two levels below its root, and the hot path's layers).
 * @param {Controls} c @param {Data} data @param {FullState} st @param {EventTarget|null} target
 * @returns {Record<string, any>|null}
 */
export function pickChange(c, data, st, target) {
  if (target === c.ops) {
    /** @type {Record<string, any>} */
    const values = { show_ops: c.ops.checked };
    if (c.ops.checked) {
      const viewed = viewedTable(data, st.step);
      const rows = visibleRows(viewed.table, { ...st, root: viewed.root }).rows;
      const opened = expandLeafLayers(viewed.table, rows, st.expandedList);
      if (opened !== st.expandedList) values.expanded = opened;
    }
    return values;
  }
  if (target === c.sort) return { sort_by: c.sort.value, ascending: sortsAscending(data, c.sort.value) };
  if (c.step && target === c.step) {
    return { step: c.step.value, zoom: "", expanded: stepOpening(data, c.step.value, st.expandedList, !!st.show_ops) };
  }
  return null;
}
