// @ts-check
// torchprof's front end: the layer tree as an interactive, virtualised tree table, a Flame view
// (an icicle of the tree) and a Top view (layers and module types ranked by self time).
//
// One ES module with no dependencies and no bundler; anywidget loads it in Jupyter and
// `prof.to_html()` inlines it in a report page. Everything above "the DOM" is pure (no DOM, no
// globals touched at import time) and exported, so `node --test tests/js/` checks the rules
// without a browser. The view rules mirror src/torchprof/_views/rows.py exactly; a pytest
// cross-check runs both on the same trees and states.
//
// The module keeps no vocabulary of its own: column specs, kind codes, sort aliases, the views
// and the view-state keys arrive in the payload (`vocab`, from src/torchprof/_vocab.py).
//
// Text from the profile (module names, region labels, shapes) only ever reaches the DOM
// through textContent / setAttribute, and the canvas through fillText.

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
 * @property {string} [subtree] for a self column: the same quantity over the whole subtree
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
 * @property {string[]} views the views, in the switcher's order
 * @property {string[]} flame_colours
 * @property {string} all_steps the `step` value of every step folded into one tree
 * @property {string} step_prefix name prefix of the iteration regions
 * @property {string} backward_prefix name prefix of the autograd engine's per-node backward ranges
 * @property {string} path_search prefix of a search on paths
 * @property {string} threshold_column what min_pct compares
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
 * @property {any} [all_steps] every step folded into one tree: a table plus low, high, runs, count
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
 * @property {Int32Array} end one past the last row of each row's subtree (rows are in pre-order)
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
 * @property {Record<string, any>} cache lower-cased text columns, natural keys, ... made on demand
 * @property {Folded|null} folded every step folded into one tree (two steps or more)
 * @property {MemoryData|null} memory the Memory view's data (null without memory=True)
 */

/**
 * Every step folded into one tree (src/torchprof/_tree/aggregate.py `across_steps`): a table of
 * means, the least and most of any step for the time columns, and how many steps ran each node.
 * @typedef {object} Folded
 * @property {Data} table
 * @property {Record<string, Float64Array>} low
 * @property {Record<string, Float64Array>} high
 * @property {number[]} runs
 * @property {number} count
 */

/**
 * The view state (the widget's synced traits); `expanded` as a Set of paths, null = all open.
 * `root` is the row the view starts from (a step's row; 0 = the whole run).
 * @typedef {object} ViewState
 * @property {number} [min_pct]
 * @property {string|string[]|null} [sort_by]
 * @property {boolean} [ascending]
 * @property {boolean} [show_ops]
 * @property {string|string[]} [search]
 * @property {Set<string>|null} [expanded]
 * @property {number|null} [max_depth]
 * @property {number} [root]
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
  /** @template T @param {any} ref @param {any} Type @param {number} n @returns {T} */
  const array = (ref, Type, n) => {
    if (Array.isArray(ref)) return Type.from(ref, (/** @type {any} */ v) => (v === null ? NaN : v));
    if (ref && typeof ref === "object" && "const" in ref) return new Type(n).fill(ref.const === null ? NaN : ref.const);
    const offset = /** @type {Uint8Array} */ (bytes).byteOffset + base + ref.offset;
    const buffer = /** @type {Uint8Array} */ (bytes).buffer;
    if (offset % Type.BYTES_PER_ELEMENT === 0) return new Type(buffer, offset, ref.length);
    return new Type(buffer.slice(offset, offset + ref.length * Type.BYTES_PER_ELEMENT));
  };
  const data = decodeTable(spec, spec.vocab, array);
  data.summary = spec.summary || {};
  data.summaryItems = spec.summary_items || [];
  data.steps = spec.steps || [];
  data.memory = spec.memory || null;
  const f = spec.all_steps;
  if (f) {
    /** @param {Record<string, any>} refs */
    const numbers = (refs) => Object.fromEntries(Object.entries(refs || {}).map(([c, ref]) => [c, /** @type {Float64Array} */ (array(ref, Float64Array, f.n))]));
    const table = decodeTable(f, spec.vocab, array);
    table.summary = { name: table.name[0] };
    data.folded = { table, low: numbers(f.low), high: numbers(f.high), runs: f.runs, count: f.count };
  }
  return data;
}

/**
 * One tree of a payload (the profile's, or the folded steps') as column arrays.
 * @param {any} spec @param {Vocab} vocab
 * @param {(ref: any, Type: any, n: number) => any} array reads an inline list or a buffer reference
 * @returns {Data}
 */
function decodeTable(spec, vocab, array) {
  const n = spec.n;
  /** @type {Int32Array} */
  const parent = array(spec.parent, Int32Array, n);
  /** @type {Uint8Array} */
  const flags = array(spec.flags, Uint8Array, n);
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
      num[c] = array(ref, Float64Array, n);
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
  // A subtree is a contiguous run of rows in pre-order: it ends where its last child's ends.
  const end = new Int32Array(n);
  for (let i = n - 1; i >= 0; i--) {
    const last = childStart[i + 1] > childStart[i] ? childIndex[childStart[i + 1] - 1] : -1;
    end[i] = last < 0 ? i + 1 : end[last];
  }
  return {
    n, parent, kind, backward, depth, end, path, name, num, allNaN, childStart, childIndex,
    text,
    type: text.type, shapes: text.input_shapes, source: text.source,
    vocab,
    spec: Object.fromEntries(vocab.columns.map((c) => [c.name, c])),
    layerCodes: new Set(vocab.layer_kinds.map((k) => vocab.kinds.indexOf(k))),
    summary: {}, summaryItems: [], steps: [],
    cache: {},
    folded: null,
    memory: null,
  };
}

/**
 * Numeric columns the payload carries (depth is derived from the parents).
 * @param {Vocab} vocab
 */
export function numberColumns(vocab) {
  return vocab.columns.filter((c) => (c.dtype === "float" || c.dtype === "int") && c.name !== "depth").map((c) => c.name);
}

// -- the view rules (mirror of _views/rows.py) ----------------------------------------------------

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

/**
 * A value made once per table and kept (lower-cased text, natural sort keys, ...).
 * @template T @param {Data} data @param {string} key @param {() => T} make @returns {T}
 */
function cached(data, key, make) {
  if (!(key in data.cache)) data.cache[key] = make();
  return data.cache[key];
}

