// @ts-check
// The Flame view: an icicle of the viewed tree on a canvas. Its pure half (metrics, layout, hit
// test, phases, colours of a change) is checked by node --test; its DOM half draws the layout.
import { NODE, columnsFor, hasData, shownSpec } from "../columns.js";
import { canvasPalette, deltaColour, typeHue } from "../colours.js";
import { h } from "../dom.js";
import { formatPercent, formatValue } from "../format.js";
import { makeMatcher } from "../search.js";
import { ancestry, execChildren, rowOfPath, viewedTable } from "../tree.js";

/** @import { Data, Context, ViewFace, FullState, Viewed } from "../types.js" */

/**
 * A metric the Flame view can size bars by.
 * @typedef {object} FlameMetric
 * @property {string} key the state value (a registry column)
 * @property {string} label
 * @property {string} width the column whose values are the widths (a self column's subtree)
 * @property {string|null} self for a self column: itself (drawn as the dark part of each bar)
 */

/**
 * The metrics this profile can size the Flame by: the table's time columns that add up over a
 * subtree (totals, and self columns through their subtree), and FLOPs/MACs; only those with data.
 * @param {Data} data @returns {FlameMetric[]}
 */
export function flameMetrics(data) {
  /** @type {FlameMetric[]} */
  const out = [];
  const names = [...data.vocab.view_columns, ...data.vocab.columns.filter((c) => c.unit === "count" && c.threshold).map((c) => c.name)];
  for (const name of new Set(names)) {
    const spec = data.spec[name];
    if (!spec || !hasData(data, name)) continue;
    const sized = (spec.unit === "time" || (spec.unit === "count" && spec.threshold)) && spec.rollup === "total";
    if (sized) out.push({ key: name, label: spec.label, width: name, self: null });
    // (a self metric's dark stripe is its layer column, ops folded in: named so, as the table names it)
    else if (spec.rollup === "self" && spec.subtree && hasData(data, spec.subtree)) out.push({ key: name, label: shownSpec(data, name, false).label, width: spec.subtree, self: name });
  }
  return out;
}

/**
 * The metric for a state value: that metric, else the first (CPU total).
 * @param {Data} data @param {string} key
 */
export function flameMetric(data, key) {
  const all = flameMetrics(data);
  const size = data.vocab.threshold_column;
  return all.find((m) => m.key === key) || all[0] || { key: size, label: data.spec[size]?.label ?? size, width: size, self: null };
}

/**
 * The laid-out icicle: one rectangle per drawn node, in pre-order.
 * @typedef {object} FlameLayout
 * @property {number} count
 * @property {Int32Array} node row index of each rectangle
 * @property {Float64Array} x
 * @property {Float64Array} w
 * @property {Int32Array} level 0 for the root of the layout
 * @property {number} levels
 * @property {Int32Array} byLevel rectangle indices sorted by level, then x
 * @property {Int32Array} levelStart byLevel[levelStart[l]..levelStart[l+1]] are level l's
 */

/**
 * Lays out the icicle of `root`'s subtree in `width` px: a node is as wide as its value of
 * `widthColumn` (negative or missing: 0), its children sit under it left to right in execution
 * order, each as wide as its share (scaled down together if they add up to more than the
 * parent, as device time summed over streams can). Op and kernel rows take part only with
 * `showOps`; a node narrower than `minPx` is not drawn, nor anything under it, so the cost is
 * O(drawn nodes + their children), not O(tree), and a 50k-node tree draws as fast as the screen
 * can show it. An explicit stack, so any depth works.
 * @param {Data} data
 * @param {{root?: number, width: number, widthColumn: string, showOps?: boolean, minPx?: number}} options
 * @returns {FlameLayout}
 */
