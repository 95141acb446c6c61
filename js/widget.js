// @ts-check
// torchprof's front end: the layer tree as an interactive, virtualised tree table.
//
// One ES module with no dependencies and no bundler; anywidget loads it in Jupyter and
// `prof.to_html()` inlines it in a report page. Everything above `render` is pure (no DOM,
// no globals touched at import time) and exported, so `node --test tests/js/` checks the
// rules without a browser. The view rules mirror src/torchprof/_views/rows.py exactly; a
// pytest cross-check runs both on the same trees and states.
//
// The module keeps no vocabulary of its own: column specs, kind codes, sort aliases and the
// view-state keys arrive in the payload (`vocab`, from src/torchprof/_vocab.py).
//
// Text from the profile (module names, region labels, shapes) only ever reaches the DOM
// through textContent / setAttribute.

// -- types ---------------------------------------------------------------------------------

/**
 * One column of the registry (src/torchprof/_vocab.py `Column`).
 * @typedef {object} ColumnSpec
 * @property {string} name
 * @property {string} label
 * @property {string} unit "time" | "bytes" | "count" | "int" | "text" | "bool"
 * @property {string} about
 * @property {string} dtype "float" | "int" | "str" | "bool"
 * @property {string} rollup "total" | "self" | "count" | "none"
 * @property {string} [family] "cpu" | "cuda" | "bwd" | "mem"
 * @property {string} [percent_of]
 * @property {string} [layer_alt]
 * @property {boolean} sortable
 * @property {boolean} threshold
 * @property {string} [needs]
 * @property {boolean} [delta] a change between two runs: coloured faster/slower
 */

/**
 * What the payload says of the registry (src/torchprof/_views/payload.py `vocabulary`).
 * @typedef {object} Vocab
 * @property {ColumnSpec[]} columns every prof.df column, in order
 * @property {string[]} view_columns the table's columns, in order
 * @property {string[]} kinds kind names by code
 * @property {string[]} layer_kinds kinds kept when operator rows are hidden
 * @property {Record<string, string>} sort_aliases
 * @property {{name: string, default: any}[]} state
 * @property {{kind: number, backward: number, absolute_path: number, name_in_tail: number}} flags
 * @property {string} csv_formula_start first characters that make a spreadsheet run a cell
 */

/**
 * A payload as Python writes it (JSON form; the binary form points into buffers instead).
 * @typedef {object} Payload
 * @property {string} format
 * @property {number} n
 * @property {any} parent
 * @property {any} flags
 * @property {string[]} tail
 * @property {[number, string][]} names
 * @property {Record<string, (string|null)[]>} text the other text columns (type, module, input_shapes, source); [] = all null
 * @property {Record<string, any>} num
 * @property {Vocab} vocab
 * @property {Record<string, any>} [summary]
 * @property {[string, string, string][]} [summary_items]
 * @property {any[]} [steps]
 * @property {any} [memory] the Memory view's data (_views/memory.py memory_payload)
 */

/**
 * The decoded table every function below works on.
 * @typedef {object} Data
 * @property {number} n
 * @property {Int32Array} parent
 * @property {Uint8Array} kind
 * @property {Uint8Array} backward
 * @property {Int32Array} depth
 * @property {string[]} path
 * @property {string[]} name
 * @property {Record<string, Float64Array>} num
 * @property {Record<string, boolean>} allNaN
 * @property {Int32Array} childStart
 * @property {Int32Array} childIndex
 * @property {Record<string, (string|null)[]>} text text columns by name (all null where the payload sent none)
 * @property {(string|null)[]} type
 * @property {(string|null)[]} shapes
 * @property {(string|null)[]} source
 * @property {Vocab} vocab
 * @property {Record<string, ColumnSpec>} spec columns by name
 * @property {Set<number>} layerCodes kind codes of layers (modules and regions)
 * @property {Record<string, any>} summary
 * @property {[string, string, string][]} summaryItems
 * @property {any[]} steps
 * @property {Record<string, (string|null)[]>} lower lower-cased text columns, made on demand
 * @property {MemoryData|null} memory the Memory view's data (null without memory=True)
 */

/**
 * The view state (the widget's synced traits); `expanded` as a Set of paths, null = all open.
 * @typedef {object} ViewState
 * @property {number} [min_pct]
 * @property {string|string[]|null} [sort_by]
 * @property {boolean} [ascending]
 * @property {boolean} [show_ops]
 * @property {string|string[]} [search]
 * @property {Set<string>|null} [expanded]
 * @property {number|null} [max_depth]
 */

// -- the payload ---------------------------------------------------------------------------

export const FORMAT = "torchprof-1";
const MAGIC = [0x54, 0x50, 0x46, 0x31]; // "TPF1": an uncompressed binary payload

/**
 * Inflates a zlib stream (what Python's zlib.compress writes) with the platform's codec.
 * @param {Uint8Array} bytes
 */
