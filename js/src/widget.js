// @ts-check
// torchprof's front end, the entry point: anywidget's `render` (the report page's too) and the
// mounting of the views and controls for one payload. esbuild bundles this module and the others
// of js/src/ into js/widget.js, the one ES module the wheel ships and `prof.to_html()` inlines.
//
// No module spells the vocabulary: column specs and roles, kind codes, sort aliases, the views and
// the view-state keys with their defaults arrive in the payload (`vocab`, from
// src/torchprof/_vocab.py). Text from the profile (module names, region labels, shapes) only
// ever reaches the DOM through textContent / setAttribute, and the canvas through fillText.
import { buildHeadline, openRow } from "./answers.js";
import { buildControls, inputChange, pickChange, showControls } from "./controls.js";
import { toCSV, exportFileName } from "./csv.js";
import { h } from "./dom.js";
import { loadPayload } from "./payload.js";
import { stateDefaults, visibleRows } from "./rows.js";
import { createModel, stateReader } from "./state.js";
import { buildSummary } from "./summary.js";
import { allExpandable, viewedTable } from "./tree.js";
import { VIEWS } from "./views/index.js";
import { ROW_HEIGHT } from "./views/table.js";

/** @import { Data, Model, Context, ViewFace, ViewModule, Viewed } from "./types.js" */

// The pure API, for the node tests' sake and for pages that import the bundle (the browser tests).
export * from "./answers.js";
export * from "./colours.js";
export * from "./columns.js";
export * from "./controls.js";
export * from "./csv.js";
export * from "./format.js";
export * from "./payload.js";
export * from "./rows.js";
export * from "./search.js";
export * from "./state.js";
export * from "./tree.js";
export { VIEWS };
export { COLOURINGS, FLAME_ROW, flameColouring, flameDeltas, flameHit, flameLayout, flameMetric, flameMetrics, flameTip, phaseColumns, phaseRoles, phaseShares } from "./views/flame.js";
export { bandRects, downsampleMinMax, memoryPath, memoryReadout, memoryScales, phaseAt, pointAt } from "./views/memory.js";
export { OVERSCAN, ROW_HEIGHT, keyAction, virtualWindow } from "./views/table.js";
export { byType, shortOpName, topColumn, topLayers } from "./views/top.js";

/**
 * The views this payload offers, in the vocabulary's order: those its `views` list (a comparison
 * lists fewer) that have a module here and whose module finds what it shows in the payload.
 * @param {Data} data @returns {[string, ViewModule][]}
 */
export function offeredViews(data) {
  return data.vocab.views.filter((v) => VIEWS[v] && (!VIEWS[v].offered || VIEWS[v].offered(data))).map((v) => [v, VIEWS[v]]);
}

/**
 * Mounts the widget into `root` (summary, controls, the body the views go in); returns a function
 * that removes listeners and observers. Views are made when first shown.
 *
 * The root's `aria-busy` is "true" from a model change until the redraw it causes is done (a test
 * waits for "false" instead of sleeping), and `data-renders` counts the redraws.
 * @param {HTMLElement} root @param {Model} model @param {Data} data
 */
function mount(root, model, data) {
  root.style.setProperty("--tp-row", ROW_HEIGHT + "px");
  const offered = offeredViews(data);
  const summary = h("div", { class: "tp-summary", "data-testid": "summary" });
  buildSummary(summary, data);
  const headline = buildHeadline(data);
  if (headline) summary.append(headline);
  const controls = buildControls(data, offered.map(([name, view]) => [name, view.controls || {}]));
  // A view may say how many things it lists (the Insights view: its findings) on its button.
  for (const [name, view] of offered) {
    const count = view.badge ? view.badge(data) : "";
    const button = [...controls.switcher.children].find((b) => /** @type {HTMLElement} */ (b).dataset.view === name);
    if (count && button) button.append(h("span", { class: "tp-switch-badge", text: count }));
  }
  const body = h("div", { class: "tp-body" });
  root.replaceChildren(summary, controls.bar, controls.note, body);
  const state = stateReader(model, data.vocab);
  const names = offered.map(([name]) => name);
  const rowsView = offered.find(([, view]) => view.listsRows)?.[0] ?? names[0];
  const fallback = names.includes(stateDefaults(data.vocab).view) ? stateDefaults(data.vocab).view : names[0];
  /** @param {Record<string, any>} values */
  const change = (values) => {
    for (const [k, v] of Object.entries(values)) model.set(k, v);
    model.save_changes();
  };
  /** @type {Record<string, ViewFace>} */
  const faces = {};
  /** @param {string} view */
  const face = (view) => {
    if (!faces[view]) {
      faces[view] = VIEWS[view].create({ root, model, data, state, change, view, rowsView });
      body.append(faces[view].el);
    }
    return faces[view];
  };
  let renders = 0;
  const redraw = () => {
    const st = state();
    const viewed = viewedTable(data, st.step);
    const vis = visibleRows(viewed.table, { ...st, root: viewed.root });
    const view = names.includes(st.view) ? st.view : fallback;
    showControls(controls, data, st, view, viewed, vis);
    root.dataset.view = view;
    const current = face(view);
    for (const [name, f] of Object.entries(faces)) f.el.hidden = name !== view;
    current.update(st, viewed, vis);
    root.dataset.renders = String(++renders);
    root.setAttribute("aria-busy", "false");
  };
  const ctx = /** @type {Context} */ ({ root, model, data, state, change, view: rowsView, rowsView });
  const unbind = bind(root, model, data, { controls, state, change, redraw, faces, open: (row) => openRow(ctx, row) });
  redraw();
  return () => {
    unbind();
    for (const f of Object.values(faces)) f.destroy();
  };
}

