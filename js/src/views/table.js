// @ts-check
// The Table view: the layer tree as a virtualised tree table (the WAI-ARIA treegrid pattern). Its
// pure half (the keys, the virtual window) is checked by node --test; its DOM half draws only the
// rows in view, cloned from one template row.
import { hotRows } from "../answers.js";
import { NODE, columnsFor, percentSamples, tableLayout, widthSamples, NODE_MIN, CELL_PAD } from "../columns.js";
import { markDelta } from "../colours.js";
import { exactTitle, fillLabel, h, labelElement, measureTexts, typeTag } from "../dom.js";
import { cellPercent, formatBytes, formatCount, formatTime } from "../format.js";
import { resolveSort, shownValues, sortsAscending } from "../rows.js";
import { matchRange, matchesType } from "../search.js";
import { rowOfPath, toggleExpanded, viewedTable } from "../tree.js";

/** @import { Data, Folded, Context, ViewFace, FullState, Viewed, Visible } from "../types.js" */
/** @import { ViewColumn } from "../columns.js" */

// -- the keyboard ---------------------------------------------------------------------------

/**
 * What a key does in the tree table (the WAI-ARIA treegrid pattern): Up/Down move the current
 * row, Home/End/PageUp/PageDown jump; Right opens a closed row or moves to its first child,
 * Left closes an open row or moves to its parent. Returns the row to make current and/or the
 * path whose expansion to toggle; null for a key the table does not use.
 * @param {Data} data @param {{rows: number[], hasKids: Uint8Array}} view @param {Set<string>} expanded
 * @param {number} root @param {number} current row index, -1 for none @param {string} key
 * @param {number} [page] rows per page
 * @returns {{select?: number, toggle?: string}|null}
 */
export function keyAction(data, view, expanded, root, current, key, page = 10) {
  const { rows, hasKids } = view;
  if (!rows.length) return null;
  const at = rows.indexOf(current);
  const pick = (/** @type {number} */ k) => ({ select: rows[Math.max(0, Math.min(rows.length - 1, k))] });
  const open = current === root || expanded.has(data.path[current]);
  switch (key) {
    case "ArrowDown": return pick(at < 0 ? 0 : at + 1);
    case "ArrowUp": return pick(at < 0 ? 0 : at - 1);
    case "Home": return pick(0);
    case "End": return pick(rows.length - 1);
    case "PageDown": return pick(at + page);
    case "PageUp": return pick(at - page);
    case "ArrowRight":
      if (at < 0) return pick(0);
      if (hasKids[current] && !open) return { toggle: data.path[current] };
      if (hasKids[current] && at + 1 < rows.length && data.parent[rows[at + 1]] === current) return { select: rows[at + 1] };
      return {};
    case "ArrowLeft":
      if (at < 0) return pick(0);
      if (hasKids[current] && open && current !== root) return { toggle: data.path[current] };
      if (current !== root && rows.includes(data.parent[current])) return { select: data.parent[current] };
      return {};
    default:
      return null;
  }
}

// -- virtual scrolling ------------------------------------------------------------------------

export const ROW_HEIGHT = 24;
export const OVERSCAN = 16;

/**
 * Which rows to build for a scroll position: the rows in view plus `overscan` on each side.
 * `scrollTop` is relative to the first row; positions past the end clamp to the last page.
 * Returns {start, end} (end exclusive), the top offset of `start` and the full height.
 * @param {number} scrollTop @param {number} viewportHeight @param {number} rowHeight
 * @param {number} total @param {number} [overscan]
 */
export function virtualWindow(scrollTop, viewportHeight, rowHeight, total, overscan = OVERSCAN) {
  const height = total * rowHeight;
  const visible = Math.ceil(Math.max(0, viewportHeight) / rowHeight) + 1;
  const maxFirst = Math.max(0, total - visible + 1);
  const first = Math.min(maxFirst, Math.max(0, Math.floor(scrollTop / rowHeight)));
  const start = Math.max(0, first - overscan);
  const end = Math.min(total, first + visible + overscan);
  return { start, end, offset: start * rowHeight, height };
}