export async function inflate(bytes) {
  const stream = new Blob([/** @type {BlobPart} */ (bytes)]).stream().pipeThrough(new DecompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

/** @param {any} src @returns {Uint8Array|null} */
function asBytes(src) {
  if (src instanceof Uint8Array) return src;
  if (src instanceof ArrayBuffer) return new Uint8Array(src);
  if (ArrayBuffer.isView(src)) return new Uint8Array(src.buffer, src.byteOffset, src.byteLength);
  return null;
}

/** @param {Uint8Array} bytes */
function isRaw(bytes) {
  return MAGIC.every((b, k) => bytes[k] === b);
}

/**
 * The payload as anywidget (DataView of zlib bytes) or the report page (a JSON object) hands
 * it over, decoded into the in-memory table.
 * @param {any} src
 * @returns {Promise<Data>}
 */
export async function loadPayload(src) {
  const bytes = asBytes(src);
  if (bytes === null) return decodePayload(src);
  return decodePayload(isRaw(bytes) ? bytes : await inflate(bytes));
}

/**
 * Decodes a payload into column arrays, once, so every later update is plain array work.
 *
 * Accepts the binary form ("TPF1", a uint32 header length, a JSON header, then 8-byte
 * aligned little-endian buffers the header points into) or the same header as a plain
 * object whose arrays are inline (the HTML report). Paths arrive as tails of the parent's
 * path and names as tails of the path, which is what keeps the payload small.
 * @param {any} src
 * @returns {Data}
 */
export function decodePayload(src) {
  const bytes = asBytes(src);
  /** @type {Payload} */
  let spec = src;
  let base = 0;
  if (bytes !== null) {
    if (!isRaw(bytes)) throw new Error("not a torchprof payload");
    const headerLength = new DataView(bytes.buffer, bytes.byteOffset + 4, 4).getUint32(0, true);
    spec = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength)));
    base = Math.ceil((8 + headerLength) / 8) * 8;
  }
  if (!spec || spec.format !== FORMAT || !spec.vocab) throw new Error("not a torchprof payload");
  const vocab = spec.vocab;
  const n = spec.n;
  /** @template T @param {any} ref @param {any} Type @returns {T} */
  const array = (ref, Type) => {
    if (Array.isArray(ref)) return Type.from(ref, (/** @type {any} */ v) => (v === null ? NaN : v));
    const offset = /** @type {Uint8Array} */ (bytes).byteOffset + base + ref.offset;
    const buffer = /** @type {Uint8Array} */ (bytes).buffer;
    if (offset % Type.BYTES_PER_ELEMENT === 0) return new Type(buffer, offset, ref.length);
    return new Type(buffer.slice(offset, offset + ref.length * Type.BYTES_PER_ELEMENT));
  };
  /** @type {Int32Array} */
  const parent = array(spec.parent, Int32Array);
  /** @type {Uint8Array} */
  const flags = array(spec.flags, Uint8Array);
  /** @type {Record<string, Float64Array>} */
  const num = {};
  /** @type {Record<string, boolean>} */
  const allNaN = {};
  for (const c of numberColumns(vocab)) {
    const ref = spec.num[c];
    if (ref === undefined || (ref && typeof ref === "object" && "const" in ref)) {
      const v = ref === undefined || ref.const === null ? NaN : ref.const;
      num[c] = new Float64Array(n).fill(v);
      allNaN[c] = Number.isNaN(v);
    } else {
      num[c] = array(ref, Float64Array);
      allNaN[c] = num[c].every(Number.isNaN);
    }
  }
  const F = vocab.flags;
  const tails = spec.tail;
  const path = new Array(n);
  const name = new Array(n);
  const kind = new Uint8Array(n);
  const backward = new Uint8Array(n);
  const depth = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    const f = flags[i];
    const p = parent[i];
    kind[i] = f & F.kind;
    backward[i] = f & F.backward ? 1 : 0;
    path[i] = p < 0 || f & F.absolute_path ? tails[i] : path[p] + tails[i];
    name[i] = f & F.name_in_tail ? tails[i].slice(1) : null;
    depth[i] = p < 0 ? 0 : depth[p] + 1;
  }
  for (const [i, label] of spec.names) name[i] = label;
  /** @type {Record<string, (string|null)[]>} */
  const text = {};
  for (const c of vocab.columns) {
    if (c.dtype !== "str" || ["path", "name", "kind", "parent"].includes(c.name)) continue;
    const values = spec.text?.[c.name];
    text[c.name] = values && values.length ? values : new Array(n).fill(null);
  }
  // Children as one flat list per parent, in pre-order (CSR): childStart[i]..childStart[i+1].
  const childStart = new Int32Array(n + 1);
  for (let i = 1; i < n; i++) childStart[parent[i] + 1]++;
  for (let i = 0; i < n; i++) childStart[i + 1] += childStart[i];
  const fill = childStart.slice(0, n);
  const childIndex = new Int32Array(Math.max(0, n - 1));
  for (let i = 1; i < n; i++) childIndex[fill[parent[i]]++] = i;
  return {
    n, parent, kind, backward, depth, path, name, num, allNaN, childStart, childIndex,
    text,
    type: text.type, shapes: text.input_shapes, source: text.source,
    vocab,
    spec: Object.fromEntries(vocab.columns.map((c) => [c.name, c])),
    layerCodes: new Set(vocab.layer_kinds.map((k) => vocab.kinds.indexOf(k))),
    summary: spec.summary || {}, summaryItems: spec.summary_items || [], steps: spec.steps || [],
    memory: spec.memory || null,
    lower: {},
  };
}

/**
 * Numeric columns the payload carries (depth is derived from the parents).
 * @param {Vocab} vocab
 */
export function numberColumns(vocab) {
  return vocab.columns.filter((c) => (c.dtype === "float" || c.dtype === "int") && c.name !== "depth").map((c) => c.name);
}

// -- the view rules (mirror of _views/rows.py visible_rows) ------------------------------------

/**
 * A column name for a sort key (torch-style aliases accepted; unknown keys sort by cpu_us).
 * @param {Vocab} vocab
 * @param {string|string[]|null|undefined} key
 */
export function resolveSort(vocab, key) {
  if (Array.isArray(key)) key = key[0];
  if (!key) return "cpu_us";
  key = vocab.sort_aliases[key] || key;
  return vocab.columns.some((c) => c.name === key && c.sortable) ? key : "cpu_us";
}

/**
 * With op rows hidden, a layer's self time includes its ops: the "Self" columns switch.
 * @param {Data} data @param {string} column @param {boolean} showOps
 */
export function valueColumn(data, column, showOps) {
  return showOps ? column : data.spec[column]?.layer_alt || column;
}

/**
 * What the min-percent threshold compares: the sort column when it can be one, else CPU total.
 * @param {Data} data @param {string} key
 */
export function thresholdColumn(data, key) {
  return data.spec[key]?.threshold ? key : "cpu_us";
}

/** @param {Data} data @param {string} key */
function isTextColumn(data, key) {
  const spec = data.spec[key];
  return spec !== undefined && spec.dtype !== "float" && spec.dtype !== "int";
}

/**
 * Values of any sortable column, numeric as Float64Array, text as an array (null = missing).
 * @param {Data} data @param {string} key
 * @returns {Float64Array|(string|null)[]}
 */
export function column(data, key) {
  if (key in data.num) return data.num[key];
  if (key === "depth") return Float64Array.from(data.depth);
  if (key === "name") return data.name;
  if (key === "path") return data.path;
  if (key in data.text) return data.text[key];
  if (key === "kind") return Array.from(data.kind, (k) => data.vocab.kinds[k]);
  throw new Error(`unknown column ${key}`);
}

/** @param {Data} data @param {string} key */
function lowered(data, key) {
  let out = data.lower[key];
  if (!out) {
    const values = column(data, key);
    out = data.lower[key] = Array.from(/** @type {ArrayLike<any>} */ (values), (v) => (v === null || v === undefined ? null : String(v).toLowerCase()));
  }
  return out;
}

const REGEX_SYNTAX = /[\\^$.*+?()[\]{}|/]/g;
const CLASS_SPECIAL = /[\\\]\-^[]/g;

/**
 * Python's fnmatch.translate for one lower-cased pattern: `*`, `?`, `[seq]`, `[!seq]`, the
 * rest literal, anchored at both ends, `.` matching newlines too. Ranges whose ends are out
 * of order are dropped the way fnmatch drops them.
 * @param {string} pat
 */
export function globToRegExp(pat) {
  let out = "";
  let star = false;
  let i = 0;
  const n = pat.length;
  while (i < n) {
    const c = pat[i++];
    if (c === "*") {
      if (!star) out += ".*";
      star = true;
      continue;
    }
    star = false;
    if (c === "?") {
      out += ".";
    } else if (c === "[") {
      let j = i;
      if (j < n && pat[j] === "!") j++;
      if (j < n && pat[j] === "]") j++;
      while (j < n && pat[j] !== "]") j++;
      if (j >= n) {
        out += "\\[";
        continue;
      }
      let stuff;
      if (!pat.slice(i, j).includes("-")) {
        stuff = pat.slice(i, j).replace(CLASS_SPECIAL, "\\$&");
      } else {
        const chunks = [];
        let k = pat[i] === "!" ? i + 2 : i + 1;
        let from = i;
        for (;;) {
          k = pat.indexOf("-", k);
          if (k < 0 || k >= j) break;
          chunks.push(pat.slice(from, k));
          from = k + 1;
          k += 3;
        }
        const last = pat.slice(from, j);
        if (last) chunks.push(last);
        else chunks[chunks.length - 1] += "-";
        for (let m = chunks.length - 1; m > 0; m--) {
          if (/** @type {string} */ (chunks[m - 1].at(-1)) > chunks[m][0]) {
            chunks[m - 1] = chunks[m - 1].slice(0, -1) + chunks[m].slice(1);
            chunks.splice(m, 1);
          }
        }
        stuff = chunks.map((s) => s.replace(CLASS_SPECIAL, "\\$&")).join("-");
      }
      i = j + 1;
      if (!stuff) out += "(?!)";
      else if (stuff === "!") out += ".";
      else out += "[" + (stuff[0] === "!" ? "^" + stuff.slice(1) : stuff) + "]";
    } else {
      out += c.replace(REGEX_SYNTAX, "\\$&");
    }
  }
  return new RegExp("^(?:" + out + ")$", "su");
}

