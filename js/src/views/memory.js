// @ts-check
// The Memory view: a line of allocated bytes over the run (src/torchprof/_views/memory.py
// memory_payload) with the forward/backward/optimizer bands, the peak marked, the layer under the
// cursor named; a click selects that layer in the table. Everything above the DOM half is plain
// arithmetic on arrays (node --test); `create` draws it as SVG.
import { openRow } from "../answers.js";
import { h, svg } from "../dom.js";
import { formatBytes, formatTime } from "../format.js";
import { buildMakeup } from "../makeup.js";

/** @import { Data, Context, ViewFace } from "../types.js" */

/**
 * One device's line as the payload sends it.
 * @typedef {object} MemorySeries
 * @property {string} name "cpu" | "cuda:0" | ...
 * @property {number[]} t µs since the run's first event
 * @property {number[]} v bytes allocated after each event
 * @property {number[]} row the layer row running then (what a click selects)
 * @property {{t: number, v: number, row: number, phase: string}} [peak]
 * @property {import("../makeup.js").Makeup|null} [makeup] what the peak is made of
 */

/**
 * The Memory view's data (payload `memory`).
 * @typedef {object} MemoryData
 * @property {MemorySeries[]} devices
 * @property {[number, number, number][]} bands [start µs, end µs, phase code]
 * @property {string[]} phases phase names by code
 */

/**
 * Indices of the points to draw so that at most 2 * buckets remain: the time span is cut into
 * equal buckets and each keeps its lowest and its highest point (in time order), so the peak
 * always survives; the first and last points stay. Same rule as _tree/memory.py minmax_thin.
 * `t` must be sorted. O(points).
 * @param {ArrayLike<number>} t @param {ArrayLike<number>} v @param {number} buckets
 * @returns {number[]}
 */
export function downsampleMinMax(t, v, buckets) {
  const n = t.length;
  if (n <= 2 * buckets || buckets < 1) return Array.from({ length: n }, (_, i) => i);
  const t0 = t[0];
  const span = t[n - 1] - t0 || 1;
  const keep = [0];
  let lo = -1;
  let hi = -1;
  let current = 0;
  const flush = () => {
    if (lo < 0) return;
    if (lo === hi) keep.push(lo);
    else keep.push(Math.min(lo, hi), Math.max(lo, hi));
  };
  for (let i = 1; i < n - 1; i++) {
    const b = Math.min(buckets - 1, Math.floor(((t[i] - t0) * buckets) / span));
    if (b !== current) {
      flush();
      lo = hi = -1;
      current = b;
    }
    if (lo < 0 || v[i] < v[lo]) lo = i;
    if (hi < 0 || v[i] > v[hi]) hi = i;
  }
  flush();
  keep.push(n - 1);
  return keep;
}

/**
 * The chart's scales: time to x and bytes to y inside a box with padding.
 * @typedef {object} MemoryScales
 * @property {(t: number) => number} x
 * @property {(v: number) => number} y
 * @property {(x: number) => number} time the inverse of x
 * @property {number} t0 @property {number} t1 @property {number} vmax
 * @property {{left: number, right: number, top: number, bottom: number}} plot
 */

/**
 * @param {MemorySeries} series @param {number} width @param {number} height
 * @param {{left?: number, right?: number, top?: number, bottom?: number}} [pad]
 * @returns {MemoryScales}
 */
export function memoryScales(series, width, height, pad = {}) {
  const plot = { left: pad.left ?? 64, right: width - (pad.right ?? 12), top: pad.top ?? 10, bottom: height - (pad.bottom ?? 20) };
  const t = series.t;
  const t0 = t.length ? t[0] : 0;
  const t1 = t.length ? t[t.length - 1] : 1;
  const span = t1 - t0 || 1;
  let vmax = 0;
  for (const v of series.v) if (v > vmax) vmax = v;
  if (series.peak && series.peak.v > vmax) vmax = series.peak.v;
  vmax = vmax || 1;
  const w = plot.right - plot.left;
  const h = plot.bottom - plot.top;
  return {
    x: (time) => plot.left + ((time - t0) / span) * w,
    y: (v) => plot.bottom - (Math.max(0, v) / vmax) * h,
    time: (x) => t0 + ((x - plot.left) / (w || 1)) * span,
    t0, t1, vmax, plot,
  };
}