// -- the DOM ----------------------------------------------------------------------------------

/** The tooltip of a row's name: path, kind and type, shapes, source, and the steps it ran in. @param {Data} data @param {number} i @param {Folded|null} folded */
function nodeTitle(data, i, folded) {
  const kind = data.vocab.kinds[data.kind[i]];
  const lines = [data.path[i], data.type[i] ? `${kind} · ${data.type[i]}` : kind];
  if (data.backward[i]) lines[1] += " · backward";
  if (data.shapes[i]) lines.push("input shapes: " + data.shapes[i]);
  if (data.source[i]) lines.push("called from: " + data.source[i]);
  if (folded) lines.push(`ran in ${folded.runs[i]} of ${folded.count} steps; numbers are means per step`);
  return lines.join("\n");
}

/** One row's elements, cloned for every row drawn. @param {ViewColumn[]} columns */
function rowTemplate(columns) {
  const row = h("div", { class: "tp-row", role: "row" });
  for (const col of columns) {
    if (col.type === NODE) {
      row.append(h("div", { class: "tp-cell tp-name", role: "gridcell", "data-col": col.key },
        h("span", { class: "tp-caret-slot" }), labelElement(), h("span", { class: "tp-badge" }), h("span", { class: "tp-tag" })));
    } else if (col.type === "time") {
      row.append(h("div", { class: `tp-cell tp-num tp-fam-${col.family}`, role: "gridcell", "data-col": col.key },
        h("span", { class: "tp-bar" }), h("span", { class: "tp-v" }), h("span", { class: "tp-pct" })));
    } else {
      row.append(h("div", { class: "tp-cell tp-num", role: "gridcell", "data-col": col.key }, h("span", { class: "tp-v" })));
    }
  }
  const template = document.createElement("template");
  template.content.append(row);
  return template;
}

/**
 * The widest value, percent and header word of each numeric column, measured.
 * @param {HTMLElement} host @param {Data} table @param {ViewColumn[]} numeric @param {Folded|null} folded
 */