/**
 * The search rule of _views/rows.py: a pattern with `*?[` is a glob against the whole
 * lower-cased text or its last dotted part, anything else a substring. Several patterns = any.
 * Returns null for an empty search, else a test on ALREADY lower-cased text.
 * @param {string|string[]|undefined} search
 * @returns {((t: string) => boolean)|null}
 */
export function makeMatcher(search) {
  let patterns = search;
  if (typeof search === "string") patterns = search.trim() ? [search] : [];
  if (!patterns || patterns.length === 0) return null;
  const tests = /** @type {string[]} */ (patterns).map((pattern) => {
    const p = pattern.toLowerCase();
    if (!/[*?[]/.test(p)) return (/** @type {string} */ t) => t.includes(p);
    /** @type {RegExp} */
    let re;
    try {
      re = globToRegExp(p);
    } catch {
      return (/** @type {string} */ t) => t.includes(p);
    }
    return (/** @type {string} */ t) => re.test(t) || re.test(t.slice(t.lastIndexOf(".") + 1));
  });
  return (t) => tests.some((test) => test(t));
}

/**
 * The selection half of visibleRows: 1 for rows the filters keep (kind, threshold, search)
 * and for their ancestors, before expansion and sorting. O(n).
 * @param {Data} data @param {ViewState} state
 */
export function selectRows(data, state) {
  const { n, parent, kind, depth } = data;
  const shown = new Uint8Array(n);
  if (n === 0) return shown;
  const key = resolveSort(data.vocab, state.sort_by);
  const showOps = !!state.show_ops;
  const values = /** @type {Float64Array} */ (column(data, valueColumn(data, thresholdColumn(data, key), showOps)));
  const base = values[0];
  const minPct = Number(state.min_pct) || 0;
  const usePct = minPct > 0 && !Number.isNaN(base) && base !== 0;
  const match = makeMatcher(state.search);
  const names = match ? lowered(data, "name") : null;
  const paths = match ? lowered(data, "path") : null;
  const maxDepth = state.max_depth ?? null;
  const layers = data.layerCodes;

  shown[0] = 1;
  for (let i = 1; i < n; i++) {
    if (!showOps && !layers.has(kind[i])) continue;
    if (maxDepth !== null && depth[i] > maxDepth) continue;
    if (usePct) {
      const v = values[i];
      if (Number.isNaN(v) || (100 * Math.abs(v)) / Math.abs(base) < minPct) continue;
    }
    if (match && !(match(/** @type {string} */ (names?.[i])) || match(/** @type {string} */ (paths?.[i])))) continue;
    shown[i] = 1;
  }
  // Ancestors of shown rows: parents precede children in pre-order, so one backward sweep.
  for (let i = n - 1; i > 0; i--) if (shown[i]) shown[parent[i]] = 1;
  return shown;
}

/**
 * Rows to show, in display order: exactly _views/rows.py visible_rows.
 *
 * A row is selected when its kind is shown (layers, plus ops and kernels with show_ops), its
 * value of the threshold metric is at least min_pct percent of the root's, and it matches the
 * search; ancestors of selected rows are shown too. Collapsed rows (not in `expanded`, a Set
 * of paths; null = all expanded) hide their children. Siblings are sorted by sort_by, stable,
 * missing values last. O(n) plus the sibling sorts.
 *
 * Returns {rows, hasKids}: hasKids[i] = 1 when row i has children under the current filters
 * (whether or not it is expanded), i.e. when it gets a caret.
 * @param {Data} data @param {ViewState} state
 * @returns {{rows: number[], hasKids: Uint8Array}}
 */
export function visibleRows(data, state) {
  const { n } = data;
  const hasKids = new Uint8Array(n);
  if (n === 0) return { rows: [], hasKids };
  const key = resolveSort(data.vocab, state.sort_by);
  const showOps = !!state.show_ops;
  const ascending = !!state.ascending;
  const expanded = state.expanded ?? null;
  const shown = selectRows(data, state);
  const { childStart, childIndex } = data;

  const sortKey = valueColumn(data, key, showOps);
  /** @type {(a: number, b: number) => number} */
  let compare;
  if (isTextColumn(data, key)) {
    const text = lowered(data, sortKey);
    const sign = ascending ? 1 : -1;
    compare = (a, b) => {
      const ta = text[a];
      const tb = text[b];
      if (ta === null || tb === null) return ta === tb ? 0 : ta === null ? 1 : -1;
      return ta < tb ? -sign : ta > tb ? sign : 0;
    };
  } else {
    const order = /** @type {Float64Array} */ (column(data, sortKey));
    compare = (a, b) => {
      const va = order[a];
      const vb = order[b];
      const ma = Number.isNaN(va);
      const mb = Number.isNaN(vb);
      if (ma || mb) return ma === mb ? 0 : ma ? 1 : -1;
      return ascending ? va - vb : vb - va;
    };
  }

  const rows = [];
  const stack = [0];
  while (stack.length) {
    const i = /** @type {number} */ (stack.pop());
    rows.push(i);
    const kids = [];
    for (let c = childStart[i]; c < childStart[i + 1]; c++) {
      const k = childIndex[c];
      if (shown[k]) kids.push(k);
    }
    if (kids.length === 0) continue;
    hasKids[i] = 1;
    if (expanded !== null && i !== 0 && !expanded.has(data.path[i])) continue;
    if (kids.length > 1) kids.sort(compare);
    for (let k = kids.length - 1; k >= 0; k--) stack.push(kids[k]);
  }
  return { rows, hasKids };
}

// -- expansion helpers (what clicks do to the `expanded` list) --------------------------------

/**
 * Paths expanded by default: every depth-1 layer with children, so rows down to depth 2 show;
 * with ops shown also the depth-2 layers that hold only ops. Same as _views/state.py
 * default_expanded.
 * @param {Data} data @param {boolean} showOps
 */
export function defaultExpanded(data, showOps) {
  const { n, depth } = data;
  const out = [];
  for (let i = 1; i < n; i++) {
    if (depth[i] === 1 && data.layerCodes.has(data.kind[i]) && data.childStart[i + 1] > data.childStart[i]) out.push(data.path[i]);
    else if (showOps && depth[i] === 2 && isLeafLayer(data, i)) out.push(data.path[i]);
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
function withPaths(list, paths) {
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
  const open = [];
  for (let i = 1; i < data.n; i++) {
    const p = data.parent[i];
    if (shown[i] && p > 0 && shown[p] === 1) {
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

// -- numbers (mirror of _views/format.py) -------------------------------------------------------

/** @param {any} v */
function missing(v) {
  return v === null || v === undefined || Number.isNaN(v);
}

/**
 * Python's f"{x:.{digits}f}": exact decimal rounding of the double, ties to even. JS toFixed
 * rounds exact ties away from zero (0.125 -> "0.13"; Python gives "0.12").
 * @param {number} x @param {number} digits
 */
export function pyFixed(x, digits) {
  const sign = x < 0 || Object.is(x, -0) ? "-" : "";
  const a = Math.abs(x);
  let s = a.toFixed(digits);
  const exact = a.toFixed(Math.min(100, digits + 30));
  const dot = exact.indexOf(".");
  const rest = exact.slice(dot + 1 + digits);
  if (/^50*$/.test(rest)) {
    const truncated = exact.slice(0, digits ? dot + 1 + digits : dot);
    if (Number(truncated.at(-1)) % 2 === 0) s = truncated;
  }
  return sign + s;
}

/** @param {number} v */
function sig(v) {
  const a = Math.abs(v);
  if (a >= 100) return pyFixed(v, 0);
  if (a >= 10) return pyFixed(v, 1);
  return pyFixed(v, 2);
}

/** A duration in µs: "812µs", "1.23ms", "4.56s"; "-" when missing. */
export function formatTime(v) {
  if (missing(v)) return "-";
  const a = Math.abs(v);
  if (a >= 1e6) return sig(v / 1e6) + "s";
  if (a >= 1e3) return sig(v / 1e3) + "ms";
  return sig(v) + "µs";
}

/** Bytes, 1024-based like torch's tables: "512 B", "1.50 KB", "2.00 GB". */
export function formatBytes(v) {
  if (missing(v)) return "-";
  const a = Math.abs(v);
  for (const [unit, scale] of /** @type {[string, number][]} */ ([["GB", 1024 ** 3], ["MB", 1024 ** 2], ["KB", 1024]])) {
    if (a >= scale) return `${sig(v / scale)} ${unit}`;
  }
  return `${pyFixed(v, 0)} B`;
}

/** A count, 1000-based: "950", "1.82k", "3.64G". */
export function formatCount(v) {
  if (missing(v)) return "-";
  const a = Math.abs(v);
  for (const [unit, scale] of /** @type {[string, number][]} */ ([["T", 1e12], ["G", 1e9], ["M", 1e6], ["k", 1e3]])) {
    if (a >= scale) return sig(v / scale) + unit;
  }
  return pyFixed(v, 0);
}

export function formatRate(v) {
  return missing(v) ? "-" : formatCount(v) + "FLOP/s";
}

/** "45%", "4.5%", "" when either side is missing or the whole is 0. */
export function formatPercent(part, whole) {
  if (missing(part) || missing(whole) || !whole) return "";
  const pct = (100 * part) / whole;
  return (Math.abs(pct) >= 10 || pct === 0 ? pyFixed(pct, 0) : pyFixed(pct, 1)) + "%";
}

/**
 * A number as every view writes it, by the column's unit (_views/format.py value_text).
 * @param {string} unit @param {number} v
 */
export function formatValue(unit, v) {
  if (unit === "time") return formatTime(v);
  if (unit === "bytes") return formatBytes(v);
  if (unit === "count") return formatCount(v);
  return missing(v) ? "-" : String(v);
}

// -- CSV ------------------------------------------------------------------------------------------

/**
 * One CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180).
 * @param {any} text
 */
export function csvField(text) {
  const s = String(text);
  return /[",\r\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
}

/**
 * A text cell as a spreadsheet cannot run it: behind a `'` when it starts like a formula (the
 * vocabulary's csv_formula_start: = + - @ tab CR, OWASP's advice), exactly _views/frame.py
 * csv_text. Numbers are never passed here: -1.5 stays a number.
 * @param {Vocab} vocab @param {string} text
 */
export function csvText(vocab, text) {
  return text.length > 0 && vocab.csv_formula_start.includes(text[0]) ? "'" + text : text;
}

/** @param {Data} data @param {string} col @param {number} i @returns {string} */
function csvValue(data, col, i) {
  switch (col) {
    case "path": return data.path[i];
    case "name": return data.name[i];
    case "kind": return data.vocab.kinds[data.kind[i]];
    case "parent": return data.parent[i] >= 0 ? data.path[data.parent[i]] : "";
    case "depth": return String(data.depth[i]);
    case "is_backward": return data.backward[i] ? "True" : "False";
    default: {
      if (col in data.text) return data.text[col][i] ?? "";
      const v = data.num[col] ? data.num[col][i] : NaN;
      return Number.isNaN(v) ? "" : String(v);
    }
  }
}

/**
 * The given rows as CSV with the DataFrame's columns (what `w.view_df.to_csv(index=False)` holds).
 * @param {Data} data @param {number[]} rows
 */
export function toCSV(data, rows) {
  const cols = data.vocab.columns.map((c) => c.name);
  const text = new Set(data.vocab.columns.filter((c) => c.dtype === "str").map((c) => c.name));
  const cell = (/** @type {string} */ c, /** @type {number} */ i) => {
    const v = csvValue(data, c, i);
    return csvField(text.has(c) ? csvText(data.vocab, v) : v);
  };
  const lines = [cols.map(csvField).join(",")];
  for (const i of rows) lines.push(cols.map((c) => cell(c, i)).join(","));
  return lines.join("\n") + "\n";
}

// -- a model for pages without a kernel ---------------------------------------------------------

/**
 * The slice of anywidget's model API the view uses.
 * @typedef {object} Model
 * @property {(key: string) => any} get
 * @property {(key: string, value: any) => void} set
 * @property {(event: string, cb: () => void) => void} on
 * @property {(event?: string, cb?: () => void) => void} off
 * @property {() => void} save_changes
 */

/**
 * That model kept in the page (the HTML report).
 * @param {Record<string, any>} initial
 * @returns {Model}
 */
export function createModel(initial) {
  /** @type {Record<string, any>} */
  const state = { ...initial };
  /** @type {Map<string, Set<() => void>>} */
  const listeners = new Map();
  const emit = (/** @type {string} */ event) => {
    for (const cb of [...(listeners.get(event) || [])]) cb();
  };
  return {
    get: (key) => state[key],
    set(key, value) {
      const old = state[key];
      state[key] = value;
      if (old !== value) emit("change:" + key);
    },
    on(event, cb) {
      if (!listeners.has(event)) listeners.set(event, new Set());
      listeners.get(event)?.add(cb);
    },
    off(event, cb) {
      if (event === undefined) listeners.clear();
      else if (cb === undefined) listeners.delete(event);
      else listeners.get(event)?.delete(cb);
    },
    save_changes() {
      emit("save");
    },
  };
}

// -- columns -------------------------------------------------------------------------------------

/**
 * A column of the table as the view draws it.
 * @typedef {object} ViewColumn
 * @property {string} key the registry column (what sorting uses)
 * @property {string} label
 * @property {string} title
 * @property {string} type "name" | "time" | "bytes" | "count" | "int"
 * @property {string} [of] the column whose root value is 100%
 * @property {string} [family]
 * @property {string} [self] for totals: the self column shown on hover
 * @property {Float64Array} [values] filled on each update
 * @property {number} [base]
 */

/**
 * Does the profile have something to show in this column (not all missing, not all zero)?
 * @param {Data} data @param {string} name
 */
export function hasData(data, name) {
  if (name === "calls") return data.n > 0;
  const values = data.num[name];
  if (!values || data.allNaN[name]) return false;
  for (let i = 1; i < values.length; i++) if (!Number.isNaN(values[i]) && values[i] !== 0) return true;
  return false;
}

/**
 * The table's columns for this profile: the registry's view columns that have data (as
 * _views/cells.py view_columns), after the Node column.
 * @param {Data} data
 * @returns {ViewColumn[]}
 */
export function columnsFor(data) {
  /** @type {ViewColumn[]} */
  const cols = [{ key: "name", label: "Node", type: "name", title: "Layer, region, op or kernel; hover for path, type and input shapes" }];
  const shown = new Set(data.vocab.view_columns.filter((c) => hasData(data, c)));
  for (const name of data.vocab.view_columns) {
    const spec = data.spec[name];
    if (!shown.has(name) || (spec.needs && !shown.has(spec.needs))) continue;
    const self = data.vocab.columns.find((c) => c.rollup === "self" && c.unit === spec.unit && c.name === "self_" + name);
    cols.push({ key: name, label: spec.label, type: spec.unit, title: spec.about, of: spec.percent_of, family: spec.family, self: self?.name });
  }
  return cols;
}

// -- the Memory view: pure geometry -----------------------------------------------------------
//
// A line of allocated bytes over the run (src/torchprof/_views/memory.py memory_payload) with
// the forward/backward/optimizer bands, the peak marked, the layer under the cursor named; a
// click selects that layer in the table. Everything here is plain arithmetic on arrays; the one
// function that touches the DOM is mountMemory below.

/**
 * One device's line as the payload sends it.
 * @typedef {object} MemorySeries
 * @property {string} name "cpu" | "cuda:0" | ...
 * @property {number[]} t µs since the run's first event
 * @property {number[]} v bytes allocated after each event
 * @property {number[]} row the layer row running then (what a click selects)
 * @property {{t: number, v: number, row: number, phase: string}} [peak]
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

/**
 * Paths to expand so that row `i` shows: its ancestors below the root.
 * @param {Data} data @param {number} i
 */
export function ancestorPaths(data, i) {
  const out = [];
  for (let p = data.parent[i]; p > 0; p = data.parent[p]) out.push(data.path[p]);
  return out.reverse();
}

// -- deltas (a comparison of two runs: torchprof.compare) -------------------------------------------

/**
 * The class of a delta cell: a time that went down is faster, one that went up slower; none for
 * no change or a missing value.
 * @param {number} v
 */
export function deltaClass(v) {
  return Number.isNaN(v) || v === 0 ? "" : v < 0 ? "tp-faster" : "tp-slower";
}

/** Colours a cell of a column the payload flags `delta`. @param {Element} cell @param {number} v */
function markDelta(cell, v) {
  cell.classList.add("tp-delta");
  cell.classList.remove("tp-faster", "tp-slower");
  const cls = deltaClass(v);
  if (cls) cell.classList.add(cls);
}

// -- the DOM ---------------------------------------------------------------------------------------

/**
 * @param {string} tag @param {Record<string, any>|null} attrs @param {...(Node|string)} children
 * @returns {HTMLElement}
 */
function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  node.append(...children);
  return node;
}

/** @param {HTMLElement} box @param {Data} data */
function buildSummary(box, data) {
  const s = data.summary;
  box.replaceChildren();
  box.append(h("span", { class: "tp-title", text: s.name ?? data.path[0] }));
  for (const [label, value, title] of data.summaryItems) {
    const warn = label === "stopped by" || label === "missing";
    box.append(h("span", { class: warn ? "tp-stat tp-warn" : "tp-stat", title }, h("span", { class: "tp-stat-k", text: label }), " ", h("b", { text: value })));
  }
  const steps = data.steps;
  if (steps.length) {
    // Per-step wall times as small bars, so drift between iterations is visible at a glance.
    const walls = steps.map((st) => st.wall_us).filter((v) => !missing(v));
    const max = Math.max(...walls, 0);
    const sorted = [...walls].sort((a, b) => a - b);
    const median = sorted.length ? sorted[Math.floor((sorted.length - 1) / 2)] : NaN;
    const bars = h("span", { class: "tp-steps-bars", "aria-hidden": "true" });
    for (const st of steps.slice(-64)) {
      const bar = h("span", { class: "tp-step-bar", title: `step ${st.step}: ${formatTime(st.wall_us)}` });
      bar.style.setProperty("--h", max > 0 ? String(Math.max(0.08, st.wall_us / max)) : "0");
      bars.append(bar);
    }
    const list = steps.slice(0, 8).map((st) => `#${st.step} ${formatTime(st.wall_us)}`).join(" · ") + (steps.length > 8 ? " · …" : "");
    box.append(h("span", { class: "tp-stat tp-steps", title: "Wall time of each ProfilerStep" },
      h("span", { class: "tp-stat-k", text: `${steps.length} steps` }), " ", bars, " ",
      h("span", { text: `${list}  (min ${formatTime(sorted[0])}, median ${formatTime(median)}, max ${formatTime(max)})` })));
  }
}

/** @param {ViewColumn[]} columns */
function rowTemplate(columns) {
  const row = h("div", { class: "tp-row", role: "row" });
  for (const col of columns) {
    if (col.type === "name") {
      row.append(h("div", { class: "tp-cell tp-name", role: "gridcell", "data-col": col.key },
        h("span", { class: "tp-caret-slot" }), h("span", { class: "tp-label" }), h("span", { class: "tp-tag" })));
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

/** @param {Data} data @param {number} i */
function nodeTitle(data, i) {
  const kind = data.vocab.kinds[data.kind[i]];
  const lines = [data.path[i], data.type[i] ? `${kind} · ${data.type[i]}` : kind];
  if (data.backward[i]) lines[1] += " · backward";
  if (data.shapes[i]) lines.push("input shapes: " + data.shapes[i]);
  if (data.source[i]) lines.push("called from: " + data.source[i]);
  return lines.join("\n");
}

/** @type {Intl.NumberFormat|null} */
let exactFormat = null; // one Intl formatter: creating one per call costs more than a row

/** @param {number} v @param {string} unit */
function exactTitle(v, unit) {
  exactFormat ??= new Intl.NumberFormat("en-US", { maximumFractionDigits: 3 });
  return missing(v) ? "" : `${exactFormat.format(v)} ${unit}`;
}

/**
 * The widget's elements, built once per payload.
 * @typedef {object} Parts
 * @property {HTMLElement} summary
 * @property {HTMLInputElement} slider
 * @property {HTMLElement} sliderValue
 * @property {HTMLInputElement} ops
 * @property {HTMLInputElement} search
 * @property {HTMLElement} rowCount
 * @property {HTMLElement} head
 * @property {HTMLElement} rowsBox
 * @property {HTMLElement} sizer
 * @property {HTMLElement} grid
 * @property {HTMLElement} scroller
 * @property {HTMLElement} memory the Memory view's box (hidden until its toggle is pressed)
 */

/**
 * Build: the summary, the controls, the header and the empty row container.
 * @param {HTMLElement} root @param {Data} data @param {ViewColumn[]} columns
 * @returns {Parts}
 */
function build(root, data, columns) {
  root.style.setProperty("--tp-row", ROW_HEIGHT + "px");
  root.style.setProperty("--tp-cols", `minmax(16rem, 3fr) repeat(${columns.length - 1}, minmax(5.75rem, 1fr))`);
  root.style.setProperty("--tp-min-width", `calc(16rem + ${columns.length - 1} * 5.75rem)`);
  const summary = h("div", { class: "tp-summary", "data-testid": "summary" });
  buildSummary(summary, data);
  const slider = /** @type {HTMLInputElement} */ (h("input", { type: "range", min: "0", max: "100", step: "0.1", "data-testid": "min-pct", "aria-label": "Minimum percent of the root" }));
  const sliderValue = h("output", { class: "tp-slider-value" });
  const ops = /** @type {HTMLInputElement} */ (h("input", { type: "checkbox", "data-testid": "show-ops" }));
  const search = /** @type {HTMLInputElement} */ (h("input", { type: "search", "data-testid": "search", placeholder: "Filter: name or path, glob * ?", "aria-label": "Filter rows by name or path", spellcheck: "false" }));
  const rowCount = h("span", { class: "tp-count", "data-testid": "row-count", "aria-live": "polite" });
  const controls = h("div", { class: "tp-controls" },
    h("label", { class: "tp-ctl", title: "Hide rows below this percent of the root's value of the sort column (CPU total for calls and params); ancestors of shown rows stay" }, "min ", slider, sliderValue),
    h("label", { class: "tp-ctl", title: "Show aten ops and kernels under their layers; Self columns then exclude them" }, ops, " aten ops"),
    search,
    h("button", { type: "button", class: "tp-btn", "data-testid": "expand-all", text: "Expand all" }),
    h("button", { type: "button", class: "tp-btn", "data-testid": "collapse-all", text: "Collapse all" }),
    h("button", { type: "button", class: "tp-btn", "data-testid": "export-csv", title: "Download the rows shown as CSV", text: "Export CSV" }),
    ...(data.memory ? [h("button", { type: "button", class: "tp-btn", "data-testid": "memory-toggle", "aria-pressed": "false",
      title: "Allocated memory over the run: the peak, the forward/backward/optimizer phases, the layer under the cursor", text: "Memory" })] : []),
    rowCount);
  const head = h("div", { class: "tp-head" });
  for (const col of columns) {
    head.append(h("div", { class: `tp-th${col.type === "name" ? " tp-name" : " tp-num"}`, role: "columnheader", "data-col": col.key, tabindex: "0", title: col.title + "\nClick to sort" },
      h("span", { text: col.label })));
  }
  const rowsBox = h("div", { class: "tp-rows", role: "rowgroup" });
  const sizer = h("div", { class: "tp-sizer" }, rowsBox);
  const grid = h("div", { class: "tp-grid", role: "treegrid", "aria-label": "Profile tree" }, head, sizer);
  const scroller = h("div", { class: "tp-scroller", "data-testid": "scroller" }, grid);
  const memory = h("div", { class: "tp-memory", "data-testid": "memory", hidden: true });
  root.replaceChildren(summary, controls, memory, scroller);
  return { summary, slider, sliderValue, ops, search, rowCount, head, rowsBox, sizer, grid, scroller, memory };
}

/**
 * Paint: fills the rows of the virtual window and keeps them when they stay in view. Rows in the
 * DOM are exactly the window's, in display order; scrolling by less than a window moves the rows
 * that left on one side over to the other, so only the moved ones are refilled.
 * @param {Parts} parts @param {Data} data @param {ViewColumn[]} columns
 */
function painter(parts, data, columns) {
  const { head, rowsBox, scroller } = parts;
  const template = rowTemplate(columns);
  const numeric = columns.filter((c) => c.type !== "name");
  const spare = /** @type {HTMLElement[]} */ ([]);
  let headHeight = 0;
  let windowStart = 0;
  /** @type {{rows: number[], hasKids: Uint8Array}} */
  let view = { rows: [], hasKids: new Uint8Array(0) };
  let expandedSet = /** @type {Set<string>} */ (new Set());
  let version = 0;
  let selected = -1; // the row a click in the Memory view selected

  /** @param {any} row @param {number} i */
  function fillRow(row, i) {
    if (row._i === i && row._v === version) return;
    row._i = i;
    row._v = version;
    const depth = data.depth[i];
    row.setAttribute("data-path", data.path[i]);
    row.setAttribute("aria-level", String(depth + 1));
    // Tag where backward work starts, not on every op inside it.
    const bwdRoot = data.backward[i] && !(data.parent[i] >= 0 && data.backward[data.parent[i]]);
    row.className = `tp-row tp-k-${data.vocab.kinds[data.kind[i]]}${bwdRoot ? " tp-backward" : ""}${i === 0 ? " tp-root" : ""}${i === selected ? " tp-selected" : ""}`;
    if (i === selected) row.setAttribute("aria-selected", "true");
    else row.removeAttribute("aria-selected");
    row.style.setProperty("--d", String(depth));
    const nameCell = row.firstElementChild;
    const slot = nameCell.firstElementChild;
    if (view.hasKids[i]) {
      const open = i === 0 || expandedSet.has(data.path[i]);
      row.setAttribute("aria-expanded", String(open));
      let caret = slot.firstElementChild;
      if (!caret) {
        caret = h("button", { type: "button", class: "tp-caret", "data-testid": "caret" });
        slot.append(caret);
      }
      caret.setAttribute("aria-label", (open ? "Collapse " : "Expand ") + data.name[i]);
      caret.disabled = i === 0;
    } else {
      row.removeAttribute("aria-expanded");
      slot.replaceChildren();
    }
    const label = slot.nextElementSibling;
    label.textContent = data.name[i];
    // The tag is drawn from an attribute (CSS attr()), so the cell's text is the name alone.
    const isModule = data.vocab.kinds[data.kind[i]] === "module";
    const tag = isModule && data.type[i] ? data.type[i] : bwdRoot ? "bwd" : "";
    label.nextElementSibling.setAttribute("data-tag", tag);
    nameCell.title = nodeTitle(data, i);
    let cell = nameCell.nextElementSibling;
    for (const col of numeric) {
      const v = /** @type {Float64Array} */ (col.values)[i];
      const value = col.type === "time" ? cell.children[1] : cell.firstElementChild;
      const empty = Number.isNaN(v) || (v === 0 && col.type !== "int");
      if (col.type === "time") {
        const base = /** @type {number} */ (col.base);
        const pct = empty ? 0 : (100 * v) / base;
        value.textContent = empty ? "" : formatTime(v);
        cell.children[2].textContent = empty ? "" : formatPercent(v, base);
        cell.firstElementChild.style.width = Number.isFinite(pct) ? Math.max(0, Math.min(100, pct)) + "%" : "0";
        cell.title = empty ? "" : exactTitle(v, "µs");
      } else if (col.type === "bytes") {
        value.textContent = empty ? "" : formatBytes(v);
        const own = col.self ? data.num[col.self][i] : NaN;
        cell.title = empty ? "" : `${exactTitle(v, "bytes")}\nself: ${formatBytes(own)}`;
      } else if (col.type === "count") {
        value.textContent = empty ? "" : formatCount(v);
        cell.title = empty ? "" : col.key === "flops" ? `${exactTitle(v, "FLOPs")}\nMACs: ${formatCount(data.num.macs[i])}` : exactTitle(v, col.key);
      } else {
        value.textContent = Number.isNaN(v) ? "" : String(v);
      }
      if (data.spec[col.key].delta) markDelta(cell, v);
      cell = cell.nextElementSibling;
    }
  }

  function paint() {
    if (!headHeight) headHeight = head.offsetHeight;
    const viewport = scroller.clientHeight > 0 ? scroller.clientHeight - headHeight : 20 * ROW_HEIGHT;
    const win = virtualWindow(scroller.scrollTop - headHeight, viewport, ROW_HEIGHT, view.rows.length);
    const count = win.end - win.start;
    let have = rowsBox.childElementCount;
    const shift = win.start - windowStart;
    if (shift > 0 && shift < have) for (let k = 0; k < shift; k++) rowsBox.append(/** @type {Element} */ (rowsBox.firstElementChild));
    else if (shift < 0 && -shift < have) for (let k = 0; k < -shift; k++) rowsBox.prepend(/** @type {Element} */ (rowsBox.lastElementChild));
    for (; have > count; have--) spare.push(/** @type {HTMLElement} */ (rowsBox.removeChild(/** @type {Element} */ (rowsBox.lastElementChild))));
    for (; have < count; have++) rowsBox.append(spare.pop() || /** @type {Element} */ (template.content.firstElementChild).cloneNode(true));
    windowStart = win.start;
    let row = rowsBox.firstElementChild;
    for (let k = 0; k < count; k++, row = /** @type {Element} */ (row).nextElementSibling) fillRow(row, view.rows[win.start + k]);
    rowsBox.style.transform = `translateY(${win.offset}px)`;
  }

  return {
    paint,
    /** A new view (rows, expansion, which values the columns read): everything is refilled.
     * @param {{rows: number[], hasKids: Uint8Array}} next @param {Set<string>} expanded @param {boolean} showOps */
    show(next, expanded, showOps) {
      view = next;
      expandedSet = expanded;
      version++;
      for (const col of numeric) {
        col.values = data.num[valueColumn(data, col.key, showOps)];
        col.base = col.of ? data.num[col.of][0] : NaN;
      }
      paint();
    },
    resized() {
      headHeight = 0;
      paint();
    },
    /** Mark row i as selected and scroll it into view (if it is shown). @param {number} i */
    select(i) {
      selected = i;
      version++;
      const at = view.rows.indexOf(i);
      if (at >= 0) {
        const top = headHeight + at * ROW_HEIGHT;
        if (top < scroller.scrollTop + headHeight || top + ROW_HEIGHT > scroller.scrollTop + scroller.clientHeight) {
          scroller.scrollTop = Math.max(0, top - headHeight - scroller.clientHeight / 3);
        }
      }
      paint();
    },
    rows: () => view.rows,
  };
}

/**
 * Mounts the view into `root` (build, paint, bind); returns a function that removes listeners
 * and observers.
 * @param {HTMLElement} root @param {Model} model @param {Data} data
 */
function mount(root, model, data) {
  const columns = columnsFor(data);
  const parts = build(root, data, columns);
  const view = painter(parts, data, columns);
  return bind(root, model, data, parts, view);
}

/**
 * The model's view state, read fresh each time; `expanded` as a Set, rebuilt only when the list
 * itself changed.
 * @param {Model} model
 * @returns {() => ViewState & {expanded: Set<string>}}
 */
function stateReader(model) {
  /** @type {string[]|null} */
  let expandedList = null;
  let expandedSet = /** @type {Set<string>} */ (new Set());
  return () => {
    const list = model.get("expanded") || [];
    if (list !== expandedList) {
      expandedList = list;
      expandedSet = new Set(list);
    }
    return {
      min_pct: Number(model.get("min_pct")) || 0,
      sort_by: model.get("sort_by") || "cpu_us",
      ascending: !!model.get("ascending"),
      show_ops: !!model.get("show_ops"),
      search: model.get("search") || "",
      expanded: expandedSet,
    };
  };
}

/**
 * Redraw for a state: the rows, and controls that follow the model (Python may have changed it;
 * the search box only when it differs, so typing keeps its caret).
 * @param {Data} data @param {Parts} parts @param {ReturnType<typeof painter>} view
 * @param {ViewState & {expanded: Set<string>}} st
 */
function redraw(data, parts, view, st) {
  const { slider, sliderValue, ops, search, rowCount, head, sizer, grid } = parts;
  const next = visibleRows(data, st);
  slider.value = String(st.min_pct);
  sliderValue.textContent = `${st.min_pct}%`;
  ops.checked = !!st.show_ops;
  if (search.value !== st.search) search.value = /** @type {string} */ (st.search);
  const active = resolveSort(data.vocab, st.sort_by);
  for (const th of head.children) {
    if (/** @type {HTMLElement} */ (th).dataset.col === active) th.setAttribute("aria-sort", st.ascending ? "ascending" : "descending");
    else th.removeAttribute("aria-sort");
  }
  rowCount.textContent = `${next.rows.length} of ${data.n} rows`;
  grid.setAttribute("aria-rowcount", String(next.rows.length));
  sizer.style.height = next.rows.length * ROW_HEIGHT + "px";
  view.show(next, st.expanded, !!st.show_ops);
}

/**
 * What clicks and typing do: each handler turns a DOM event into model changes.
 * @param {HTMLElement} root @param {Model} model @param {Data} data @param {Parts} parts
 * @param {ReturnType<typeof painter>} view @param {ReturnType<typeof stateReader>} state
 */
function handlers(root, model, data, parts, view, state) {
  const { slider, ops, search } = parts;
  /** @param {Record<string, any>} values */
  function change(values) {
    for (const [k, v] of Object.entries(values)) model.set(k, v);
    model.save_changes();
  }
  /** @param {string} key */
  function sortBy(key) {
    const st = state();
    if (resolveSort(data.vocab, st.sort_by) === key) change({ ascending: !st.ascending });
    else change({ sort_by: key, ascending: isTextColumn(data, key) });
  }
  /** @type {(() => void) | null} */
  let closeMemory = null;
  /** Select row i in the table: open its ancestors, let the filters keep it, scroll to it.
   * @param {number} i */
  function select(i) {
    /** @type {Record<string, any>} */
    const values = { expanded: withPaths(model.get("expanded") || [], ancestorPaths(data, i)) };
    if (!visibleRows(data, { ...state(), expanded: new Set(values.expanded) }).rows.includes(i)) Object.assign(values, { min_pct: 0, search: "" });
    change(values);
    queueMicrotask(() => view.select(i)); // after the redraw the change scheduled
  }
  /** @param {HTMLElement} button */
  function toggleMemory(button) {
    if (closeMemory) {
      closeMemory();
      closeMemory = null;
    } else {
      closeMemory = mountMemory(parts.memory, data, select);
    }
    button.setAttribute("aria-pressed", String(closeMemory !== null));
  }
  function exportCSV() {
    const blob = new Blob([toCSV(data, view.rows())], { type: "text/csv;charset=utf-8" });
    const url = URL.createObjectURL(blob);
    const link = h("a", { href: url, download: `${String(data.summary.name || "profile").replace(/[^\w.-]+/g, "_")}.csv`, hidden: true });
    root.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  }
  return {
    /** @param {Event} event */
    click(event) {
      const target = /** @type {HTMLElement} */ (event.target);
      const caret = target.closest('[data-testid="caret"]');
      if (caret) {
        const path = /** @type {string} */ (caret.closest('[role="row"]')?.getAttribute("data-path"));
        change({ expanded: toggleExpanded(model.get("expanded") || [], path) });
        return;
      }
      const th = /** @type {HTMLElement|null} */ (target.closest(".tp-th"));
      if (th) return sortBy(/** @type {string} */ (th.dataset.col));
      const button = /** @type {HTMLElement|null} */ (target.closest("button[data-testid]"));
      if (!button) return;
      const action = button.dataset.testid;
      if (action === "expand-all") change({ expanded: allExpandable(data) });
      else if (action === "collapse-all") change({ expanded: [] });
      else if (action === "export-csv") exportCSV();
      else if (action === "memory-toggle") toggleMemory(button);
    },
    /** @param {Event} event */
    keydown(event) {
      const key = /** @type {KeyboardEvent} */ (event).key;
      const th = /** @type {HTMLElement|null} */ (/** @type {HTMLElement} */ (event.target).closest(".tp-th"));
      if (th && (key === "Enter" || key === " ")) {
        event.preventDefault();
        sortBy(/** @type {string} */ (th.dataset.col));
      }
    },
    /** @param {Event} event */
    input(event) {
      if (event.target === slider) {
        change({ min_pct: Number(slider.value) });
      } else if (event.target === search) {
        const text = search.value;
        /** @type {Record<string, any>} */
        const values = { search: text };
        if (text.trim()) {
          const list = model.get("expanded") || [];
          const opened = expandMatches(data, { ...state(), search: text }, list);
          if (opened !== list) values.expanded = opened;
        }
        change(values);
      }
    },
    /** @param {Event} event */
    change(event) {
      if (event.target !== ops) return;
      /** @type {Record<string, any>} */
      const values = { show_ops: ops.checked };
      if (ops.checked) {
        const list = model.get("expanded") || [];
        const opened = expandLeafLayers(data, view.rows(), list);
        if (opened !== list) values.expanded = opened;
      }
      change(values);
    },
    dispose() {
      closeMemory?.();
    },
  };
}

/**
 * Bind: model changes redraw (once per burst), DOM events change the model. One listener per
 * event type on the root (delegation); rows carry no handlers. Returns the unbinding function.
 * @param {HTMLElement} root @param {Model} model @param {Data} data @param {Parts} parts
 * @param {ReturnType<typeof painter>} view
 */
function bind(root, model, data, parts, view) {
  const state = stateReader(model);
  const on = handlers(root, model, data, parts, view, state);
  // Model changes can come in bursts (several traits from one click or one Python cell).
  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    queueMicrotask(() => {
      pending = false;
      redraw(data, parts, view, state());
    });
  }
  const events = data.vocab.state.map((k) => "change:" + k.name);
  for (const e of events) model.on(e, schedule);
  const domEvents = /** @type {const} */ (["click", "keydown", "input", "change"]);
  for (const type of domEvents) root.addEventListener(type, on[type]);
  parts.scroller.addEventListener("scroll", view.paint, { passive: true });
  // The output area may attach or resize the widget after render: repaint for the new height.
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(view.resized) : null;
  resize?.observe(parts.scroller);
  resize?.observe(parts.head);
  redraw(data, parts, view, state());
  return () => {
    for (const e of events) model.off(e, schedule);
    resize?.disconnect();
    for (const type of domEvents) root.removeEventListener(type, on[type]);
    parts.scroller.removeEventListener("scroll", view.paint);
    on.dispose();
  };
}

// -- the Memory view: the chart ----------------------------------------------------------------

const MEMORY_HEIGHT = 180;
/** @type {string|null} */
let svgNamespace = null; // taken from a parsed <svg>: the report page must name no URL at all

/**
 * @param {string} tag @param {Record<string, string|number>} attrs
 * @returns {SVGElement}
 */
function svg(tag, attrs) {
  if (svgNamespace === null) {
    const template = document.createElement("template");
    template.innerHTML = "<svg></svg>"; // constant markup, no profile text
    svgNamespace = /** @type {Element} */ (template.content.firstElementChild).namespaceURI;
  }
  const node = /** @type {SVGElement} */ (document.createElementNS(svgNamespace, tag));
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

/**
 * Mounts the Memory view into `box` (the data's `memory` must be there): a device picker when
 * there are several, the phase legend, a readout naming the layer under the cursor, and the
 * chart. A click on the line, or on "Peak layer", calls `onSelect` with the layer's row.
 * Returns the function that removes it.
 * @param {HTMLElement} box @param {Data} data @param {(row: number) => void} onSelect
 */
function mountMemory(box, data, onSelect) {
  const memory = /** @type {MemoryData} */ (data.memory);
  let device = Math.max(0, memory.devices.findIndex((d) => d.name !== "cpu"));
  const readout = h("span", { class: "tp-mem-readout", "data-testid": "memory-readout", "aria-live": "polite" });
  const picker = h("span", { class: "tp-mem-devices" });
  if (memory.devices.length > 1) {
    memory.devices.forEach((d, k) => picker.append(h("button", { type: "button", class: "tp-btn", "data-device": k, text: d.name })));
  }
  const legend = h("span", { class: "tp-mem-legend" });
  for (const code of new Set(memory.bands.map((b) => b[2]))) {
    const phase = memory.phases[code];
    legend.append(h("span", { class: `tp-mem-key tp-mem-${phase}` }), h("span", { text: phase + " " }));
  }
  const peakButton = h("button", { type: "button", class: "tp-btn", "data-testid": "memory-peak", title: "Select the layer running at the peak", text: "Peak layer" });
  const chart = svg("svg", { class: "tp-mem-chart", "data-testid": "memory-chart", role: "img", height: MEMORY_HEIGHT });
  box.replaceChildren(h("div", { class: "tp-mem-head" }, picker, legend, peakButton, readout), chart);
  box.hidden = false;
  /** @type {MemoryScales} */
  let scales;
  /** @type {MemorySeries} */
  let series;
  /** @type {SVGElement} */
  let cursor;

  function idle() {
    const p = series.peak;
    readout.textContent = p
      ? `${series.name} peak ${formatBytes(p.v)} at ${formatTime(p.t)} in ${data.path[p.row]} (${p.phase}) · click the line to select a layer`
      : series.name;
  }

  function draw() {
    series = memory.devices[device];
    const width = Math.max(240, Math.floor(box.clientWidth) || 800);
    chart.setAttribute("width", String(width));
    chart.setAttribute("viewBox", `0 0 ${width} ${MEMORY_HEIGHT}`);
    scales = memoryScales(series, width, MEMORY_HEIGHT);
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
    cursor = svg("line", { class: "tp-mem-cursor", x1: 0, x2: 0, y1: plot.top, y2: plot.bottom, visibility: "hidden" });
    parts.push(cursor);
    chart.replaceChildren(...parts);
    chart.setAttribute("aria-label", `Allocated memory over the run on ${series.name}` + (p ? `, peak ${formatBytes(p.v)}` : ""));
    idle();
  }

  /** @param {MouseEvent} event */
  function pointOf(event) {
    const box = chart.getBoundingClientRect();
    const x = event.clientX - box.left;
    if (x < scales.plot.left || x > scales.plot.right) return -1;
    return pointAt(series.t, scales.time(x));
  }
  /** @param {Event} event */
  function move(event) {
    const i = pointOf(/** @type {MouseEvent} */ (event));
    if (i < 0) {
      cursor.setAttribute("visibility", "hidden");
      idle();
      return;
    }
    const x = String(scales.x(series.t[i]));
    cursor.setAttribute("x1", x);
    cursor.setAttribute("x2", x);
    cursor.setAttribute("visibility", "visible");
    readout.textContent = memoryReadout(data, series, i, phaseAt(memory, series.t[i]) ?? undefined);
  }
  /** @param {Event} event */
  function click(event) {
    const i = pointOf(/** @type {MouseEvent} */ (event));
    if (i >= 0 && series.row[i] > 0) onSelect(series.row[i]);
  }
  /** @param {Event} event */
  function headClick(event) {
    const button = /** @type {HTMLElement} */ (event.target).closest("button");
    if (!button) return;
    if (button === peakButton) {
      if (series.peak && series.peak.row > 0) onSelect(series.peak.row);
      return;
    }
    device = Number(button.dataset.device);
    draw();
  }
  const head = /** @type {HTMLElement} */ (box.firstElementChild);
  chart.addEventListener("mousemove", move);
  chart.addEventListener("mouseleave", move);
  chart.addEventListener("click", click);
  head.addEventListener("click", headClick);
  let width = box.clientWidth;
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => {
    if (box.clientWidth !== width) {
      width = box.clientWidth;
      draw();
    }
  }) : null;
  resize?.observe(box);
  draw();
  return () => {
    resize?.disconnect();
    chart.removeEventListener("mousemove", move);
    chart.removeEventListener("mouseleave", move);
    chart.removeEventListener("click", click);
    head.removeEventListener("click", headClick);
    box.replaceChildren();
    box.hidden = true;
  };
}

/**
 * anywidget's entry point (and the report page's).
 * @param {{model: Model, el: HTMLElement}} context
 */
async function render({ model, el }) {
  const root = h("div", { class: "torchprof", "data-testid": "torchprof" });
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

export default { render };