/**
 * The SVG path of the line: a step after each event (the total holds until the next one),
 * through the points `keep` picks. Coordinates rounded to 0.1 px.
 * @param {MemorySeries} series @param {number[]} keep @param {MemoryScales} s
 */
export function memoryPath(series, keep, s) {
  if (!keep.length) return "";
  const r = (/** @type {number} */ v) => Math.round(v * 10) / 10;
  const first = keep[0];
  let d = `M${r(s.x(series.t[first]))},${r(s.y(series.v[first]))}`;
  for (let k = 1; k < keep.length; k++) {
    const i = keep[k];
    d += `H${r(s.x(series.t[i]))}V${r(s.y(series.v[i]))}`;
  }
  return d + `H${r(s.plot.right)}`;
}

/**
 * The phase bands as rectangles: {x, width, phase} in pixels, clipped to the plot, those under
 * half a pixel left out.
 * @param {[number, number, number][]} bands @param {string[]} phases @param {MemoryScales} s
 */
export function bandRects(bands, phases, s) {
  const out = [];
  for (const [start, end, code] of bands) {
    const x0 = Math.max(s.plot.left, s.x(start));
    const x1 = Math.min(s.plot.right, s.x(end));
    if (x1 - x0 >= 0.5) out.push({ x: x0, width: x1 - x0, phase: phases[code] ?? "other" });
  }
  return out;
}

/**
 * The point in effect at a time: the last event at or before it (-1 before the first).
 * Binary search, O(log n).
 * @param {ArrayLike<number>} t @param {number} time
 */
