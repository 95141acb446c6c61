// @ts-check
// The payload (src/torchprof/_views/payload.py) decoded into column arrays once, and what reads a
// decoded table's columns. The payload carries the vocabulary (column specs, roles, kinds, state
// keys, views): no module of the front end spells a column, a kind, a state key or a view again.

/** @import { Data, Vocab, Payload } from "./types.js" */

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
  data.fields = spec;
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
  for (const c of vocab.number_columns) {
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
  for (const c of vocab.text_columns) {
    const values = spec.text?.[c];
    text[c] = values && values.length ? values : new Array(n).fill(null);
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
  const R = vocab.roles;
  const empty = new Array(n).fill(null);
  for (let i = n - 1; i >= 0; i--) {
    const last = childStart[i + 1] > childStart[i] ? childIndex[childStart[i + 1] - 1] : -1;
    end[i] = last < 0 ? i + 1 : end[last];
  }
  return {
    n, parent, kind, backward, depth, end, path, name, num, allNaN, childStart, childIndex,
    text,
    type: text[R.type] || empty, shapes: text[R.shapes] || empty, source: text[R.source] || empty,
    vocab,
    roles: R,
    spec: Object.fromEntries(vocab.columns.map((c) => [c.name, c])),
    layerCodes: new Set(vocab.layer_kinds.map((k) => vocab.kinds.indexOf(k))),
    moduleCode: vocab.kinds.indexOf(vocab.module_kind),
    stepCode: vocab.kinds.indexOf(vocab.step_kind),
    summary: {}, summaryItems: [], steps: [],
    cache: {},
    folded: null,
    memory: null,
    fields: {},
  };
}

/**
 * Numeric columns the payload carries (depth is derived from the parents).
 * @param {Vocab} vocab
 */
export function numberColumns(vocab) {
  return vocab.number_columns;
}

// -- reading a decoded table ----------------------------------------------------------------------

/** A column of text (or anything else that is not a number): sorted in natural order. @param {Data} data @param {string} key */
export function isTextColumn(data, key) {
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
  if (key in data.text) return data.text[key];
  const R = data.roles;
  if (key === R.name) return data.name;
  if (key === R.path) return data.path;
  if (key === R.depth) return Float64Array.from(data.depth);
  if (key === R.kind) return Array.from(data.kind, (k) => data.vocab.kinds[k]);
  throw new Error(`unknown column ${key}`);
}

/**
 * A value made once per table and kept (lower-cased text, natural sort keys, ...).
 * @template T @param {Data} data @param {string} key @param {() => T} make @returns {T}
 */
export function cached(data, key, make) {
  if (!(key in data.cache)) data.cache[key] = make();
  return data.cache[key];
}

/** @param {Data} data @param {string} key @returns {(string|null)[]} */
export function lowered(data, key) {
  return cached(data, "lower:" + key, () => Array.from(/** @type {ArrayLike<any>} */ (column(data, key)), (v) => (v === null || v === undefined ? null : String(v).toLowerCase())));
}