export function flameLayout(data, { root = 0, width, widthColumn, showOps = false, minPx = 0.75 }) {
  const values = data.num[widthColumn];
  const { start, index } = execChildren(data);
  const layers = data.layerCodes;
  /** @param {number} i */
  const value = (i) => (values[i] > 0 ? values[i] : 0);
  const node = [];
  const xs = [];
  const ws = [];
  const level = [];
  let levels = 0;
  if (value(root) > 0 && width > 0) {
    /** @type {[number, number, number, number][]} */
    const stack = [[root, 0, width, 0]];
    while (stack.length) {
      const [i, x, w, l] = /** @type {[number, number, number, number]} */ (stack.pop());
      node.push(i);
      xs.push(x);
      ws.push(w);
      level.push(l);
      if (l + 1 > levels) levels = l + 1;
      let sum = 0;
      for (let c = start[i]; c < start[i + 1]; c++) {
        const k = index[c];
        if (showOps || layers.has(data.kind[k])) sum += value(k);
      }
      if (sum <= 0) continue;
      const scale = w / Math.max(value(i), sum);
      const kids = [];
      let at = x;
      for (let c = start[i]; c < start[i + 1]; c++) {
        const k = index[c];
        if (!showOps && !layers.has(data.kind[k])) continue;
        const kw = value(k) * scale;
        if (kw >= minPx) kids.push([k, at, kw, l + 1]);
        at += kw;
      }
      for (let c = kids.length - 1; c >= 0; c--) stack.push(/** @type {[number, number, number, number]} */ (kids[c]));
    }
  }
  const count = node.length;
  // Rectangles per level in x order: a counting sort by level keeps pre-order, which within one
  // level is left to right.
  const levelStart = new Int32Array(levels + 1);
  for (const l of level) levelStart[l + 1]++;
  for (let l = 0; l < levels; l++) levelStart[l + 1] += levelStart[l];
  const fill = levelStart.slice(0, levels);
  const byLevel = new Int32Array(count);
  for (let r = 0; r < count; r++) byLevel[fill[level[r]]++] = r;
  return {
    count, node: Int32Array.from(node), x: Float64Array.from(xs), w: Float64Array.from(ws), level: Int32Array.from(level),
    levels, byLevel, levelStart,
  };
}

/**
 * The rectangle under a point, or -1: its level from y, then a binary search by x.
 * @param {FlameLayout} layout @param {number} px @param {number} py @param {number} rowHeight
 */
export function flameHit(layout, px, py, rowHeight) {
  const l = Math.floor(py / rowHeight);
  if (l < 0 || l >= layout.levels) return -1;
  let lo = layout.levelStart[l];
  let hi = layout.levelStart[l + 1] - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const r = layout.byLevel[mid];
    if (px < layout.x[r]) hi = mid - 1;
    else if (px >= layout.x[r] + layout.w[r]) lo = mid + 1;
    else return r;
  }
  return -1;
}

/**
 * The columns that split a metric into forward, backward and other (those with the same percent
 * base that are totals, other than the base itself): CPU fwd | CPU bwd | CPU other for CPU time.
 * Empty for a metric without such parts (FLOPs): bars then say backward or not by the row.
 * @param {Data} data @param {FlameMetric} metric @returns {string[]}
 */
export function phaseColumns(data, metric) {
  const of = data.spec[metric.width]?.percent_of;
  if (!of) return [];
  return data.vocab.view_columns.filter((c) => c !== of && data.spec[c].percent_of === of && data.spec[c].rollup === "total" && hasData(data, c));
}

/**
 * What each phase column is: "bwd" for the backward family, else "fwd" for the first (forward
 * comes first in the registry) and "other" for the rest; the bars' colours follow.
 * @param {Data} data @param {string[]} phases @returns {string[]}
 */
export function phaseRoles(data, phases) {
  let seen = 0;
  return phases.map((c) => (data.spec[c].family === "bwd" ? "bwd" : seen++ === 0 ? "fwd" : "other"));
}

/**
 * A bar's split into its phase columns' shares (adding up to 1), or one share, forward or
 * backward by the row's flag, when the metric has no parts (or they are all 0).
 * @param {Data} data @param {number} i @param {string[]} phases
 * @returns {{role: string, share: number}[]}
 */