export function pointAt(t, time) {
  let lo = 0;
  let hi = t.length - 1;
  if (hi < 0 || time < t[0]) return -1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (t[mid] <= time) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * What the readout says of point i: "12.3ms · 245 MB · ResNet.layer4.0.conv2 (backward)".
 * @param {Data} data @param {MemorySeries} series @param {number} i @param {string} [phase]
 */
export function memoryReadout(data, series, i, phase) {
  const row = series.row[i];
  const where = row > 0 ? data.path[row] : data.path[0];
  return `${formatTime(series.t[i])} · ${formatBytes(series.v[i])} · ${where}${phase ? ` (${phase})` : ""}`;
}

/**
 * The phase in effect at a time, from the bands (null outside them).
 * @param {MemoryData} memory @param {number} time
 */
export function phaseAt(memory, time) {
  for (const [start, end, code] of memory.bands) if (time >= start && time <= end) return memory.phases[code] ?? null;
  return null;
}

// -- the DOM ----------------------------------------------------------------------------------

const MEMORY_HEIGHT = 180;

/**
 * The chart's elements for one device's line at one width: phase bands, axis labels, the line,
 * the peak mark and the (hidden) cursor, last.
 * @param {Data} data @param {MemoryData} memory @param {MemorySeries} series @param {MemoryScales} scales
 * @returns {SVGElement[]}
 */
function chartParts(data, memory, series, scales) {
  const { plot } = scales;
  const keep = downsampleMinMax(series.t, series.v, Math.max(1, Math.floor(plot.right - plot.left)));
  const parts = [];
  for (const band of bandRects(memory.bands, memory.phases, scales)) {
    parts.push(svg("rect", { class: `tp-mem-band tp-mem-${band.phase}`, x: band.x, y: plot.top, width: band.width, height: plot.bottom - plot.top }));
  }
  const label = (/** @type {string} */ text, /** @type {Record<string, string|number>} */ at) => {
    const node = svg("text", { class: "tp-mem-axis", ...at });
    node.textContent = text;
    return node;
  };
  parts.push(svg("line", { class: "tp-mem-grid", x1: plot.left, x2: plot.right, y1: plot.bottom, y2: plot.bottom }));
  parts.push(label(formatBytes(scales.vmax), { x: plot.left - 6, y: plot.top + 4, "text-anchor": "end" }));
  parts.push(label("0 B", { x: plot.left - 6, y: plot.bottom, "text-anchor": "end" }));
  parts.push(label(formatTime(scales.t0), { x: plot.left, y: MEMORY_HEIGHT - 4 }));
  parts.push(label(formatTime(scales.t1), { x: plot.right, y: MEMORY_HEIGHT - 4, "text-anchor": "end" }));
  parts.push(svg("path", { class: "tp-mem-line", "data-testid": "memory-line", d: memoryPath(series, keep, scales) }));
  const p = series.peak;
  if (p) {
    const mark = svg("circle", { class: "tp-mem-peak", "data-testid": "memory-peak-mark", cx: scales.x(p.t), cy: scales.y(p.v), r: 4 });
    const title = svg("title", {});
    title.textContent = `peak ${formatBytes(p.v)}: ${data.path[p.row]} (${p.phase})`;
    mark.append(title);
    parts.push(mark);
  }
  parts.push(svg("line", { class: "tp-mem-cursor", x1: 0, x2: 0, y1: plot.top, y2: plot.bottom, visibility: "hidden" }));
  return parts;
}

/**
 * The Memory view (offered only with memory=True): allocated memory over the run as a line, the
 * forward/backward/optimizer bands behind it, the peak marked, a readout naming the layer under
 * the cursor, a device picker when there are several. A click on the line, or "Peak layer",
 * opens that layer in the table, selected.
 * @implements {ViewFace}
 */
class MemoryView {
  /** @param {Context} ctx */
  constructor(ctx) {
    this.ctx = ctx;
    this.data = ctx.data;
    const memory = /** @type {MemoryData} */ (ctx.data.memory);
    this.memory = memory;
    this.el = h("div", { class: `tp-panel tp-panel-${ctx.view} tp-memory`, "data-view": ctx.view, "data-testid": ctx.view });
    this.device = Math.max(0, memory.devices.findIndex((d) => d.name !== "cpu"));
    this.readout = h("span", { class: "tp-mem-readout", "data-testid": "memory-readout", "aria-live": "polite" });
    const picker = h("span", { class: "tp-mem-devices" });
    if (memory.devices.length > 1) {
      memory.devices.forEach((d, k) => picker.append(h("button", { type: "button", class: "tp-btn", "data-device": k, text: d.name })));
    }
    const legend = h("span", { class: "tp-mem-legend" });
    for (const code of new Set(memory.bands.map((b) => b[2]))) {
      const phase = memory.phases[code];
      legend.append(h("span", { class: `tp-mem-key tp-mem-${phase}` }), h("span", { text: phase + " " }));
    }
    this.peakButton = h("button", { type: "button", class: "tp-btn", "data-testid": "memory-peak", title: "Open the layer running at the peak in the table", text: "Peak layer" });
    this.chart = svg("svg", { class: "tp-mem-chart", "data-testid": "memory-chart", role: "img", height: MEMORY_HEIGHT });
    this.head = h("div", { class: "tp-mem-head" }, picker, legend, this.peakButton, this.readout);
    this.makeupBox = h("div", { class: "tp-makeup-box" });
    this.el.append(this.head, this.chart, this.makeupBox);
    this.series = memory.devices[this.device];
    this.scales = memoryScales(this.series, 800, MEMORY_HEIGHT);
    /** @type {SVGElement|null} */
    this.cursor = null;
    this.drawnWidth = -1;
    this.move = this.move.bind(this);
    this.click = this.click.bind(this);
    this.headClick = this.headClick.bind(this);
    this.chart.addEventListener("mousemove", this.move);
    this.chart.addEventListener("mouseleave", this.move);
    this.chart.addEventListener("click", this.click);
    this.head.addEventListener("click", this.headClick);
    this.makeupBox.addEventListener("click", this.headClick);
  }

  /** Open row i in the table (the whole run's), selected, its ancestors expanded. @param {number} i */
  select(i) {
    openRow(this.ctx, i);
  }

  /** The readout with the cursor off the line: the device's peak and where it was. */
  idle() {
    const { series } = this;
    const p = series.peak;
    this.readout.textContent = p
      ? `${series.name} peak ${formatBytes(p.v)} at ${formatTime(p.t)} in ${this.data.path[p.row]} (${p.phase}) · click the line to open a layer`
      : series.name;
  }

  draw() {
    const { chart } = this;
    const series = this.memory.devices[this.device];
    this.series = series;
    const width = Math.max(240, Math.floor(this.el.clientWidth) || 800);
    this.drawnWidth = width;
    chart.setAttribute("width", String(width));
    chart.setAttribute("viewBox", `0 0 ${width} ${MEMORY_HEIGHT}`);
    this.scales = memoryScales(series, width, MEMORY_HEIGHT);
    const parts = chartParts(this.data, this.memory, series, this.scales);
    this.cursor = /** @type {SVGElement} */ (parts.at(-1));
    chart.replaceChildren(...parts);
    const makeup = buildMakeup(this.data, series);
    this.makeupBox.replaceChildren(...(makeup ? [makeup] : []));
    chart.setAttribute("aria-label", `Allocated memory over the run on ${series.name}` + (series.peak ? `, peak ${formatBytes(series.peak.v)}` : ""));
    this.idle();
  }

  /** The point under the pointer, or -1 off the plot. @param {MouseEvent} event */
  pointOf(event) {
    const { scales } = this;
    const x = event.clientX - this.chart.getBoundingClientRect().left;
    if (x < scales.plot.left || x > scales.plot.right) return -1;
    return pointAt(this.series.t, scales.time(x));
  }

  /** @param {Event} event */
  move(event) {
    const { series, cursor } = this;
    if (!cursor) return;
    const i = this.pointOf(/** @type {MouseEvent} */ (event));
    if (i < 0) {
      cursor.setAttribute("visibility", "hidden");
      this.idle();
      return;
    }
    const x = String(this.scales.x(series.t[i]));
    cursor.setAttribute("x1", x);
    cursor.setAttribute("x2", x);
    cursor.setAttribute("visibility", "visible");
    this.readout.textContent = memoryReadout(this.data, series, i, phaseAt(this.memory, series.t[i]) ?? undefined);
  }

  /** @param {Event} event */
  click(event) {
    const i = this.pointOf(/** @type {MouseEvent} */ (event));
    if (i >= 0 && this.series.row[i] > 0) this.select(this.series.row[i]);
  }

  /** @param {Event} event */
  headClick(event) {
    const button = /** @type {HTMLElement} */ (event.target).closest("button");
    if (!button) return;
    if (button.dataset.row !== undefined) {
      this.select(Number(button.dataset.row));
      return;
    }
    if (button === this.peakButton) {
      if (this.series.peak && this.series.peak.row > 0) this.select(this.series.peak.row);
      return;
    }
    this.device = Number(button.dataset.device);
    this.draw();
  }

  update() {
    if (this.drawnWidth < 0 || Math.floor(this.el.clientWidth) !== this.drawnWidth) this.draw();
  }

  resized() {
    if (!this.el.hidden && Math.floor(this.el.clientWidth) !== this.drawnWidth) this.draw();
  }

  destroy() {
    this.chart.removeEventListener("mousemove", this.move);
    this.chart.removeEventListener("mouseleave", this.move);
    this.chart.removeEventListener("click", this.click);
    this.head.removeEventListener("click", this.headClick);
    this.makeupBox.removeEventListener("click", this.headClick);
  }
}

/** @param {Context} ctx @returns {ViewFace} */
export function create(ctx) {
  return new MemoryView(ctx);
}

/** A profile recorded with memory=True has a timeline; any other offers no Memory view. @param {Data} data */
export const offered = (data) => !!data.memory;

/** The Memory view acts on none of the shared controls. @type {import("../types.js").ControlUse} */
export const controls = {};