/** @param {Data} data @param {string} key @returns {(string|null)[]} */
function lowered(data, key) {
  return cached(data, "lower:" + key, () => Array.from(/** @type {ArrayLike<any>} */ (column(data, key)), (v) => (v === null || v === undefined ? null : String(v).toLowerCase())));
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

/** @param {string} p */
const isGlob = (p) => /[*?[]/.test(p);

/**
 * _views/rows.py text_test: one lower-cased pattern against one lower-cased name. A glob
 * (`*?[`) matches the whole name, anything else is a substring.
 * @param {string} pattern @returns {(t: string) => boolean}
 */
export function textTest(pattern) {
  if (!isGlob(pattern)) return (t) => t.includes(pattern);
  const re = globToRegExp(pattern);
  return (t) => re.test(t);
}

/**
 * _views/rows.py path_test: a glob matches the whole path or any tail of it that starts after a
 * `.` or `/` (`layer4.*.conv?` finds `resnet.layer4.0.conv1`); anything else is a substring.
 * @param {string} pattern @returns {(t: string) => boolean}
 */
export function pathTest(pattern) {
  if (!isGlob(pattern)) return (t) => t.includes(pattern);
  const re = globToRegExp(pattern);
  return (t) => {
    if (re.test(t)) return true;
    for (let k = 0; k < t.length; k++) if ((t[k] === "." || t[k] === "/") && re.test(t.slice(k + 1))) return true;
    return false;
  };
}

/**
 * The search, parsed: each pattern lower-cased, on names or (behind `path:`) on paths.
 * @param {Vocab} vocab @param {string|string[]|undefined} search
 * @returns {{onPath: boolean, pattern: string, test: (t: string) => boolean}[]}
 */
export function parseSearch(vocab, search) {
  let patterns = search;
  if (typeof search === "string") patterns = search.trim() ? [search] : [];
  const prefix = vocab.path_search;
  return /** @type {string[]} */ (patterns || []).map((raw) => {
    const p = raw.toLowerCase();
    if (p.startsWith(prefix)) {
      const pattern = p.slice(prefix.length).trim();
      return { onPath: true, pattern, test: pathTest(pattern) };
    }
    return { onPath: false, pattern: p, test: textTest(p) };
  });
}

/**
 * _views/rows.py row_matcher: `(row) => matches` for a table, or null when nothing is searched.
 * A pattern matches names; one starting `path:` matches paths. Several patterns: any.
 * @param {Data} data @param {string|string[]|undefined} search
 * @returns {((i: number) => boolean)|null}
 */
export function makeMatcher(data, search) {
  const tests = parseSearch(data.vocab, search);
  if (tests.length === 0) return null;
  const names = lowered(data, "name");
  const paths = tests.some((t) => t.onPath) ? lowered(data, "path") : names;
  return (i) => tests.some((t) => t.test(/** @type {string} */ ((t.onPath ? paths : names)[i])));
}

/**
 * Where the search matches a name, for highlighting: [start, end) of the first substring match,
 * the whole name for a glob match, null for none (or a search on paths only).
 * @param {Vocab} vocab @param {string} search @param {string} name
 * @returns {[number, number]|null}
 */
export function matchRange(vocab, search, name) {
  const lower = name.toLowerCase();
  for (const t of parseSearch(vocab, search)) {
    if (t.onPath) continue;
    if (!isGlob(t.pattern)) {
      const at = lower.indexOf(t.pattern);
      if (at >= 0 && t.pattern.length) return [at, at + t.pattern.length];
    } else if (t.test(lower)) {
      return [0, name.length];
    }
  }
  return null;
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
  return data.vocab.kinds[data.kind[i]] === "region" && data.name[i].startsWith(data.vocab.step_prefix);
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
  const exec = data.num.exec_order;
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

// -- steps ---------------------------------------------------------------------------------------

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
  const exec = data.num.exec_order;
  // A table without an execution order (a comparison, whose steps are folded into one
  // ProfilerStep#* row) has no steps to pick.
  return exec ? out.sort((a, b) => exec[a] - exec[b]) : [];
}

/**
 * The table and root row a `step` state value views: the whole run (""), the folded steps
 * ("all"), or one step by number; an unknown step views the whole run.
 * @param {Data} data @param {string} step
 * @returns {{table: Data, root: number, folded: Folded|null}}
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

// -- controls ---------------------------------------------------------------------------------

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

// -- layout: columns that never truncate a number ---------------------------------------------

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
export const CELL_PAD = 16; // horizontal padding of a cell
export const PCT_GAP = 4;

/**
 * Column widths for the space available. Numbers keep their measured width; percentages show
 * only when every column fits with them; the Node column takes the rest (at least NODE_MIN, the
 * table scrolls sideways below that). A header wraps between words, so its widest word counts.
 * @param {{value: number, pct: number, head: number}[]} cols measured px, padding not included
 * @param {number} available @param {number} [nodeMin]
 * @returns {{showPct: boolean, widths: number[], minWidth: number}}
 */
export function tableLayout(cols, available, nodeMin = NODE_MIN) {
  /** @param {boolean} pct */
  const widths = (pct) => cols.map((c) => Math.ceil(Math.max(c.head, c.value + (pct && c.pct ? PCT_GAP + c.pct : 0)) + CELL_PAD));
  const sum = (/** @type {number[]} */ w) => w.reduce((a, b) => a + b, 0);
  const withPct = widths(true);
  if (nodeMin + sum(withPct) <= available) return { showPct: true, widths: withPct, minWidth: nodeMin + sum(withPct) };
  const bare = widths(false);
  return { showPct: false, widths: bare, minWidth: nodeMin + sum(bare) };
}

/**
 * A name split for truncation in the middle: the head gives way (ends in "…"), the tail (the
 * last few characters, where layers.10 and layers.11 differ) always shows.
 * @param {string} name @returns {number} where the tail starts
 */
export function tailStart(name) {
  const n = name.length;
  if (n <= 6) return n;
  return n - Math.min(12, Math.ceil(n * 0.4));
}

/**
 * The label's pieces: head and tail, each as runs of text marked where the search matched.
 * @param {string} name @param {[number, number]|null} range
 * @returns {{head: {text: string, mark: boolean}[], tail: {text: string, mark: boolean}[]}}
 */
export function labelParts(name, range) {
  const cut = tailStart(name);
  /** @param {number} from @param {number} to */
  const runs = (from, to) => {
    const out = [];
    const points = [from, to];
    if (range) for (const p of range) if (p > from && p < to) points.push(p);
    points.sort((a, b) => a - b);
    for (let k = 0; k + 1 < points.length; k++) {
      const [a, b] = [points[k], points[k + 1]];
      if (b > a) out.push({ text: name.slice(a, b), mark: !!range && a >= range[0] && b <= range[1] });
    }
    return out;
  };
  return { head: runs(0, cut), tail: runs(cut, name.length) };
}

// -- the Flame view: geometry -----------------------------------------------------------------

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
    else if (spec.rollup === "self" && spec.subtree && hasData(data, spec.subtree)) out.push({ key: name, label: spec.label, width: spec.subtree, self: name });
  }
  return out;
}

/**
 * The metric for a state value: that metric, else the first (CPU total).
 * @param {Data} data @param {string} key
 */
export function flameMetric(data, key) {
  const all = flameMetrics(data);
  return all.find((m) => m.key === key) || all[0] || { key: "cpu_us", label: "CPU total", width: "cpu_us", self: null };
}

/**
 * Children of every row in execution order (the order they first ran: conv1, bn1, relu, ...),
 * made once per table.
 * @param {Data} data @returns {{start: Int32Array, index: Int32Array}}
 */