/**
 * Connects a mounted widget: model changes redraw it (once per burst), clicks, inputs and changes
 * in the controls change the model, keys stay in the widget, a resize lays the view out again.
 * Returns the function that disconnects it all.
 * @param {HTMLElement} root @param {Model} model @param {Data} data
 * @param {{controls: ReturnType<typeof buildControls>, state: () => import("./types.js").FullState,
 *   change: (values: Record<string, any>) => void, redraw: () => void, faces: Record<string, ViewFace>,
 *   open: (row: number) => void}} parts
 */
function bind(root, model, data, { controls, state, change, redraw, faces, open }) {
  // Model changes can come in bursts (several traits from one click or one Python cell).
  let pending = false;
  const schedule = () => {
    root.setAttribute("aria-busy", "true");
    if (pending) return;
    pending = true;
    queueMicrotask(() => {
      pending = false;
      redraw();
    });
  };
  /** @param {Event} event */
  const onClick = (event) => {
    const target = /** @type {HTMLElement} */ (event.target);
    const viewButton = /** @type {HTMLElement|null} */ (target.closest(".tp-switch-btn"));
    if (viewButton) return change({ view: viewButton.dataset.view });
    const headlineLink = /** @type {HTMLElement|null} */ (target.closest('[data-testid="headline-layer"]'));
    if (headlineLink) return open(Number(headlineLink.dataset.row));
    const button = /** @type {HTMLElement|null} */ (target.closest("button[data-testid]"));
    if (!button || button.closest(".tp-body")) return;
    const viewed = viewedTable(data, state().step);
    const action = button.dataset.testid;
    if (action === "expand-all") change({ expanded: allExpandable(viewed.table) });
    else if (action === "collapse-all") change({ expanded: [] });
    else if (action === "show-hidden") change({ min_pct: 0, search: "" });
    else if (action === "export-csv") exportCSV(root, data, viewed, state().step);
  };
  /** @param {Event} event */
  const onInput = (event) => {
    const values = inputChange(controls, data, state(), event.target);
    if (values) change(values);
  };
  /** @param {Event} event */
  const onChange = (event) => {
    const values = pickChange(controls, data, state(), event.target);
    if (values) change(values);
  };
  // Keys typed in the widget stay in the widget: JupyterLab and Notebook 7 run their command
  // shortcuts (a, b, d d, ...) from a keydown listener on the document, so without this a key
  // pressed on a row inserts or deletes cells. (`data-lm-suppress-shortcuts` tells Lumino the
  // same where the event reaches it first.)
  const keep = (/** @type {Event} */ event) => event.stopPropagation();
  const events = data.vocab.state.map((k) => "change:" + k.name);
  for (const e of events) model.on(e, schedule);
  root.setAttribute("data-lm-suppress-shortcuts", "true");
  const listeners = /** @type {[string, (e: any) => void][]} */ ([
    ["click", onClick], ["input", onInput], ["change", onChange], ["keydown", keep], ["keyup", keep], ["keypress", keep],
  ]);
  for (const [type, fn] of listeners) root.addEventListener(type, fn);
  // The output area may attach or resize the widget after render: lay the view out again.
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => faces[/** @type {string} */ (root.dataset.view)]?.resized()) : null;
  resize?.observe(root);
  return () => {
    for (const e of events) model.off(e, schedule);
    resize?.disconnect();
    for (const [type, fn] of listeners) root.removeEventListener(type, fn);
  };
}

/**
 * Downloads every row of the part of the run viewed as CSV, whatever is expanded or filtered.
 * @param {HTMLElement} root @param {Data} data @param {Viewed} viewed @param {string} step
 */
function exportCSV(root, data, viewed, step) {
  const rows = [];
  for (let i = viewed.root; i < viewed.table.end[viewed.root]; i++) rows.push(i);
  const blob = new Blob([toCSV(viewed.table, rows)], { type: "text/csv;charset=utf-8" });
  const url = URL.createObjectURL(blob);
  const link = h("a", { href: url, download: exportFileName(data, step), hidden: true });
  root.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/**
 * anywidget's entry point (and the report page's).
 * @param {{model: Model, el: HTMLElement}} context
 */
export async function render({ model, el }) {
  const root = h("div", { class: "torchprof", "data-testid": "torchprof", "aria-busy": "true" });
  el.append(root);
  let unmount = () => {};
  let generation = 0;
  async function load() {
    const mine = ++generation;
    /** @type {Data} */
    let data;
    try {
      data = await loadPayload(model.get("data"));
    } catch (err) {
      root.replaceChildren(h("div", { class: "tp-error", text: `torchprof: cannot show this profile (${/** @type {Error} */ (err).message})` }));
      root.setAttribute("aria-busy", "false");
      return;
    }
    if (mine !== generation) return;
    unmount();
    unmount = mount(root, model, data);
  }
  model.on("change:data", load);
  await load();
  return () => {
    model.off("change:data", load);
    unmount();
  };
}

export { createModel };
export default { render };