export function phaseShares(data, i, phases) {
  const roles = phaseRoles(data, phases);
  const parts = phases.map((c) => (data.num[c][i] > 0 ? data.num[c][i] : 0));
  const sum = parts.reduce((a, b) => a + b, 0);
  if (!(sum > 0)) return [{ role: data.backward[i] ? "bwd" : "fwd", share: 1 }];
  return parts.map((v, k) => ({ role: roles[k], share: v / sum })).filter((p) => p.share > 0);
}

/**
 * The Flame colouring in force: the state's when the payload offers it, else its first.
 * @param {Data} data @param {string} colour
 */
export function flameColouring(data, colour) {
  return data.vocab.flame_colours.includes(colour) ? colour : data.vocab.flame_colours[0];
}

/**
 * A comparison's bars coloured by change: the delta column of the sized metric
 * (`<metric>_delta`, the run's suffix taken off, else the first delta column: CPU total's), and
 * the largest change below the root, which gets the deepest colour.
 * @param {Data} data @param {{width: string}} metric
 * @returns {{column: string, values: Float64Array, scale: number}}
 */
export function flameDeltas(data, metric) {
  const stem = metric.width.replace(/_(base|new)$/, ""); // a comparison sizes by one run's column
  const column = data.num[stem + "_delta"] ? stem + "_delta" : data.vocab.columns.find((c) => c.delta && data.num[c.name])?.name ?? "";
  const values = data.num[column] || new Float64Array(data.n).fill(NaN);
  let scale = 0;
  for (let i = 1; i < data.n; i++) if (Math.abs(values[i]) > scale) scale = Math.abs(values[i]);
  return { column, values, scale };
}

// -- the DOM ----------------------------------------------------------------------------------

export const FLAME_ROW = 18;


/**
 * How a colouring fills the bars of one draw: `fill` paints node i's bar, `tally` counts the
 * bars a comparison coloured faster and slower.
 * @typedef {object} Painter
 * @property {(g: CanvasRenderingContext2D, i: number, x: number, top: number, w: number, r: number) => void} fill
 * @property {{faster: number, slower: number}} tally
 */

/**
 * One way of colouring the Flame: what the colour picker calls it, its painter for a draw, and
 * its legend.
 * @typedef {object} Colouring
 * @property {string} label
 * @property {(table: Data, metric: FlameMetric, pal: Palette) => Painter} painter
 * @property {(table: Data, metric: FlameMetric, pal: Palette) => (Node|string)[]} legend
 */

/** @import { Palette } from "../colours.js" */

/** @param {Record<string, string>} colours @param {[string, string][]} items role and label of each swatch */
function swatches(colours, items) {
  return items.flatMap(([role, label]) => {
    const swatch = h("span", { class: `tp-swatch tp-swatch-${role}` });
    swatch.style.background = colours[role];
    return [swatch, h("span", { text: label })];
  });
}

/**
 * The Flame's colourings, by the names the vocabulary's `flame_colours` use (a profile offers
 * phase and type, a comparison delta and type).
 * @type {Record<string, Colouring>}
 */