export function execChildren(data) {
  return cached(data, "execChildren", () => {
    const exec = data.num.exec_order;
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

/** What the Flame view's colour choices say. */
const FLAME_COLOUR_LABELS = /** @type {Record<string, string>} */ ({
  phase: "forward / backward / other",
  type: "module type",
  delta: "change (faster green, slower red)",
});

/**
 * The Flame colouring in force: the state's when the payload offers it, else its first.
 * @param {Data} data @param {string} colour
 */
export function flameColouring(data, colour) {
  return data.vocab.flame_colours.includes(colour) ? colour : data.vocab.flame_colours[0];
}

/**
 * A comparison's bars coloured by change: the delta column of the sized metric
 * (`<metric>_delta`, the run's suffix taken off, else CPU total's), and the largest change below the root, which gets the
 * deepest colour.
 * @param {Data} data @param {{width: string}} metric
 * @returns {{column: string, values: Float64Array, scale: number}}
 */
export function flameDeltas(data, metric) {
  const stem = metric.width.replace(/_(base|new)$/, ""); // a comparison sizes by one run's column
  const column = data.num[stem + "_delta"] ? stem + "_delta" : "cpu_us_delta";
  const values = data.num[column] || new Float64Array(data.n).fill(NaN);
  let scale = 0;
  for (let i = 1; i < data.n; i++) if (Math.abs(values[i]) > scale) scale = Math.abs(values[i]);
  return { column, values, scale };
}

/**
 * The colour of a change `v` against the largest, `scale`: green for faster (below zero), red
 * for slower, from pale to deep by the change's size; grey for no change or none recorded.
 * @param {number} v @param {number} scale @param {boolean} dark
 */
export function deltaColour(v, scale, dark) {
  if (!(v !== 0 && scale > 0) || Number.isNaN(v)) return dark ? "hsl(215 8% 45%)" : "hsl(215 12% 84%)";
  const size = Math.min(1, Math.abs(v) / scale);
  const hue = v < 0 ? 135 : 2;
  const light = dark ? 30 + 25 * (1 - size) : 88 - 40 * size;
  return `hsl(${hue} ${dark ? 50 : 65}% ${light.toFixed(1)}%)`;
}

/**
 * A stable hue for a module type (FNV-1a of the text), so a class keeps its colour across
 * profiles and redraws.
 * @param {string} text @returns {number} 0..359
 */
export function typeHue(text) {
  let h = 0x811c9dc5;
  for (let k = 0; k < text.length; k++) {
    h ^= text.charCodeAt(k);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % 360;
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

// -- the Top view ------------------------------------------------------------------------------

/**
 * The self column the Top view ranks by for a metric: the metric when it is a self column, the
 * self column whose subtree it is for a total (CPU total -> Self CPU), else Self CPU.
 * @param {Data} data @param {string} metric
 */
export function topColumn(data, metric) {
  const spec = data.spec[metric];
  if (spec?.rollup === "self" && spec.layer_alt) return metric;
  const self = data.vocab.columns.find((c) => c.subtree === metric && c.layer_alt);
  return self ? self.name : "self_cpu_us";
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
 * _tree/aggregate.py by_type over `root`'s subtree: module metrics summed per class, slowest
 * (CPU total) first. Totals come from the outermost module of each class only (a Sequential in
 * a Sequential is not counted twice: a module counts as nested when a module of its class is
 * above it with only modules between); self values and calls add up everywhere. A column missing
 * from the whole table stays NaN. One pre-order pass with the path from the root as a stack.
 * @param {Data} data @param {number} [root]
 * @returns {{type: string, modules: number, sums: Record<string, number>}[]}
 */
export function byType(data, root = 0) {
  const moduleCode = data.vocab.kinds.indexOf("module");
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
  return out.sort((a, b) => b.sums.cpu_us - a.sums.cpu_us);
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
 * The percent a table cell shows beside its value: formatPercent, but nothing for a share that
 * rounds to zero ("0.0%" in every other cell said nothing but cluttered the table).
 * @param {number} part @param {number} whole
 */
export function cellPercent(part, whole) {
  const text = formatPercent(part, whole);
  return /^-?0(\.0)?%$/.test(text) ? "" : text;
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
 * The CSV file's name: the profile's label, with the model's when the profiled block holds one
 * root module (`cell-model.csv` for `%%torchprof`, `profile-ResNet.csv`), and the step viewed.
 * @param {Data} data @param {string} step
 */
export function exportFileName(data, step) {
  const label = String(data.summary.name ?? data.name[0] ?? "profile");
  const moduleCode = data.vocab.kinds.indexOf("module");
  const tops = [];
  for (let c = data.childStart[0]; c < data.childStart[1]; c++) if (data.kind[data.childIndex[c]] === moduleCode) tops.push(data.childIndex[c]);
  let base = label;
  if (data.kind[0] !== moduleCode && tops.length === 1 && data.name[tops[0]] !== label) base += "-" + data.name[tops[0]];
  if (step) base += step === data.vocab.all_steps ? "-all-steps" : "-step" + step;
  return base.replace(/[^\w.-]+/g, "_") + ".csv";
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
 * @property {boolean} sortable a header click sorts by it
 * @property {"low"|"high"} [spread] the folded steps' least or most value of `key`, not its mean
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
 * _views/cells.py view_columns), after the Node column. With `folded` (every step folded into
 * one tree) the CPU total is followed by its least and most of any step.
 * @param {Data} data @param {Folded|null} [folded]
 * @returns {ViewColumn[]}
 */
export function columnsFor(data, folded = null) {
  /** @type {ViewColumn[]} */
  const cols = [{ key: "name", label: "Node", type: "name", title: "Layer, region, op or kernel; hover for path, type and input shapes", sortable: true }];
  const shown = new Set(data.vocab.view_columns.filter((c) => hasData(data, c)));
  for (const name of data.vocab.view_columns) {
    const spec = data.spec[name];
    if (!shown.has(name) || (spec.needs && !shown.has(spec.needs))) continue;
    const self = data.vocab.columns.find((c) => c.subtree === name);
    cols.push({ key: name, label: spec.label, type: spec.unit, title: spec.about, of: spec.percent_of, family: spec.family, self: self?.name, sortable: true });
    if (folded && name === data.vocab.threshold_column && folded.low[name]) {
      for (const [spread, word] of /** @type {const} */ ([["low", "min"], ["high", "max"]])) {
        cols.push({ key: name, label: `${spec.label} ${word}`, type: spec.unit, title: `The ${word === "min" ? "least" : "most"} ${spec.label} of any of the ${folded.count} steps (0 where a step did not run the row)`,
          of: spec.percent_of, family: spec.family, spread, sortable: false });
      }
    }
  }
  return cols;
}

// -- the Memory view: pure geometry -----------------------------------------------------------
//
// A line of allocated bytes over the run (src/torchprof/_views/memory.py memory_payload) with
// the forward/backward/optimizer bands, the peak marked, the layer under the cursor named; a
// click selects that layer in the table. Everything here is plain arithmetic on arrays; the one
// function that touches the DOM is createMemory below.

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
    box.append(h("span", { class: "tp-stat tp-steps", title: "Wall time of each ProfilerStep, in the order they ran" },
      h("span", { class: "tp-stat-k", text: `${steps.length} steps` }), " ", bars, " ",
      h("span", { text: `${list}  (min ${formatTime(sorted[0])}, median ${formatTime(median)}, max ${formatTime(max)})` })));
  }
}

/** @param {Data} data @param {number} i @param {Folded|null} folded */
function nodeTitle(data, i, folded) {
  const kind = data.vocab.kinds[data.kind[i]];
  const lines = [data.path[i], data.type[i] ? `${kind} · ${data.type[i]}` : kind];
  if (data.backward[i]) lines[1] += " · backward";
  if (data.shapes[i]) lines.push("input shapes: " + data.shapes[i]);
  if (data.source[i]) lines.push("called from: " + data.source[i]);
  if (folded) lines.push(`ran in ${folded.runs[i]} of ${folded.count} steps; numbers are means per step`);
  return lines.join("\n");
}

/** @type {Intl.NumberFormat|null} */
let exactFormat = null; // one Intl formatter: creating one per call costs more than a row

/** @param {number} v @param {string} unit */
function exactTitle(v, unit) {
  exactFormat ??= new Intl.NumberFormat("en-US", { maximumFractionDigits: 3 });
  return missing(v) ? "" : `${exactFormat.format(v)} ${unit}`;
}

/** "Table", "Flame", "Top", from the vocabulary's view names. @param {string} view */
const viewLabel = (view) => view.charAt(0).toUpperCase() + view.slice(1);

/**
 * Fills a label element with a name's head and tail (the head gives way, "…" in the middle) and
 * the search match marked.
 * @param {HTMLElement} label @param {string} name @param {[number, number]|null} range
 */
function fillLabel(label, name, range) {
  const parts = labelParts(name, range);
  const [head, tail] = /** @type {HTMLElement[]} */ ([label.firstElementChild, label.lastElementChild]);
  for (const [box, runs] of /** @type {const} */ ([[head, parts.head], [tail, parts.tail]])) {
    if (runs.length === 1 && !runs[0].mark) box.textContent = runs[0].text;
    else box.replaceChildren(...runs.map((r) => (r.mark ? h("mark", { text: r.text }) : r.text)));
  }
}

/**
 * What every view of a mounted widget shares.
 * @typedef {object} Context
 * @property {HTMLElement} root
 * @property {Model} model
 * @property {Data} data
 * @property {() => FullState} state
 * @property {(values: Record<string, any>) => void} change sets model values and saves them
 */

/**
 * The view state as the DOM reads it.
 * @typedef {ViewState & {expanded: Set<string>, expandedList: string[], view: string, step: string, selected: string,
 *   metric: string, flame_colour: string, zoom: string, search: string}} FullState
 */

/**
 * A view's face: its element, a redraw for a state, a repaint after a resize, and clean-up.
 * @typedef {object} ViewFace
 * @property {HTMLElement} el
 * @property {(st: FullState, viewed: ReturnType<typeof viewedTable>, vis: ReturnType<typeof visibleRows>) => void} update
 * @property {() => void} resized
 * @property {() => void} destroy
 */

// -- the table ------------------------------------------------------------------------------------

/** @param {ViewColumn[]} columns */
function rowTemplate(columns) {
  const row = h("div", { class: "tp-row", role: "row" });
  for (const col of columns) {
    if (col.type === "name") {
      row.append(h("div", { class: "tp-cell tp-name", role: "gridcell", "data-col": col.key },
        h("span", { class: "tp-caret-slot" }),
        h("span", { class: "tp-label" }, h("span", { class: "tp-label-head" }), h("span", { class: "tp-label-tail" })),
        h("span", { class: "tp-badge" }), h("span", { class: "tp-tag" })));
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
 * Widths of texts as the widget draws them, measured in one layout pass: each text in a span
 * with `className` inside a hidden box in the widget (so the widget's fonts apply). Zero while
 * the widget is not laid out (not attached yet, or hidden).
 * @param {HTMLElement} host @param {string} className @param {string[]} texts
 */
function measureTexts(host, className, texts) {
  const box = h("div", { class: "tp-measure", "aria-hidden": "true" });
  const spans = texts.map((t) => h("span", { class: className, text: t }));
  box.append(...spans);
  host.append(box);
  const widths = spans.map((s) => s.getBoundingClientRect().width);
  box.remove();
  return widths;
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
 * The tree table view: header, virtualised rows, keyboard.
 * @param {Context} ctx @returns {ViewFace}
 */
function createTable(ctx) {
  const { data, root: host } = ctx;
  const head = h("div", { class: "tp-head", role: "row" });
  const rowsBox = h("div", { class: "tp-rows", role: "rowgroup" });
  const sizer = h("div", { class: "tp-sizer" }, rowsBox);
  const grid = h("div", { class: "tp-grid" }, head, sizer);
  const scroller = h("div", { class: "tp-scroller", "data-testid": "scroller", role: "treegrid", "aria-label": "Profile tree", tabindex: "0" }, grid);
  const el = h("div", { class: "tp-panel tp-panel-table", "data-view": "table" }, scroller);
  /** @type {ViewColumn[]} */
  let columns = [];
  /** @type {ViewColumn[]} */
  let numeric = [];
  let signature = "";
  /** @type {HTMLTemplateElement} */
  let template = document.createElement("template");
  /** @type {{value: number, pct: number, head: number}[]} */
  let measured = [];
  const spare = /** @type {HTMLElement[]} */ ([]);
  let headHeight = 0;
  let windowStart = 0;
  let version = 0;
  /** @type {ReturnType<typeof visibleRows>} */
  let view = { rows: [], hasKids: new Uint8Array(0), shown: new Uint8Array(0) };
  /** @type {FullState} */
  let st = ctx.state();
  let viewed = viewedTable(data, "");
  let selectedRow = -1;
  let revealed = "";
  let searchText = "";

  /** New columns (the folded steps add two): header and row template rebuilt, widths measured. */
  function setColumns() {
    const next = columnsFor(data, viewed.folded);
    const sig = next.map((c) => c.label).join("|");
    if (sig === signature) return;
    signature = sig;
    columns = next;
    numeric = columns.filter((c) => c.type !== "name");
    head.replaceChildren(...columns.map((col) => h("div", {
      class: `tp-th${col.type === "name" ? " tp-name" : " tp-num"}`, role: "columnheader", "data-col": col.key,
      "data-sortable": col.sortable ? "1" : null, tabindex: col.sortable ? "0" : null,
      title: col.title + (col.sortable ? "\nClick (or Enter) to sort" : ""),
    }, h("span", { text: col.label }))));
    template = rowTemplate(columns);
    rowsBox.replaceChildren();
    spare.length = 0;
    measured = [];
    headHeight = 0;
  }

  /** Column widths for the space there is: numbers keep theirs, the Node column gives way. */
  function layout() {
    if (!measured.length || measured.every((m) => m.value === 0)) measured = measureColumns(host, viewed.table, numeric, viewed.folded);
    const available = scroller.clientWidth;
    if (!available) return;
    const { showPct, widths, minWidth } = tableLayout(measured, available);
    host.style.setProperty("--tp-cols", `minmax(${NODE_MIN}px, 1fr) ${widths.map((w) => w + "px").join(" ")}`);
    host.style.setProperty("--tp-min-width", minWidth + "px");
    el.classList.toggle("tp-nopct", !showPct);
    headHeight = 0;
  }

  /** @param {any} row @param {number} i */
  function fillRow(row, i) {
    if (row._i === i && row._v === version) return;
    row._i = i;
    row._v = version;
    const table = viewed.table;
    const depth = table.depth[i] - table.depth[viewed.root];
    row.setAttribute("data-path", table.path[i]);
    row.setAttribute("aria-level", String(depth + 1));
    row.id = `tp-row-${i}`;
    const selected = i === selectedRow;
    row.setAttribute("aria-selected", String(selected));
    const bwd = !!table.backward[i];
    row.className = `tp-row tp-k-${table.vocab.kinds[table.kind[i]]}${bwd ? " tp-backward" : ""}${i === viewed.root ? " tp-root" : ""}${selected ? " tp-selected" : ""}`;
    row.style.setProperty("--d", String(depth));
    const nameCell = row.firstElementChild;
    const slot = nameCell.firstElementChild;
    if (view.hasKids[i]) {
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
    fillLabel(label, table.name[i], searchText ? matchRange(table.vocab, searchText, table.name[i]) : null);
    // Every backward row says so (not only the first): the badge; a module says its class,
    // unless that is its name already (an unlabelled root: "ResNet", not "ResNet ResNet").
    const badge = label.nextElementSibling;
    badge.textContent = bwd ? "bwd" : "";
    const type = table.vocab.kinds[table.kind[i]] === "module" && table.type[i] !== table.name[i] ? table.type[i] || "" : "";
    badge.nextElementSibling.textContent = type;
    nameCell.title = nodeTitle(table, i, viewed.folded);
    let cell = nameCell.nextElementSibling;
    for (const col of numeric) {
      const v = /** @type {Float64Array} */ (col.values)[i];
      const value = col.type === "time" ? cell.children[1] : cell.firstElementChild;
      const empty = Number.isNaN(v) || (v === 0 && col.type !== "int");
      if (col.type === "time") {
        const base = /** @type {number} */ (col.base);
        const pct = empty ? 0 : (100 * v) / base;
        value.textContent = empty ? "" : formatTime(v);
        cell.children[2].textContent = empty ? "" : cellPercent(v, base);
        cell.firstElementChild.style.width = Number.isFinite(pct) ? Math.max(0, Math.min(100, pct)) + "%" : "0";
        let title = empty ? "" : exactTitle(v, "µs");
        if (viewed.folded && !col.spread && !empty && viewed.folded.low[col.key]) {
          title = `mean ${formatTime(v)} · min ${formatTime(viewed.folded.low[col.key][i])} · max ${formatTime(viewed.folded.high[col.key][i])} over ${viewed.folded.count} steps\n${title}`;
        }
        cell.title = title;
      } else if (col.type === "bytes") {
        value.textContent = empty ? "" : formatBytes(v);
        const own = col.self ? table.num[col.self][i] : NaN;
        cell.title = empty ? "" : `${exactTitle(v, "bytes")}\nself: ${formatBytes(own)}`;
      } else if (col.type === "count") {
        value.textContent = empty ? "" : formatCount(v);
        cell.title = empty ? "" : col.key === "flops" ? `${exactTitle(v, "FLOPs")}\nMACs: ${formatCount(table.num.macs[i])}` : exactTitle(v, col.key);
      } else {
        value.textContent = Number.isNaN(v) ? "" : String(v);
      }
      if (data.spec[col.key].delta) markDelta(cell, v);
      cell = cell.nextElementSibling;
    }
  }

  /**
   * Paint: fills the rows of the virtual window and keeps them when they stay in view. Rows in the
   * DOM are exactly the window's, in display order; scrolling by less than a window moves the rows
   * that left on one side over to the other, so only the moved ones are refilled.
   */
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

  /** Scrolls just enough to show the row at `at` (of the view's rows). @param {number} at */
  function reveal(at) {
    if (at < 0) return;
    if (!headHeight) headHeight = head.offsetHeight;
    const top = headHeight + at * ROW_HEIGHT;
    const bottom = top + ROW_HEIGHT;
    if (top - headHeight < scroller.scrollTop) scroller.scrollTop = top - headHeight;
    else if (bottom > scroller.scrollTop + scroller.clientHeight) scroller.scrollTop = bottom - scroller.clientHeight;
  }

  /** @param {string} key */
  function sortBy(key) {
    const now = ctx.state();
    if (resolveSort(data.vocab, now.sort_by) === key) ctx.change({ ascending: !now.ascending });
    else ctx.change({ sort_by: key, ascending: isTextColumn(data, key) || key === "exec_order" });
  }

  /** @param {Event} event */
  function onClick(event) {
    const target = /** @type {HTMLElement} */ (event.target);
    const th = /** @type {HTMLElement|null} */ (target.closest(".tp-th"));
    if (th) {
      if (th.dataset.sortable) sortBy(/** @type {string} */ (th.dataset.col));
      return;
    }
    const rowEl = target.closest('[role="row"][data-path]');
    if (!rowEl) return;
    const path = /** @type {string} */ (rowEl.getAttribute("data-path"));
    scroller.focus({ preventScroll: true });
    if (target.closest('[data-testid="caret"]')) {
      ctx.change({ expanded: toggleExpanded(ctx.state().expandedList, path), selected: path });
    } else {
      ctx.change({ selected: path });
    }
  }

  /** @param {KeyboardEvent} event */
  function onKeydown(event) {
    const th = /** @type {HTMLElement|null} */ (/** @type {HTMLElement} */ (event.target).closest(".tp-th"));
    if (th) {
      if ((event.key === "Enter" || event.key === " ") && th.dataset.sortable) {
        event.preventDefault();
        sortBy(/** @type {string} */ (th.dataset.col));
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
      reveal(view.rows.indexOf(action.select));
    }
    if (Object.keys(values).length) ctx.change(values);
  }

  scroller.addEventListener("scroll", paint, { passive: true });
  el.addEventListener("click", onClick);
  el.addEventListener("keydown", onKeydown);
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => {
    layout();
    paint();
  }) : null;
  resize?.observe(scroller);

  return {
    el,
    update(next, nextViewed, vis) {
      const tableChanged = nextViewed.table !== viewed.table || nextViewed.root !== viewed.root;
      st = next;
      viewed = nextViewed;
      view = vis;
      searchText = st.search;
      setColumns();
      if (tableChanged) measured = [];
      if (!measured.length) layout();
      const table = viewed.table;
      selectedRow = rowOfPath(table, st.selected);
      version++;
      for (const col of numeric) {
        col.values = col.spread && viewed.folded ? viewed.folded[col.spread][col.key] : shownValues(table, col.key, vis.shown);
        col.base = col.of ? table.num[col.of][viewed.root] : NaN;
      }
      const active = resolveSort(data.vocab, st.sort_by);
      for (const th of head.children) {
        const t = /** @type {HTMLElement} */ (th);
        if (t.dataset.col === active && t.dataset.sortable) t.setAttribute("aria-sort", st.ascending ? "ascending" : "descending");
        else t.removeAttribute("aria-sort");
      }
      scroller.setAttribute("aria-rowcount", String(vis.rows.length));
      if (selectedRow >= 0 && vis.rows.includes(selectedRow)) scroller.setAttribute("aria-activedescendant", `tp-row-${selectedRow}`);
      else scroller.removeAttribute("aria-activedescendant");
      sizer.style.height = vis.rows.length * ROW_HEIGHT + "px";
      if (tableChanged) scroller.scrollTop = 0;
      // A row selected elsewhere (the Flame, the Top view, Python) is scrolled into view once.
      if (st.selected !== revealed) {
        revealed = st.selected;
        reveal(vis.rows.indexOf(selectedRow));
      }
      paint();
    },
    resized() {
      layout();
      paint();
    },
    destroy() {
      resize?.disconnect();
      scroller.removeEventListener("scroll", paint);
    },
  };
}

// -- the Flame view -----------------------------------------------------------------------------

export const FLAME_ROW = 18;

/**
 * Colours for the canvas, read from the widget's CSS variables (so JupyterLab's light and dark
 * themes apply) with the canvas's own fallbacks.
 * @param {HTMLElement} el
 */
function flamePalette(el) {
  const css = getComputedStyle(el);
  const v = (/** @type {string} */ name, /** @type {string} */ fallback) => css.getPropertyValue(name).trim() || fallback;
  const bg = v("--tp-bg", "#ffffff");
  const dark = luminance(bg) < 0.4;
  return {
    dark,
    bg,
    fg: dark ? "#f0f3f6" : "#1f2328",
    text: "#101418",
    fwd: v("--tp-flame-fwd", dark ? "#6ea8fe" : "#8cb8f0"),
    bwd: v("--tp-flame-bwd", dark ? "#f0a35c" : "#f4b978"),
    other: v("--tp-flame-other", dark ? "#a7adb5" : "#c3c9d1"),
    line: dark ? "#0d1117" : "#ffffff",
    accent: v("--tp-accent", "#1f6feb"),
    selfMark: "rgba(0, 0, 0, 0.28)",
  };
}

/** Relative luminance of a CSS colour in #rgb, #rrggbb or rgb() form (0 dark .. 1 light). @param {string} colour */
export function luminance(colour) {
  let r = 255;
  let g = 255;
  let b = 255;
  const hex = colour.match(/^#([0-9a-f]{3}|[0-9a-f]{6})$/i);
  const rgb = colour.match(/rgba?\(\s*(\d+)[,\s]+(\d+)[,\s]+(\d+)/i);
  if (hex) {
    const s = hex[1].length === 3 ? [...hex[1]].map((c) => c + c).join("") : hex[1];
    [r, g, b] = [0, 2, 4].map((k) => parseInt(s.slice(k, k + 2), 16));
  } else if (rgb) {
    [r, g, b] = [rgb[1], rgb[2], rgb[3]].map(Number);
  }
  return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
}

/**
 * The Flame view: an icicle of the viewed tree on a canvas, sized by a metric, coloured by
 * phase or module type; click zooms in (the top bar or the breadcrumb zooms out), hover gives
 * the numbers, the table's selection and search show here too.
 * @param {Context} ctx @returns {ViewFace}
 */
function createFlame(ctx) {
  const { data } = ctx;
  const crumbs = h("nav", { class: "tp-crumbs", "aria-label": "Zoom path", "data-testid": "flame-crumbs" });
  const metricSelect = /** @type {HTMLSelectElement} */ (h("select", { class: "tp-select", "data-testid": "flame-metric", "aria-label": "Bar width" }));
  for (const m of flameMetrics(data)) metricSelect.append(h("option", { value: m.key, text: m.label }));
  const colourSelect = /** @type {HTMLSelectElement} */ (h("select", { class: "tp-select", "data-testid": "flame-colour", "aria-label": "Bar colour" }));
  for (const c of data.vocab.flame_colours) colourSelect.append(h("option", { value: c, text: FLAME_COLOUR_LABELS[c] || c }));
  const legend = h("span", { class: "tp-legend", "data-testid": "flame-legend" });
  const bar = h("div", { class: "tp-flame-bar" },
    crumbs,
    h("label", { class: "tp-ctl" }, "width ", metricSelect),
    h("label", { class: "tp-ctl" }, "colour ", colourSelect),
    legend);
  const canvas = /** @type {HTMLCanvasElement} */ (h("canvas", { class: "tp-flame-canvas", "data-testid": "flame-canvas", role: "img", "aria-label": "Flame graph of the layer tree" }));
  const tip = h("div", { class: "tp-tip", "data-testid": "flame-tip", hidden: true, role: "tooltip" });
  const scroll = h("div", { class: "tp-flame-scroll", tabindex: "0", "data-testid": "flame" }, canvas);
  // The tooltip lives in the panel, not in the scrolling box, so a short icicle does not clip it.
  const el = h("div", { class: "tp-panel tp-panel-flame", "data-view": "flame" }, bar, scroll, tip);
  /** @type {FlameLayout|null} */
  let layout = null;
  let viewed = viewedTable(data, "");
  /** @type {FullState} */
  let st = ctx.state();
  let zoomRow = 0;
  let metric = flameMetric(data, "cpu_us");

  function draw() {
    const t0 = performance.now();
    const table = viewed.table;
    const width = Math.max(0, scroll.clientWidth);
    layout = flameLayout(table, { root: zoomRow, width, widthColumn: metric.width, showOps: st.show_ops });
    const dpr = globalThis.devicePixelRatio || 1;
    const height = Math.max(layout.levels, 1) * FLAME_ROW;
    canvas.style.width = width + "px";
    canvas.style.height = height + "px";
    canvas.width = Math.round(width * dpr);
    canvas.height = Math.round(height * dpr);
    const g = /** @type {CanvasRenderingContext2D} */ (canvas.getContext("2d"));
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    const pal = flamePalette(el);
    g.fillStyle = pal.bg;
    g.fillRect(0, 0, width, height);
    const font = getComputedStyle(el).fontFamily || "sans-serif";
    g.font = `11px ${font}`;
    g.textBaseline = "middle";
    const charWidth = g.measureText("abcdefghijklmnopqrstuvwxyz0123456789").width / 36 || 6;
    const phases = phaseColumns(table, metric);
    const colouring = flameColouring(table, st.flame_colour);
    const byType = colouring === "type";
    const deltas = colouring === "delta" ? flameDeltas(table, metric) : null;
    let faster = 0;
    let slower = 0;
    const match = makeMatcher(table, st.search);
    const selected = rowOfPath(table, st.selected);
    const selfValues = metric.self ? table.num[table.spec[metric.self].layer_alt || metric.self] : null;
    const widthValues = table.num[metric.width];
    const { node, x, w, level, count } = layout;
    /** @type {Record<string, string>} */
    const colours = { fwd: pal.fwd, bwd: pal.bwd, other: pal.other };
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
      if (deltas) {
        const v = deltas.values[i];
        if (r !== 0 && v < 0) faster++;
        else if (r !== 0 && v > 0) slower++;
        g.fillStyle = deltaColour(v, deltas.scale, pal.dark);
        g.fillRect(x[r], top, rw, FLAME_ROW - 1);
      } else if (byType) {
        const hue = typeHue(table.type[i] || table.vocab.kinds[table.kind[i]]);
        g.fillStyle = `hsl(${hue} ${pal.dark ? "45%" : "60%"} ${pal.dark ? "58%" : "74%"})`;
        g.fillRect(x[r], top, rw, FLAME_ROW - 1);
      } else {
        let at = x[r];
        for (const part of phaseShares(table, i, phases)) {
          g.fillStyle = colours[part.role];
          const pw = rw * part.share;
          g.fillRect(at, top, pw, FLAME_ROW - 1);
          at += pw;
        }
      }
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
    // The table's selection, outlined.
    let outlined = "";
    for (let r = 0; r < count; r++) {
      if (node[r] !== selected) continue;
      g.strokeStyle = pal.accent;
      g.lineWidth = 2;
      g.strokeRect(x[r] + 1, level[r] * FLAME_ROW + 1, Math.max(w[r] - 3, 1), FLAME_ROW - 3);
      outlined = table.path[selected];
    }
    // What was drawn, for tests and for anyone timing it: rectangles, draw time, search and selection.
    el.dataset.drawMs = (performance.now() - t0).toFixed(1);
    el.dataset.rects = String(count);
    el.dataset.matches = String(matches);
    el.dataset.dimmed = String(dimmed);
    el.dataset.selected = outlined;
    el.dataset.faster = String(faster);
    el.dataset.slower = String(slower);
  }

  function fillCrumbs() {
    const table = viewed.table;
    crumbs.replaceChildren();
    const chain = ancestry(table, viewed.root, zoomRow);
    chain.forEach((i, k) => {
      if (k) crumbs.append(h("span", { class: "tp-crumb-sep", text: "›", "aria-hidden": "true" }));
      const last = k === chain.length - 1;
      crumbs.append(h("button", { type: "button", class: "tp-crumb", "data-path": table.path[i], "aria-current": last ? "true" : null, text: table.name[i], title: table.path[i] }));
    });
  }

  function fillLegend() {
    legend.replaceChildren();
    const table = viewed.table;
    const colouring = flameColouring(table, st.flame_colour);
    if (colouring === "type") {
      legend.append(h("span", { class: "tp-legend-note", text: "one colour per module type" }));
    } else if (colouring === "delta") {
      const column = flameDeltas(table, metric).column;
      const pal = flamePalette(el);
      for (const [v, label] of /** @type {[number, string][]} */ ([[-1, "faster"], [1, "slower"]])) {
        const swatch = h("span", { class: "tp-swatch" });
        swatch.style.background = deltaColour(v, 1, pal.dark);
        legend.append(swatch, h("span", { text: label }));
      }
      legend.append(h("span", { class: "tp-legend-note", text: `by ${table.spec[column]?.label || column}, deeper for a bigger change` }));
    } else {
      const phases = phaseColumns(table, metric);
      const roles = phaseRoles(table, phases);
      const items = phases.length ? phases.map((c, k) => [roles[k], table.spec[c].label]) : [["fwd", "forward"], ["bwd", "backward"]];
      const pal = /** @type {Record<string, any>} */ (flamePalette(el));
      for (const [role, label] of items) {
        const swatch = h("span", { class: `tp-swatch tp-swatch-${role}` });
        swatch.style.background = pal[role];
        legend.append(swatch, h("span", { text: label }));
      }
    }
    if (metric.self) legend.append(h("span", { class: "tp-legend-note", text: `dark stripe: ${metric.label}` }));
  }

  /** @param {MouseEvent} event */
  function rectAt(event) {
    if (!layout) return -1;
    const box = canvas.getBoundingClientRect();
    return flameHit(layout, event.clientX - box.left, event.clientY - box.top, FLAME_ROW);
  }

  /** @param {MouseEvent} event */
  function onMove(event) {
    const r = rectAt(event);
    if (r < 0 || !layout) {
      tip.hidden = true;
      return;
    }
    const table = viewed.table;
    const i = layout.node[r];
    const base = table.num[metric.width][zoomRow];
    const lines = [table.path[i]];
    const kind = table.vocab.kinds[table.kind[i]];
    lines.push(table.type[i] ? `${kind} · ${table.type[i]}${table.backward[i] ? " · backward" : ""}` : `${kind}${table.backward[i] ? " · backward" : ""}`);
    const v = table.num[metric.width][i];
    lines.push(`${table.spec[metric.width].label}: ${formatValue(table.spec[metric.width].unit, v)} (${formatPercent(v, base)} of ${table.name[zoomRow]})`);
    for (const c of columnsFor(table)) {
      if (c.type === "name" || c.key === metric.width || !(c.type === "time" || c.key === "flops" || c.key === "calls")) continue;
      const val = table.num[table.spec[c.key].layer_alt || c.key][i];
      if (!Number.isNaN(val) && val !== 0) lines.push(`${c.label}: ${formatValue(c.type, val)}`);
    }
    if (viewed.folded) lines.push(`ran in ${viewed.folded.runs[i]} of ${viewed.folded.count} steps (means per step)`);
    tip.textContent = lines.join("\n");
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
  function onClick(event) {
    const table = viewed.table;
    const crumb = /** @type {HTMLElement|null} */ (/** @type {HTMLElement} */ (event.target).closest(".tp-crumb"));
    if (crumb) {
      const path = /** @type {string} */ (crumb.dataset.path);
      ctx.change({ zoom: rowOfPath(table, path) === viewed.root ? "" : path });
      return;
    }
    if (event.target !== canvas || !layout) return;
    const r = rectAt(event);
    if (r < 0) return;
    const i = layout.node[r];
    scroll.focus({ preventScroll: true });
    if (r === 0) {
      // The top bar is the zoomed node: clicking it zooms out one level.
      const up = i === viewed.root ? viewed.root : table.parent[i];
      ctx.change({ zoom: up === viewed.root ? "" : table.path[up], selected: table.path[i] });
    } else {
      ctx.change({ zoom: table.path[i], selected: table.path[i] });
    }
  }

  /** @param {KeyboardEvent} event */
  function onKeydown(event) {
    if (event.key === "Escape" && zoomRow !== viewed.root) {
      event.preventDefault();
      const up = viewed.table.parent[zoomRow];
      ctx.change({ zoom: up <= viewed.root ? "" : viewed.table.path[up] });
    }
  }

  /** @param {Event} event */
  function onChange(event) {
    if (event.target === metricSelect) ctx.change({ metric: metricSelect.value });
    else if (event.target === colourSelect) ctx.change({ flame_colour: colourSelect.value });
  }

  canvas.addEventListener("mousemove", onMove);
  canvas.addEventListener("mouseleave", () => (tip.hidden = true));
  el.addEventListener("click", onClick);
  el.addEventListener("keydown", onKeydown);
  el.addEventListener("change", onChange);
  let lastWidth = -1;
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => {
    if (scroll.clientWidth !== lastWidth && !el.hidden) {
      lastWidth = scroll.clientWidth;
      draw();
    }
  }) : null;
  resize?.observe(scroll);

  return {
    el,
    update(next, nextViewed) {
      st = next;
      viewed = nextViewed;
      metric = flameMetric(viewed.table, st.metric);
      metricSelect.value = metric.key;
      colourSelect.value = st.flame_colour;
      const z = rowOfPath(viewed.table, st.zoom);
      zoomRow = z > viewed.root && z < viewed.table.end[viewed.root] ? z : viewed.root;
      fillCrumbs();
      fillLegend();
      lastWidth = scroll.clientWidth;
      draw();
    },
    resized() {
      lastWidth = scroll.clientWidth;
      draw();
    },
    destroy() {
      resize?.disconnect();
    },
  };
}

// -- the Top view -----------------------------------------------------------------------------

/**
 * The Top view: the layers that cost the most themselves (self time with their ops folded in,
 * the ops named), and the same summed per module type (prof.by_type()).
 * @param {Context} ctx @returns {ViewFace}
 */
function createTop(ctx) {
  const { data } = ctx;
  const layersBox = h("div", { class: "tp-top-list", role: "list", "data-testid": "top-layers" });
  const typesBox = h("div", { class: "tp-top-list", role: "list", "data-testid": "top-types" });
  const layersTitle = h("h3", { class: "tp-top-title" });
  const typesTitle = h("h3", { class: "tp-top-title" });
  const el = h("div", { class: "tp-panel tp-panel-top", "data-view": "top" },
    h("section", { class: "tp-top-section" }, layersTitle, layersBox),
    h("section", { class: "tp-top-section" }, typesTitle, typesBox));
  let viewed = viewedTable(data, "");

  /**
   * One ranked line: rank, name (its path on hover), a tag, the value with its share and a bar,
   * and a note.
   * @param {number} rank @param {string} name @param {string} title @param {string} tag
   * @param {string} value @param {string} pct @param {number} share @param {string} note
   */
  function line(rank, name, title, tag, value, pct, share, note) {
    const label = h("span", { class: "tp-label" }, h("span", { class: "tp-label-head" }), h("span", { class: "tp-label-tail" }));
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
    ctx.change({ view: "table", selected: path, expanded: expandTo(viewed.table, i, viewed.root, ctx.state().expandedList) });
  }

  el.addEventListener("click", onClick);
  el.addEventListener("dblclick", onOpen);
  el.addEventListener("keydown", onOpen);

  return {
    el,
    update(st, nextViewed) {
      viewed = nextViewed;
      const table = viewed.table;
      const root = viewed.root;
      const selfColumn = topColumn(table, st.metric);
      const spec = table.spec[selfColumn];
      const base = table.num[spec.percent_of || "cpu_us"][root];
      const label = spec.label;
      const match = makeMatcher(table, st.search);
      const top = topLayers(table, root, selfColumn, match ? Infinity : 100).filter((t) => !match || match(t.row)).slice(0, 100);
      layersTitle.textContent = `Layers by ${label} (their ops folded in)${match ? ` · matching “${st.search.trim()}”` : ""}`;
      const selected = rowOfPath(table, st.selected);
      layersBox.replaceChildren(...top.map((t, k) => {
        const i = t.row;
        const ops = t.ops.slice(0, 3).map((o) => `${shortOpName(table, o.row)} ${cellPercent(o.value, t.value) || formatTime(o.value)}`).join(", ");
        const tag = table.vocab.kinds[table.kind[i]] === "module" && table.type[i] !== table.name[i] ? table.type[i] || "" : "";
        const where = table.path[i].startsWith(table.path[root]) && root ? table.path[i].slice(table.path[root].length + 1) : table.path[i];
        const row = line(k + 1, where, `${table.path[i]}\n${label}: ${formatTime(t.value)}${ops ? "\nops: " + ops : ""}\nDouble-click or Enter: show in the table`,
          tag, formatTime(t.value), cellPercent(t.value, base), (100 * t.value) / base, ops ? "ops: " + ops : "");
        row.dataset.path = table.path[i];
        row.tabIndex = 0;
        if (i === selected) row.classList.add("tp-selected");
        return row;
      }));
      const alt = spec.layer_alt || selfColumn;
      const groups = byType(table, root);
      const totalColumn = spec.subtree || "cpu_us";
      typesTitle.textContent = `Module types by ${label} (prof.by_type())`;
      const ranked = groups.filter((g) => g.sums[alt] > 0).sort((a, b) => b.sums[alt] - a.sums[alt]);
      typesBox.replaceChildren(...ranked.map((g, k) => line(k + 1, g.type, `${g.type}: ${g.modules} modules\n${label} (ops folded in): ${formatTime(g.sums[alt])}\n${table.spec[totalColumn].label} (outermost of each): ${formatTime(g.sums[totalColumn])}\ncalls: ${g.sums.calls}`,
        `${g.modules}×`, formatTime(g.sums[alt]), cellPercent(g.sums[alt], base), (100 * g.sums[alt]) / base,
        `${table.spec[totalColumn].label} ${formatTime(g.sums[totalColumn])} · ${g.sums.calls} ${g.sums.calls === 1 ? "call" : "calls"}${viewed.folded ? ` in ${viewed.folded.count} steps` : ""}`)));
      if (!top.length) layersBox.append(h("p", { class: "tp-empty", text: "No layer has self time here." }));
    },
    resized() {},
    destroy() {},
  };
}

// -- the Memory view ----------------------------------------------------------------------------

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
 * The Memory view (offered only with memory=True): allocated memory over the run as a line, the
 * forward/backward/optimizer bands behind it, the peak marked, a readout naming the layer under
 * the cursor, a device picker when there are several. A click on the line, or "Peak layer",
 * opens that layer in the table, selected.
 * @param {Context} ctx @returns {ViewFace}
 */
function createMemory(ctx) {
  const { data } = ctx;
  const memory = /** @type {MemoryData} */ (data.memory);
  const box = h("div", { class: "tp-panel tp-panel-memory tp-memory", "data-view": "memory", "data-testid": "memory" });
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
  const peakButton = h("button", { type: "button", class: "tp-btn", "data-testid": "memory-peak", title: "Open the layer running at the peak in the table", text: "Peak layer" });
  const chart = svg("svg", { class: "tp-mem-chart", "data-testid": "memory-chart", role: "img", height: MEMORY_HEIGHT });
  const head = h("div", { class: "tp-mem-head" }, picker, legend, peakButton, readout);
  box.append(head, chart);
  /** @type {MemoryScales} */
  let scales;
  /** @type {MemorySeries} */
  let series;
  /** @type {SVGElement} */
  let cursor;
  let drawnWidth = -1;

  /** Open row i in the table (the whole run's), selected, its ancestors expanded. @param {number} i */
  function select(i) {
    const st = ctx.state();
    /** @type {Record<string, any>} */
    const values = { view: "table", step: "", selected: data.path[i], expanded: expandTo(data, i, 0, st.expandedList) };
    // A row the threshold or the search hides is shown: the user asked for it.
    if (!visibleRows(data, { ...st, expanded: new Set(values.expanded), root: 0 }).rows.includes(i)) Object.assign(values, { min_pct: 0, search: "" });
    ctx.change(values);
  }

  function idle() {
    const p = series.peak;
    readout.textContent = p
      ? `${series.name} peak ${formatBytes(p.v)} at ${formatTime(p.t)} in ${data.path[p.row]} (${p.phase}) · click the line to open a layer`
      : series.name;
  }

  function draw() {
    series = memory.devices[device];
    const width = Math.max(240, Math.floor(box.clientWidth) || 800);
    drawnWidth = width;
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
    const rect = chart.getBoundingClientRect();
    const x = event.clientX - rect.left;
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
    if (i >= 0 && series.row[i] > 0) select(series.row[i]);
  }
  /** @param {Event} event */
  function headClick(event) {
    const button = /** @type {HTMLElement} */ (event.target).closest("button");
    if (!button) return;
    if (button === peakButton) {
      if (series.peak && series.peak.row > 0) select(series.peak.row);
      return;
    }
    device = Number(button.dataset.device);
    draw();
  }
  chart.addEventListener("mousemove", move);
  chart.addEventListener("mouseleave", move);
  chart.addEventListener("click", click);
  head.addEventListener("click", headClick);

  return {
    el: box,
    update() {
      if (drawnWidth < 0 || Math.floor(box.clientWidth) !== drawnWidth) draw();
    },
    resized() {
      if (!box.hidden && Math.floor(box.clientWidth) !== drawnWidth) draw();
    },
    destroy() {
      chart.removeEventListener("mousemove", move);
      chart.removeEventListener("mouseleave", move);
      chart.removeEventListener("click", click);
      head.removeEventListener("click", headClick);
    },
  };
}

/**
 * The views by name: the switcher offers each view the vocabulary lists that has a renderer
 * here. Adding a view = its name in _vocab.VIEWS and a `(ctx) => ViewFace` here.
 * @type {Record<string, (ctx: Context) => ViewFace>}
 */
export const VIEW_RENDERERS = { table: createTable, flame: createFlame, top: createTop, memory: createMemory };

// -- the widget ---------------------------------------------------------------------------------

/**
 * Whether this payload offers `view`: one its vocabulary lists (a comparison lists fewer), with a
 * renderer here, and for Memory, a timeline.
 * @param {Data} data @param {string} view
 */
function offersView(data, view) {
  return data.vocab.views.includes(view) && !!VIEW_RENDERERS[view] && (view !== "memory" || !!data.memory);
}

/**
 * The widget's shared elements, built once per payload.
 * @typedef {object} Parts
 * @property {HTMLElement} summary
 * @property {HTMLElement} switcher
 * @property {HTMLSelectElement|null} step
 * @property {HTMLInputElement} slider
 * @property {HTMLElement} sliderValue
 * @property {HTMLInputElement} ops
 * @property {HTMLInputElement} search
 * @property {HTMLSelectElement} sort
 * @property {HTMLElement} rowCount
 * @property {HTMLElement} note
 * @property {HTMLElement} noteText
 * @property {HTMLElement} body
 */

/**
 * Build: the summary, the controls, the hidden-rows note and the body the views go in.
 * @param {HTMLElement} root @param {Data} data
 * @returns {Parts}
 */
function build(root, data) {
  root.style.setProperty("--tp-row", ROW_HEIGHT + "px");
  const summary = h("div", { class: "tp-summary", "data-testid": "summary" });
  buildSummary(summary, data);
  const switcher = h("div", { class: "tp-switch", role: "group", "aria-label": "View" });
  for (const view of data.vocab.views) {
    if (offersView(data, view)) switcher.append(h("button", { type: "button", class: "tp-switch-btn", "data-view": view, "data-testid": `view-${view}`, text: viewLabel(view) }));
  }
  let step = null;
  const steps = stepRows(data);
  if (steps.length) {
    step = /** @type {HTMLSelectElement} */ (h("select", { class: "tp-select", "data-testid": "step", "aria-label": "Part of the run viewed" },
      h("option", { value: "", text: "whole run" })));
    if (data.folded) step.append(h("option", { value: data.vocab.all_steps, text: `all ${data.folded.count} steps (mean)` }));
    for (const row of steps) {
      const number = data.name[row].slice(data.vocab.step_prefix.length);
      step.append(h("option", { value: number, text: `step #${number}` }));
    }
  }
  const slider = /** @type {HTMLInputElement} */ (h("input", { type: "range", min: "0", max: String(SLIDER_STEPS), step: "1", "data-testid": "min-pct", "aria-label": "Minimum percent of CPU total" }));
  const sliderValue = h("output", { class: "tp-slider-value", "data-testid": "min-pct-value" });
  const ops = /** @type {HTMLInputElement} */ (h("input", { type: "checkbox", "data-testid": "show-ops" }));
  const search = /** @type {HTMLInputElement} */ (h("input", { type: "search", "data-testid": "search", "data-for": "table flame top", placeholder: "Find: name, glob * ?, or path:…", "aria-label": "Find rows by name (glob * ?), or by path after path:", spellcheck: "false" }));
  const sort = /** @type {HTMLSelectElement} */ (h("select", { class: "tp-select", "data-testid": "sort", "aria-label": "Sort siblings by" }));
  if (data.spec.exec_order) sort.append(h("option", { value: "exec_order", text: "execution order" }));
  sort.append(h("option", { value: "name", text: "name (natural)" }));
  for (const col of columnsFor(data)) if (col.type !== "name") sort.append(h("option", { value: col.key, text: col.label }));
  const rowCount = h("span", { class: "tp-count", "data-testid": "row-count", "aria-live": "polite" });
  const controls = h("div", { class: "tp-controls" },
    switcher,
    ...(step ? [h("label", { class: "tp-ctl", title: "View one step (percentages are of that step), every step folded into one tree (mean, min and max per row), or the whole run" }, "step ", step)] : []),
    // data-for: the views a control acts on (hidden in the others, so none sits there doing nothing).
    h("label", { class: "tp-ctl", "data-for": "table", title: "Hide rows whose CPU total is below this share of the viewed root's (whatever the sort); the ancestors of shown rows stay. Logarithmic: 0, then 0.01% to 100%." }, "min ", slider, sliderValue, h("span", { class: "tp-ctl-unit", text: "of CPU total" })),
    h("label", { class: "tp-ctl", "data-for": "table flame", title: "Show aten ops and kernels under their layers. Numbers never change silently: a layer's Self counts every op row that is not shown" }, ops, " aten ops"),
    search,
    h("label", { class: "tp-ctl", "data-for": "table" }, "sort ", sort),
    h("button", { type: "button", class: "tp-btn", "data-for": "table", "data-testid": "expand-all", text: "Expand all" }),
    h("button", { type: "button", class: "tp-btn", "data-for": "table", "data-testid": "collapse-all", text: "Collapse all" }),
    h("button", { type: "button", class: "tp-btn", "data-testid": "export-csv", title: "Download every row of the part of the run viewed as CSV (the DataFrame's columns), whatever is expanded or filtered", text: "Export CSV" }),
    rowCount);
  rowCount.dataset.for = "table";
  const noteText = h("span", { "data-testid": "hidden-note" });
  const note = h("div", { class: "tp-note", hidden: true }, noteText, " ", h("button", { type: "button", class: "tp-link", "data-testid": "show-hidden", text: "Show them" }));
  const body = h("div", { class: "tp-body" });
  root.replaceChildren(summary, controls, note, body);
  return { summary, switcher, step, slider, sliderValue, ops, search, sort, rowCount, note, noteText, body };
}

/**
 * The model's view state, read fresh each time; `expanded` as a Set, rebuilt only when the list
 * itself changed.
 * @param {Model} model
 * @returns {() => FullState}
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
      expandedList: list,
      view: model.get("view") || "table",
      step: String(model.get("step") ?? ""),
      selected: model.get("selected") || "",
      metric: model.get("metric") || "cpu_us",
      flame_colour: model.get("flame_colour") || "phase",
      zoom: model.get("zoom") || "",
    };
  };
}

/**
 * Mounts the widget into `root` (build, views, bind); returns a function that removes listeners
 * and observers.
 * @param {HTMLElement} root @param {Model} model @param {Data} data
 */
function mount(root, model, data) {
  const parts = build(root, data);
  const state = stateReader(model);
  /** @param {Record<string, any>} values */
  function change(values) {
    for (const [k, v] of Object.entries(values)) model.set(k, v);
    model.save_changes();
  }
  /** @type {Context} */
  const ctx = { root, model, data, state, change };
  /** @type {Record<string, ViewFace>} */
  const faces = {};
  /** @param {string} view */
  function face(view) {
    if (!faces[view]) {
      faces[view] = VIEW_RENDERERS[view](ctx);
      parts.body.append(faces[view].el);
    }
    return faces[view];
  }

  function redraw() {
    const st = state();
    const { slider, sliderValue, ops, search, rowCount, sort, step, note, noteText, switcher } = parts;
    const viewed = viewedTable(data, st.step);
    const vstate = { ...st, root: viewed.root };
    const vis = visibleRows(viewed.table, vstate);
    slider.value = String(pctToSlider(st.min_pct || 0));
    sliderValue.textContent = pctLabel(st.min_pct || 0);
    ops.checked = !!st.show_ops;
    if (search.value !== st.search) search.value = st.search;
    const active = resolveSort(data.vocab, st.sort_by);
    if (![...sort.options].some((o) => o.value === active)) sort.append(h("option", { value: active, text: data.spec[active]?.label || active }));
    sort.value = active;
    if (step) step.value = st.step;
    const view = offersView(data, st.view) ? st.view : "table";
    for (const b of switcher.children) b.setAttribute("aria-pressed", String(/** @type {HTMLElement} */ (b).dataset.view === view));
    root.dataset.view = view;
    for (const control of root.querySelectorAll(".tp-controls [data-for]")) {
      /** @type {HTMLElement} */ (control).hidden = !(/** @type {HTMLElement} */ (control).dataset.for || "").split(" ").includes(view);
    }
    const hidden = hiddenCounts(viewed.table, vstate, vis.shown);
    const text = view === "table" ? hiddenNote(hidden, st.min_pct || 0, st.search) : "";
    note.hidden = !text;
    noteText.textContent = text;
    note.title = hidden.ops && !st.show_ops ? `${hidden.ops} op and kernel rows are folded into their layers (tick “aten ops” to list them)` : "";
    rowCount.textContent = `${vis.rows.length} of ${viewed.table.end[viewed.root] - viewed.root} rows`;
    const current = face(view);
    for (const [name, f] of Object.entries(faces)) f.el.hidden = name !== view;
    current.update(st, viewed, vis);
  }

  /** @param {Event} event */
  function onClick(event) {
    const target = /** @type {HTMLElement} */ (event.target);
    const viewButton = /** @type {HTMLElement|null} */ (target.closest(".tp-switch-btn"));
    if (viewButton) return change({ view: viewButton.dataset.view });
    const button = /** @type {HTMLElement|null} */ (target.closest("button[data-testid]"));
    if (!button || button.closest(".tp-body")) return;
    const st = state();
    const viewed = viewedTable(data, st.step);
    const action = button.dataset.testid;
    if (action === "expand-all") change({ expanded: allExpandable(viewed.table) });
    else if (action === "collapse-all") change({ expanded: [] });
    else if (action === "show-hidden") change({ min_pct: 0, search: "" });
    else if (action === "export-csv") exportCSV(viewed);
  }

  /** @param {ReturnType<typeof viewedTable>} viewed */
  function exportCSV(viewed) {
    const rows = [];
    for (let i = viewed.root; i < viewed.table.end[viewed.root]; i++) rows.push(i);
    const blob = new Blob([toCSV(viewed.table, rows)], { type: "text/csv;charset=utf-8" });
    const url = URL.createObjectURL(blob);
    const link = h("a", { href: url, download: exportFileName(data, state().step), hidden: true });
    root.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  }

  /** @param {Event} event */
  function onInput(event) {
    const { slider, search } = parts;
    if (event.target === slider) {
      change({ min_pct: sliderToPct(Number(slider.value)) });
    } else if (event.target === search) {
      const text = search.value;
      /** @type {Record<string, any>} */
      const values = { search: text };
      if (text.trim()) {
        const st = state();
        const viewed = viewedTable(data, st.step);
        const list = st.expandedList;
        const opened = expandMatches(viewed.table, { ...st, search: text, root: viewed.root }, list);
        if (opened !== list) values.expanded = opened;
      }
      change(values);
    }
  }

  /** @param {Event} event */
  function onChange(event) {
    const { ops, sort, step } = parts;
    const st = state();
    if (event.target === ops) {
      /** @type {Record<string, any>} */
      const values = { show_ops: ops.checked };
      if (ops.checked) {
        const viewed = viewedTable(data, st.step);
        const rows = visibleRows(viewed.table, { ...st, root: viewed.root }).rows;
        const opened = expandLeafLayers(viewed.table, rows, st.expandedList);
        if (opened !== st.expandedList) values.expanded = opened;
      }
      change(values);
    } else if (event.target === sort) {
      const key = sort.value;
      change({ sort_by: key, ascending: key === "exec_order" || isTextColumn(data, key) });
    } else if (step && event.target === step) {
      // A step opens like the whole run does: two levels below its root.
      const viewed = viewedTable(data, step.value);
      change({ step: step.value, zoom: "", expanded: withPaths(st.expandedList, defaultExpanded(viewed.table, !!st.show_ops, viewed.root)) });
    }
  }

  /**
   * Keys typed in the widget stay in the widget: JupyterLab and Notebook 7 run their command
   * shortcuts (a, b, d d, ...) from a keydown listener on the document, so without this a key
   * pressed on a row inserts or deletes cells. (`data-lm-suppress-shortcuts` tells Lumino the
   * same where the event reaches it first.)
   * @param {Event} event
   */
  function keep(event) {
    event.stopPropagation();
  }

  // Model changes can come in bursts (several traits from one click or one Python cell).
  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    queueMicrotask(() => {
      pending = false;
      redraw();
    });
  }
  const events = data.vocab.state.map((k) => "change:" + k.name);
  for (const e of events) model.on(e, schedule);
  root.setAttribute("data-lm-suppress-shortcuts", "true");
  const listeners = /** @type {[string, (e: any) => void][]} */ ([
    ["click", onClick], ["input", onInput], ["change", onChange], ["keydown", keep], ["keyup", keep], ["keypress", keep],
  ]);
  for (const [type, fn] of listeners) root.addEventListener(type, fn);
  // The output area may attach or resize the widget after render: lay the view out again.
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => faces[state().view]?.resized()) : null;
  resize?.observe(root);
  redraw();
  return () => {
    for (const e of events) model.off(e, schedule);
    resize?.disconnect();
    for (const [type, fn] of listeners) root.removeEventListener(type, fn);
    for (const f of Object.values(faces)) f.destroy();
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