function measureColumns(host, table, numeric, folded) {
  const groups = numeric.map((col) => {
    const values = col.spread && folded ? folded[col.spread][col.key] : table.num[col.key];
    let lo = Infinity;
    let hi = -Infinity;
    for (const v of values) {
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    if (!(hi >= lo)) lo = hi = 0;
    const base = col.of ? table.num[col.of][0] : NaN;
    // The layer columns are what "Self" shows with ops folded in: they reach higher.
    const alt = table.spec[col.key]?.layer_alt;
    if (alt && !col.spread) for (const v of table.num[alt]) if (v > hi) hi = v;
    return {
      values: widthSamples(col.type, lo, hi),
      pct: col.type === "time" ? percentSamples(lo, hi, base) : [],
      words: col.label.split(/\s+/),
    };
  });
  const width = (/** @type {string} */ cls, /** @type {string[][]} */ lists) => {
    const flat = measureTexts(host, cls, lists.flat());
    let k = 0;
    return lists.map((list) => {
      let w = 0;
      for (let j = 0; j < list.length; j++) w = Math.max(w, flat[k++]);
      return w;
    });
  };
  const values = width("tp-v tp-measure-num", groups.map((g) => g.values));
  const pcts = width("tp-pct tp-measure-num", groups.map((g) => g.pct));
  const heads = width("tp-th tp-measure-head", groups.map((g) => g.words));
  // The sort arrow takes room beside the widest word.
  return numeric.map((_, j) => ({ value: values[j], pct: pcts[j], head: heads[j] + 14 }));
}

/**
 * One number cell: its text, percentage, bar and tooltip for a column's value on row i.
 * @param {Element} cell @param {ViewColumn} col @param {Data} table @param {number} i @param {Folded|null} folded
 */
function fillNumber(cell, col, table, i, folded) {
  const v = /** @type {Float64Array} */ (col.values)[i];
  const value = /** @type {Element} */ (col.type === "time" ? cell.children[1] : cell.firstElementChild);
  const empty = Number.isNaN(v) || (v === 0 && col.type !== "int");
  const el = /** @type {HTMLElement} */ (cell);
  if (col.type === "time") {
    const base = /** @type {number} */ (col.base);
    const pct = empty ? 0 : (100 * v) / base;
    value.textContent = empty ? "" : formatTime(v);
    cell.children[2].textContent = empty ? "" : cellPercent(v, base);
    /** @type {HTMLElement} */ (cell.firstElementChild).style.width = Number.isFinite(pct) ? Math.max(0, Math.min(100, pct)) + "%" : "0";
    let title = empty ? "" : exactTitle(v, "µs");
    if (folded && !col.spread && !empty && folded.low[col.key]) {
      title = `mean ${formatTime(v)} · min ${formatTime(folded.low[col.key][i])} · max ${formatTime(folded.high[col.key][i])} over ${folded.count} steps\n${title}`;
    }
    el.title = title;
  } else if (col.type === "bytes") {
    value.textContent = empty ? "" : formatBytes(v);
    const own = col.self ? table.num[col.self][i] : NaN;
    el.title = empty ? "" : `${exactTitle(v, "bytes")}\nself: ${formatBytes(own)}`;
  } else if (col.type === "count") {
    if (Number.isNaN(v) && col.unknown) {
      value.textContent = col.unknown;
      el.title = "Unknown: this row holds an op of unknown cost (listed in prof.unsupported_ops, said under the profile)";
      return;
    }
    value.textContent = empty ? "" : formatCount(v);
    const R = table.roles;
    // FLOPs say their MACs too (the registry's FLOPs count 2 per multiply-accumulate, and more).
    el.title = empty ? "" : col.key === R.flops && table.num[R.macs] ? `${exactTitle(v, table.spec[R.flops].label)}\n${table.spec[R.macs].label}: ${formatCount(table.num[R.macs][i])}` : exactTitle(v, col.key);
  } else {
    value.textContent = Number.isNaN(v) ? "" : String(v);
  }
  if (table.spec[col.key].delta) markDelta(cell, v);
}

/** Rows whose names the Node column is sized for (the first ones shown; more cost a measure each). */
const NAMES_MEASURED = 2000;

/**
 * The width the Node column needs for the rows shown: each row's indent, caret, name, backward
 * badge and type tag, measured (widths of names already measured are kept in `cache`).
 * @param {HTMLElement} host @param {Data} table @param {number} root @param {number[]} rows
 * @param {Map<string, number>} cache
 */
function nodeNeed(host, table, root, rows, cache) {
  const shown = rows.slice(0, NAMES_MEASURED);
  const fresh = new Set();
  for (const i of shown) {
    if (!cache.has("n" + table.name[i])) fresh.add("n" + table.name[i]);
    const tag = typeTag(table, i);
    if (tag && !cache.has("t" + tag)) fresh.add("t" + tag);
  }
  if (fresh.size) {
    const keys = [...fresh];
    const names = measureTexts(host, "tp-label", keys.filter((k) => k[0] === "n").map((k) => k.slice(1)));
    const tags = measureTexts(host, "tp-tag", keys.filter((k) => k[0] === "t").map((k) => k.slice(1)));
    let a = 0;
    let b = 0;
    // 4% more than measured: region names are drawn in italics, the hot path's may be bolder
    for (const k of keys) cache.set(k, 1.04 * (k[0] === "n" ? names[a++] : tags[b++]));
    if (names.every((w) => w === 0) && keys.length) for (const k of keys) cache.delete(k); // not laid out yet
  }
  const indent = parseFloat(getComputedStyle(host).getPropertyValue("--tp-indent")) || 14;
  let need = 0;
  for (const i of shown) {
    const tag = typeTag(table, i);
    // the indent (4 px and one step a level), the caret slot and its gap, the name, the badge
    // ("bwd"), the tag with its gap and margin, the cell's right padding
    const w = 4 + (table.depth[i] - table.depth[root]) * indent + 18 + (cache.get("n" + table.name[i]) || 0)
      + (table.backward[i] ? 36 : 0) + (tag ? 8 + (cache.get("t" + tag) || 0) : 0) + CELL_PAD / 2 + 1;
    if (w > need) need = w;
  }
  return Math.ceil(need);
}

/**
 * The tree table view: header, virtualised rows, keyboard. Rows are clones of one template, kept
 * while they stay in view; one listener on the panel handles every click and key.
 * @implements {ViewFace}
 */
class TableView {
  /** @param {Context} ctx */
  constructor(ctx) {
    this.ctx = ctx;
    this.data = ctx.data;
    this.head = h("div", { class: "tp-head", role: "row" });
    this.rowsBox = h("div", { class: "tp-rows", role: "rowgroup" });
    this.sizer = h("div", { class: "tp-sizer" }, this.rowsBox);
    const grid = h("div", { class: "tp-grid" }, this.head, this.sizer);
    this.scroller = h("div", { class: "tp-scroller", "data-testid": "scroller", role: "treegrid", "aria-label": "Profile tree", tabindex: "0" }, grid);
    this.el = h("div", { class: `tp-panel tp-panel-${ctx.view}`, "data-view": ctx.view }, this.scroller);
    /** @type {ViewColumn[]} */
    this.columns = [];
    /** @type {ViewColumn[]} */
    this.numeric = [];
    this.signature = "";
    this.template = document.createElement("template");
    /** @type {{value: number, pct: number, head: number}[]} */
    this.measured = [];
    /** @type {HTMLElement[]} */
    this.spare = [];
    this.headHeight = 0;
    this.windowStart = 0;
    this.version = 0;
    /** @type {Visible} */
    this.view = { rows: [], hasKids: new Uint8Array(0), shown: new Uint8Array(0) };
    this.st = ctx.state();
    /** @type {Viewed} */
    this.viewed = viewedTable(this.data, "");
    this.selectedRow = -1;
    this.revealed = "";
    /** The whole run's hot path (marked where the whole run is viewed). */
    this.hot = hotRows(ctx.data);
    /** @type {Map<string, number>} measured widths of names and type tags */
    this.nameWidths = new Map();
    this.nodeNeed = 0;
    this.paint = this.paint.bind(this);
    this.scroller.addEventListener("scroll", this.paint, { passive: true });
    this.el.addEventListener("click", (event) => this.onClick(event));
    this.el.addEventListener("keydown", (event) => this.onKeydown(event));
    this.resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => this.resized()) : null;
    this.resize?.observe(this.scroller);
  }

  /** New columns (the folded steps add two): header and row template rebuilt, widths measured. */
  setColumns() {
    const columns = columnsFor(this.data, this.viewed.folded, !!this.st?.show_ops);
    const sig = columns.map((c) => c.label).join("|");
    if (sig === this.signature) return;
    this.signature = sig;
    this.columns = columns;
    this.numeric = columns.filter((c) => c.type !== NODE);
    this.head.replaceChildren(...columns.map((col) => h("div", {
      class: `tp-th${col.type === NODE ? " tp-name" : " tp-num"}`, role: "columnheader", "data-col": col.key,
      "data-sortable": col.sortable ? "1" : null, tabindex: col.sortable ? "0" : null,
      title: col.title + (col.sortable ? "\nClick (or Enter) to sort" : ""),
    }, h("span", { text: col.label }))));
    this.template = rowTemplate(columns);
    this.rowsBox.replaceChildren();
    this.spare.length = 0;
    this.measured = [];
    this.headHeight = 0;
  }

  /** Column widths for the space there is: numbers keep theirs, the Node column gives way. */
  layout() {
    const { ctx, viewed } = this;
    if (!this.measured.length || this.measured.every((m) => m.value === 0)) this.measured = measureColumns(ctx.root, viewed.table, this.numeric, viewed.folded);
    const available = this.scroller.clientWidth;
    if (!available) return;
    const { showPct, widths, minWidth, node } = tableLayout(this.measured, available, NODE_MIN, this.nodeNeed);
    ctx.root.style.setProperty("--tp-cols", `minmax(${node}px, 1fr) ${widths.map((w) => w + "px").join(" ")}`);
    ctx.root.style.setProperty("--tp-min-width", minWidth + "px");
    this.el.classList.toggle("tp-nopct", !showPct);
    this.headHeight = 0;
  }

  /** @param {any} row @param {number} i */
  fillRow(row, i) {
    if (row._i === i && row._v === this.version) return;
    row._i = i;
    row._v = this.version;
    const { viewed, st } = this;
    const table = viewed.table;
    const depth = table.depth[i] - table.depth[viewed.root];
    row.setAttribute("data-path", table.path[i]);
    row.setAttribute("aria-level", String(depth + 1));
    row.id = `tp-row-${i}`;
    const selected = i === this.selectedRow;
    row.setAttribute("aria-selected", String(selected));
    const bwd = !!table.backward[i];
    const hot = viewed.root === 0 && !viewed.folded && this.hot.has(i);
    row.className = `tp-row tp-k-${table.vocab.kinds[table.kind[i]]}${bwd ? " tp-backward" : ""}${i === viewed.root ? " tp-root" : ""}${selected ? " tp-selected" : ""}${hot ? " tp-hot" : ""}`;
    row.style.setProperty("--d", String(depth));
    const nameCell = row.firstElementChild;
    const slot = nameCell.firstElementChild;
    if (this.view.hasKids[i]) {
      const open = i === viewed.root || st.expanded.has(table.path[i]);
      row.setAttribute("aria-expanded", String(open));
      let caret = slot.firstElementChild;
      if (!caret) {
        caret = h("button", { type: "button", class: "tp-caret", "data-testid": "caret", tabindex: "-1" });
        slot.append(caret);
      }
      caret.setAttribute("aria-label", (open ? "Collapse " : "Expand ") + table.name[i]);
      caret.disabled = i === viewed.root;
    } else {
      row.removeAttribute("aria-expanded");
      slot.replaceChildren();
    }
    const label = slot.nextElementSibling;
    fillLabel(label, table.name[i], st.search ? matchRange(table.vocab, st.search, table.name[i], table.path[i]) : null);
    // Every backward row says so (not only the first): the badge; a module says its class.
    const badge = label.nextElementSibling;
    badge.textContent = bwd ? "bwd" : "";
    const tag = typeTag(table, i);
    const tagEl = badge.nextElementSibling;
    if (st.search && tag && matchesType(table.vocab, st.search, tag)) tagEl.replaceChildren(h("mark", { text: tag }));
    else tagEl.textContent = tag;
    nameCell.title = nodeTitle(table, i, viewed.folded);
    let cell = nameCell.nextElementSibling;
    for (const col of this.numeric) {
      fillNumber(cell, col, table, i, viewed.folded);
      cell = cell.nextElementSibling;
    }
  }

  /**
   * Paint: fills the rows of the virtual window and keeps them when they stay in view. Rows in the
   * DOM are exactly the window's, in display order; scrolling by less than a window moves the rows
   * that left on one side over to the other, so only the moved ones are refilled. The panel's
   * data-scroll-top and data-scroll-left say what scroll position the rows drawn are for.
   */
  paint() {
    const { scroller, rowsBox, spare, view } = this;
    if (!this.headHeight) this.headHeight = this.head.offsetHeight;
    const viewport = scroller.clientHeight > 0 ? scroller.clientHeight - this.headHeight : 20 * ROW_HEIGHT;
    const win = virtualWindow(scroller.scrollTop - this.headHeight, viewport, ROW_HEIGHT, view.rows.length);
    const count = win.end - win.start;
    let have = rowsBox.childElementCount;
    const shift = win.start - this.windowStart;
    if (shift > 0 && shift < have) for (let k = 0; k < shift; k++) rowsBox.append(/** @type {Element} */ (rowsBox.firstElementChild));
    else if (shift < 0 && -shift < have) for (let k = 0; k < -shift; k++) rowsBox.prepend(/** @type {Element} */ (rowsBox.lastElementChild));
    for (; have > count; have--) spare.push(/** @type {HTMLElement} */ (rowsBox.removeChild(/** @type {Element} */ (rowsBox.lastElementChild))));
    for (; have < count; have++) rowsBox.append(spare.pop() || /** @type {Element} */ (this.template.content.firstElementChild).cloneNode(true));
    this.windowStart = win.start;
    let row = rowsBox.firstElementChild;
    for (let k = 0; k < count; k++, row = /** @type {Element} */ (row).nextElementSibling) this.fillRow(row, view.rows[win.start + k]);
    rowsBox.style.transform = `translateY(${win.offset}px)`;
    this.el.dataset.scrollTop = String(scroller.scrollTop);
    this.el.dataset.scrollLeft = String(scroller.scrollLeft);
  }

  /** Scrolls just enough to show the row at `at` (of the view's rows). @param {number} at */
  reveal(at) {
    if (at < 0) return;
    const { scroller } = this;
    if (!this.headHeight) this.headHeight = this.head.offsetHeight;
    const top = this.headHeight + at * ROW_HEIGHT;
    const bottom = top + ROW_HEIGHT;
    if (top - this.headHeight < scroller.scrollTop) scroller.scrollTop = top - this.headHeight;
    else if (bottom > scroller.scrollTop + scroller.clientHeight) scroller.scrollTop = bottom - scroller.clientHeight;
  }

  /** A header click: sort by that column, or flip the order when it sorts already. @param {string} key */
  sortBy(key) {
    const { ctx, data } = this;
    const now = ctx.state();
    if (resolveSort(data.vocab, now.sort_by) === key) ctx.change({ ascending: !now.ascending });
    else ctx.change({ sort_by: key, ascending: sortsAscending(data, key) });
  }

  /** @param {Event} event */
  onClick(event) {
    const target = /** @type {HTMLElement} */ (event.target);
    const th = /** @type {HTMLElement|null} */ (target.closest(".tp-th"));
    if (th) {
      if (th.dataset.sortable) this.sortBy(/** @type {string} */ (th.dataset.col));
      return;
    }
    const rowEl = target.closest('[role="row"][data-path]');
    if (!rowEl) return;
    const path = /** @type {string} */ (rowEl.getAttribute("data-path"));
    this.scroller.focus({ preventScroll: true });
    if (target.closest('[data-testid="caret"]')) {
      this.ctx.change({ expanded: toggleExpanded(this.ctx.state().expandedList, path), selected: path });
    } else {
      this.ctx.change({ selected: path });
    }
  }

  /** @param {KeyboardEvent} event */
  onKeydown(event) {
    const { ctx, viewed, view, scroller } = this;
    const th = /** @type {HTMLElement|null} */ (/** @type {HTMLElement} */ (event.target).closest(".tp-th"));
    if (th) {
      if ((event.key === "Enter" || event.key === " ") && th.dataset.sortable) {
        event.preventDefault();
        this.sortBy(/** @type {string} */ (th.dataset.col));
      }
      return;
    }
    if (event.target !== scroller) return;
    const now = ctx.state();
    const current = rowOfPath(viewed.table, now.selected);
    if (event.key === "Enter" || event.key === " ") {
      if (current >= 0 && view.hasKids[current] && current !== viewed.root) {
        event.preventDefault();
        ctx.change({ expanded: toggleExpanded(now.expandedList, viewed.table.path[current]) });
      }
      return;
    }
    const page = Math.max(1, Math.floor(scroller.clientHeight / ROW_HEIGHT) - 2);
    const action = keyAction(viewed.table, view, now.expanded, viewed.root, current, event.key, page);
    if (!action) return;
    event.preventDefault();
    /** @type {Record<string, any>} */
    const values = {};
    if (action.toggle !== undefined) values.expanded = toggleExpanded(now.expandedList, action.toggle);
    if (action.select !== undefined) {
      values.selected = viewed.table.path[action.select];
      this.reveal(view.rows.indexOf(action.select));
    }
    if (Object.keys(values).length) ctx.change(values);
  }

  /** @param {FullState} st @param {Viewed} viewed @param {Visible} vis */
  update(st, viewed, vis) {
    const tableChanged = viewed.table !== this.viewed.table || viewed.root !== this.viewed.root;
    this.st = st;
    this.viewed = viewed;
    this.view = vis;
    this.setColumns();
    if (tableChanged) this.measured = [];
    const need = nodeNeed(this.ctx.root, viewed.table, viewed.root, vis.rows, this.nameWidths);
    if (!this.measured.length || Math.abs(need - this.nodeNeed) > 1) {
      this.nodeNeed = need;
      this.layout();
    }
    const table = viewed.table;
    this.selectedRow = rowOfPath(table, st.selected);
    this.version++;
    for (const col of this.numeric) {
      col.values = col.spread && viewed.folded ? viewed.folded[col.spread][col.key] : shownValues(table, col.key, vis.shown);
      col.base = col.of ? table.num[col.of][viewed.root] : NaN;
    }
    this.markSort(st);
    const { scroller } = this;
    scroller.setAttribute("aria-rowcount", String(vis.rows.length));
    if (this.selectedRow >= 0 && vis.rows.includes(this.selectedRow)) scroller.setAttribute("aria-activedescendant", `tp-row-${this.selectedRow}`);
    else scroller.removeAttribute("aria-activedescendant");
    this.sizer.style.height = vis.rows.length * ROW_HEIGHT + "px";
    if (tableChanged) scroller.scrollTop = 0;
    // A row selected elsewhere (the Flame, the Top view, Python) is scrolled into view once.
    if (st.selected !== this.revealed) {
      this.revealed = st.selected;
      this.reveal(vis.rows.indexOf(this.selectedRow));
    }
    this.paint();
  }

  /** The sorted column's header says which way it sorts. @param {FullState} st */
  markSort(st) {
    const active = resolveSort(this.data.vocab, st.sort_by);
    for (const th of this.head.children) {
      const t = /** @type {HTMLElement} */ (th);
      if (t.dataset.col === active && t.dataset.sortable) t.setAttribute("aria-sort", st.ascending ? "ascending" : "descending");
      else t.removeAttribute("aria-sort");
    }
  }

  resized() {
    if (!this.nodeNeed) this.nodeNeed = nodeNeed(this.ctx.root, this.viewed.table, this.viewed.root, this.view.rows, this.nameWidths);
    this.layout();
    this.paint();
  }

  destroy() {
    this.resize?.disconnect();
    this.scroller.removeEventListener("scroll", this.paint);
  }
}

/** @param {Context} ctx @returns {ViewFace} */
export function create(ctx) {
  return new TableView(ctx);
}

/** The shared controls the table acts on: all of them. @type {import("../types.js").ControlUse} */
export const controls = { threshold: true, ops: true, search: true, sort: true, expand: true, rowCount: true, hiddenNote: true };

/** The view rows open in when another view shows one ("show in the table"). */
export const listsRows = true;