export const COLOURINGS = {
  phase: {
    label: "forward / backward / other",
    painter(table, metric, pal) {
      const phases = phaseColumns(table, metric);
      /** @type {Record<string, string>} */
      const colours = { fwd: pal.fwd, bwd: pal.bwd, other: pal.other };
      return {
        tally: { faster: 0, slower: 0 },
        fill(g, i, x, top, w) {
          let at = x;
          for (const part of phaseShares(table, i, phases)) {
            g.fillStyle = colours[part.role];
            const pw = w * part.share;
            g.fillRect(at, top, pw, FLAME_ROW - 1);
            at += pw;
          }
        },
      };
    },
    legend(table, metric, pal) {
      const phases = phaseColumns(table, metric);
      const roles = phaseRoles(table, phases);
      /** @type {[string, string][]} */
      const items = phases.length ? phases.map((c, k) => [roles[k], table.spec[c].label]) : [["fwd", "forward"], ["bwd", "backward"]];
      return swatches(/** @type {any} */ (pal), items);
    },
  },
  type: {
    label: "module type",
    painter(table, _metric, pal) {
      return {
        tally: { faster: 0, slower: 0 },
        fill(g, i, x, top, w) {
          const hue = typeHue(table.type[i] || table.vocab.kinds[table.kind[i]]);
          g.fillStyle = `hsl(${hue} ${pal.dark ? "45%" : "60%"} ${pal.dark ? "58%" : "74%"})`;
          g.fillRect(x, top, w, FLAME_ROW - 1);
        },
      };
    },
    legend: () => [h("span", { class: "tp-legend-note", text: "one colour per module type" })],
  },
  delta: {
    label: "change (faster green, slower red)",
    painter(table, metric, pal) {
      const deltas = flameDeltas(table, metric);
      const tally = { faster: 0, slower: 0 };
      return {
        tally,
        fill(g, i, x, top, w, r) {
          const v = deltas.values[i];
          if (r !== 0 && v < 0) tally.faster++;
          else if (r !== 0 && v > 0) tally.slower++;
          g.fillStyle = deltaColour(v, deltas.scale, pal.dark);
          g.fillRect(x, top, w, FLAME_ROW - 1);
        },
      };
    },
    legend(table, metric, pal) {
      const column = flameDeltas(table, metric).column;
      const note = h("span", { class: "tp-legend-note", text: `by ${table.spec[column]?.label || column}, deeper for a bigger change` });
      return [...swatches({ faster: deltaColour(-1, 1, pal.dark), slower: deltaColour(1, 1, pal.dark) }, [["faster", "faster"], ["slower", "slower"]]), note];
    },
  },
};

/** The colouring of a state value (flameColouring), or the first this module draws. @param {Data} table @param {string} colour */
function colouringOf(table, colour) {
  return COLOURINGS[flameColouring(table, colour)] || Object.values(COLOURINGS)[0];
}

/**
 * What the tooltip says of node i: its path, kind and type, the sized metric with its share of
 * the zoomed node, the other times, FLOPs and calls it has, and the steps it ran in.
 * @param {Viewed} viewed @param {FlameMetric} metric @param {number} zoomRow @param {number} i
 */
export function flameTip(viewed, metric, zoomRow, i) {
  const table = viewed.table;
  const R = table.roles;
  const base = table.num[metric.width][zoomRow];
  const kind = table.vocab.kinds[table.kind[i]];
  const backward = table.backward[i] ? " · backward" : "";
  const lines = [table.path[i], table.type[i] ? `${kind} · ${table.type[i]}${backward}` : `${kind}${backward}`];
  const v = table.num[metric.width][i];
  const spec = table.spec[metric.width];
  lines.push(`${spec.label}: ${formatValue(spec.unit, v)} (${formatPercent(v, base)} of ${table.name[zoomRow]})`);
  for (const c of columnsFor(table, null, false)) {  // (the layer columns: the values read below)
    if (c.type === NODE || c.key === metric.width || !(c.type === "time" || c.key === R.flops || c.key === R.calls)) continue;
    const val = table.num[table.spec[c.key].layer_alt || c.key][i];
    if (!Number.isNaN(val) && val !== 0) lines.push(`${c.label}: ${formatValue(c.type, val)}`);
  }
  if (viewed.folded) lines.push(`ran in ${viewed.folded.runs[i]} of ${viewed.folded.count} steps (means per step)`);
  return lines.join("\n");
}

/**
 * The Flame view: an icicle of the viewed tree on a canvas, sized by a metric, coloured by
 * phase or module type; click zooms in (the top bar or the breadcrumb zooms out), hover gives
 * the numbers, the table's selection and search show here too.
 * @implements {ViewFace}
 */
class FlameView {
  /** @param {Context} ctx */
  constructor(ctx) {
    const { data } = ctx;
    this.ctx = ctx;
    this.crumbs = h("nav", { class: "tp-crumbs", "aria-label": "Zoom path", "data-testid": `${ctx.view}-crumbs` });
    this.metricSelect = /** @type {HTMLSelectElement} */ (h("select", { class: "tp-select", "data-testid": `${ctx.view}-metric`, "aria-label": "Bar width" }));
    for (const m of flameMetrics(data)) this.metricSelect.append(h("option", { value: m.key, text: m.label }));
    this.colourSelect = /** @type {HTMLSelectElement} */ (h("select", { class: "tp-select", "data-testid": `${ctx.view}-colour`, "aria-label": "Bar colour" }));
    for (const c of data.vocab.flame_colours) this.colourSelect.append(h("option", { value: c, text: COLOURINGS[c]?.label || c }));
    this.legend = h("span", { class: "tp-legend", "data-testid": `${ctx.view}-legend` });
    const bar = h("div", { class: "tp-flame-bar" },
      this.crumbs,
      h("label", { class: "tp-ctl" }, "width ", this.metricSelect),
      h("label", { class: "tp-ctl" }, "colour ", this.colourSelect),
      this.legend);
    this.canvas = /** @type {HTMLCanvasElement} */ (h("canvas", { class: "tp-flame-canvas", "data-testid": `${ctx.view}-canvas`, role: "img", "aria-label": "Flame graph of the layer tree" }));
    this.tip = h("div", { class: "tp-tip", "data-testid": `${ctx.view}-tip`, hidden: true, role: "tooltip" });
    this.scroll = h("div", { class: "tp-flame-scroll", tabindex: "0", "data-testid": ctx.view }, this.canvas);
    // The tooltip lives in the panel, not in the scrolling box, so a short icicle does not clip it.
    this.el = h("div", { class: `tp-panel tp-panel-${ctx.view}`, "data-view": ctx.view }, bar, this.scroll, this.tip);
    /** @type {FlameLayout|null} */
    this.layout = null;
    /** @type {Viewed} */
    this.viewed = viewedTable(data, "");
    this.st = ctx.state();
    this.zoomRow = 0;
    this.metric = flameMetric(data, this.st.metric);
    this.lastWidth = -1;
    this.canvas.addEventListener("mousemove", (event) => this.onMove(event));
    this.canvas.addEventListener("mouseleave", () => (this.tip.hidden = true));
    this.el.addEventListener("click", (event) => this.onClick(event));
    this.el.addEventListener("keydown", (event) => this.onKeydown(event));
    this.el.addEventListener("change", (event) => this.onChange(event));
    this.resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => {
      if (this.scroll.clientWidth !== this.lastWidth && !this.el.hidden) this.resized();
    }) : null;
    this.resize?.observe(this.scroll);
  }

  /** Lays the icicle out for the canvas's width and paints it; the panel's data says what it drew. */
  draw() {
    const t0 = performance.now();
    const { canvas, el, metric, st } = this;
    const table = this.viewed.table;
    const width = Math.max(0, this.scroll.clientWidth);
    const layout = flameLayout(table, { root: this.zoomRow, width, widthColumn: metric.width, showOps: st.show_ops });
    this.layout = layout;
    const dpr = globalThis.devicePixelRatio || 1;
    const height = Math.max(layout.levels, 1) * FLAME_ROW;
    canvas.style.width = width + "px";
    canvas.style.height = height + "px";
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
    const g = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    const pal = canvasPalette(el);
    g.fillStyle = pal.bg;
    g.fillRect(0, 0, width, height);
    g.font = `11px ${getComputedStyle(el).fontFamily || "sans-serif"}`;
    g.textBaseline = "middle";
    const painter = colouringOf(table, st.flame_colour).painter(table, metric, pal);
    const searched = this.paintBars(g, layout, painter, pal);
    const outlined = this.outlineSelection(g, layout, pal);
    // What was drawn, for tests and for anyone timing it: rectangles, draw time, search and selection.
    Object.assign(el.dataset, {
      drawMs: (performance.now() - t0).toFixed(1), rects: String(layout.count), matches: String(searched.matches),
      dimmed: String(searched.dimmed), selected: outlined, faster: String(painter.tally.faster), slower: String(painter.tally.slower),
    });
  }

  /**
   * Every bar: its colour, the dark stripe of a self metric, its name where it fits; bars the
   * search does not match fade. Returns how many matched and faded.
   * @param {CanvasRenderingContext2D} g @param {FlameLayout} layout @param {Painter} painter @param {Palette} pal
   */
  paintBars(g, layout, painter, pal) {
    const { metric, st } = this;
    const table = this.viewed.table;
    const charWidth = g.measureText("abcdefghijklmnopqrstuvwxyz0123456789").width / 36 || 6;
    const match = makeMatcher(table, st.search);
    const selfValues = metric.self ? table.num[table.spec[metric.self].layer_alt || metric.self] : null;
    const widthValues = table.num[metric.width];
    const { node, x, w, level, count } = layout;
    let matches = 0;
    let dimmed = 0;
    for (let r = 0; r < count; r++) {
      const i = node[r];
      const top = level[r] * FLAME_ROW;
      const rw = Math.max(w[r] - 1, 0.5);
      // The search shows here too: bars that do not match fade (the zoomed node aside).
      const faded = !!match && r !== 0 && !match(i);
      if (match && r !== 0) faded ? dimmed++ : matches++;
      g.globalAlpha = faded ? 0.28 : 1;
      painter.fill(g, i, x[r], top, rw, r);
      if (selfValues && widthValues[i] > 0) {
        // A self metric: the dark stripe along the bottom is the node's own share of its width.
        g.fillStyle = pal.selfMark;
        g.fillRect(x[r], top + FLAME_ROW - 5, Math.max(0, Math.min(1, selfValues[i] / widthValues[i])) * rw, 4);
      }
      if (rw > 24) {
        const name = table.name[i];
        const room = Math.floor((rw - 6) / charWidth);
        if (room >= 2) {
          g.fillStyle = pal.text;
          g.fillText(name.length > room ? name.slice(0, room - 1) + "…" : name, x[r] + 3, top + FLAME_ROW / 2);
        }
      }
    }
    g.globalAlpha = 1;
    return { matches, dimmed };
  }

  /** The table's selection, outlined; returns its path ("" when it is not drawn). @param {CanvasRenderingContext2D} g @param {FlameLayout} layout @param {Palette} pal */
  outlineSelection(g, layout, pal) {
    const table = this.viewed.table;
    const selected = rowOfPath(table, this.st.selected);
    let outlined = "";
    for (let r = 0; r < layout.count; r++) {
      if (layout.node[r] !== selected) continue;
      g.strokeStyle = pal.accent;
      g.lineWidth = 2;
      g.strokeRect(layout.x[r] + 1, layout.level[r] * FLAME_ROW + 1, Math.max(layout.w[r] - 3, 1), FLAME_ROW - 3);
      outlined = table.path[selected];
    }
    return outlined;
  }

  fillCrumbs() {
    const table = this.viewed.table;
    this.crumbs.replaceChildren();
    const chain = ancestry(table, this.viewed.root, this.zoomRow);
    chain.forEach((i, k) => {
      if (k) this.crumbs.append(h("span", { class: "tp-crumb-sep", text: "›", "aria-hidden": "true" }));
      const last = k === chain.length - 1;
      this.crumbs.append(h("button", { type: "button", class: "tp-crumb", "data-path": table.path[i], "aria-current": last ? "true" : null, text: table.name[i], title: table.path[i] }));
    });
  }

  fillLegend() {
    const table = this.viewed.table;
    const { metric } = this;
    this.legend.replaceChildren(...colouringOf(table, this.st.flame_colour).legend(table, metric, canvasPalette(this.el)));
    if (metric.self) this.legend.append(h("span", { class: "tp-legend-note", text: `dark stripe: ${metric.label}` }));
  }

  /** @param {MouseEvent} event */
  rectAt(event) {
    if (!this.layout) return -1;
    const box = this.canvas.getBoundingClientRect();
    return flameHit(this.layout, event.clientX - box.left, event.clientY - box.top, FLAME_ROW);
  }

  /** @param {MouseEvent} event */
  onMove(event) {
    const { tip, el } = this;
    const r = this.rectAt(event);
    if (r < 0 || !this.layout) {
      tip.hidden = true;
      return;
    }
    tip.textContent = flameTip(this.viewed, this.metric, this.zoomRow, this.layout.node[r]);
    tip.hidden = false;
    const box = el.getBoundingClientRect();
    const left = Math.min(event.clientX - box.left + 12, Math.max(0, el.clientWidth - tip.offsetWidth - 4));
    // Below the pointer, or above it where the panel ends first.
    const below = event.clientY - box.top + 14;
    const top = below + tip.offsetHeight > el.clientHeight && event.clientY - box.top > tip.offsetHeight + 8 ? event.clientY - box.top - tip.offsetHeight - 8 : below;
    tip.style.left = left + "px";
    tip.style.top = top + "px";
  }

  /** @param {MouseEvent} event */
  onClick(event) {
    const { ctx, viewed } = this;
    const table = viewed.table;
    const crumb = /** @type {HTMLElement|null} */ (/** @type {HTMLElement} */ (event.target).closest(".tp-crumb"));
    if (crumb) {
      const path = /** @type {string} */ (crumb.dataset.path);
      ctx.change({ zoom: rowOfPath(table, path) === viewed.root ? "" : path });
      return;
    }
    if (event.target !== this.canvas || !this.layout) return;
    const r = this.rectAt(event);
    if (r < 0) return;
    const i = this.layout.node[r];
    this.scroll.focus({ preventScroll: true });
    if (r === 0) {
      // The top bar is the zoomed node: clicking it zooms out one level.
      const up = i === viewed.root ? viewed.root : table.parent[i];
      ctx.change({ zoom: up === viewed.root ? "" : table.path[up], selected: table.path[i] });
    } else {
      ctx.change({ zoom: table.path[i], selected: table.path[i] });
    }
  }

  /** @param {KeyboardEvent} event */
  onKeydown(event) {
    const { viewed, zoomRow } = this;
    if (event.key === "Escape" && zoomRow !== viewed.root) {
      event.preventDefault();
      const up = viewed.table.parent[zoomRow];
      this.ctx.change({ zoom: up <= viewed.root ? "" : viewed.table.path[up] });
    }
  }

  /** @param {Event} event */
  onChange(event) {
    if (event.target === this.metricSelect) this.ctx.change({ metric: this.metricSelect.value });
    else if (event.target === this.colourSelect) this.ctx.change({ flame_colour: this.colourSelect.value });
  }

  /** @param {FullState} st @param {Viewed} viewed */
  update(st, viewed) {
    this.st = st;
    this.viewed = viewed;
    this.metric = flameMetric(viewed.table, st.metric);
    this.metricSelect.value = this.metric.key;
    this.colourSelect.value = st.flame_colour;
    const z = rowOfPath(viewed.table, st.zoom);
    this.zoomRow = z > viewed.root && z < viewed.table.end[viewed.root] ? z : viewed.root;
    this.fillCrumbs();
    this.fillLegend();
    this.lastWidth = this.scroll.clientWidth;
    this.draw();
  }

  resized() {
    this.lastWidth = this.scroll.clientWidth;
    this.draw();
  }

  destroy() {
    this.resize?.disconnect();
  }
}

/** @param {Context} ctx @returns {ViewFace} */
export function create(ctx) {
  return new FlameView(ctx);
}

/** The shared controls the Flame acts on: ops show as bars, the search fades what it does not match. @type {import("../types.js").ControlUse} */
export const controls = { ops: true, search: true };
