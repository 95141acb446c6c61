// torchprof's front end, bundled by js/build.mjs from js/src/ (esbuild): edit the sources, then `npm run build` in js/.
var __defProp = Object.defineProperty;
var __export = (target, all) => {
  for (var name in all)
    __defProp(target, name, { get: all[name], enumerable: true });
};

// src/format.js
function missing(v) {
  return v === null || v === void 0 || Number.isNaN(v);
}
function pyFixed(x, digits) {
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
function sig(v) {
  const a = Math.abs(v);
  if (a >= 100) return pyFixed(v, 0);
  if (a >= 10) return pyFixed(v, 1);
  return pyFixed(v, 2);
}
function formatTime(v) {
  if (missing(v)) return "-";
  const a = Math.abs(v);
  if (a >= 1e6) return sig(v / 1e6) + "s";
  if (a >= 1e3) return sig(v / 1e3) + "ms";
  return sig(v) + "µs";
}
function formatBytes(v) {
  if (missing(v)) return "-";
  const a = Math.abs(v);
  for (
    const [unit, scale] of
    /** @type {[string, number][]} */
    [["GB", 1024 ** 3], ["MB", 1024 ** 2], ["KB", 1024]]
  ) {
    if (a >= scale) return `${sig(v / scale)} ${unit}`;
  }
  return `${pyFixed(v, 0)} B`;
}
function formatCount(v) {
  if (missing(v)) return "-";
  const a = Math.abs(v);
  for (
    const [unit, scale] of
    /** @type {[string, number][]} */
    [["T", 1e12], ["G", 1e9], ["M", 1e6], ["k", 1e3]]
  ) {
    if (a >= scale) return sig(v / scale) + unit;
  }
  return pyFixed(v, 0);
}
function formatRate(v) {
  return missing(v) ? "-" : formatCount(v) + "FLOP/s";
}
function formatPercent(part, whole) {
  if (missing(part) || missing(whole) || !whole) return "";
  const pct = 100 * part / whole;
  return (Math.abs(pct) >= 10 || pct === 0 ? pyFixed(pct, 0) : pyFixed(pct, 1)) + "%";
}
function cellPercent(part, whole) {
  const text = formatPercent(part, whole);
  return /^-?0(\.0)?%$/.test(text) ? "" : text;
}
function formatFraction(v) {
  if (missing(v)) return "-";
  const pct = 100 * v;
  if (pct === 0 || Math.abs(pct) >= 0.01) return sig(pct) + "%";
  const digits = 1 - Math.floor(Math.log10(Math.abs(pct)));
  if (digits > 6) return (pct > 0 ? "<" : ">-") + "0.000001%";
  return pyFixed(pct, digits) + "%";
}
function formatValue(unit, v) {
  if (unit === "time") return formatTime(v);
  if (unit === "bytes") return formatBytes(v);
  if (unit === "count") return formatCount(v);
  if (unit === "fraction") return formatFraction(v);
  return missing(v) ? "-" : String(v);
}

// src/dom.js
function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === void 0 || v === false) continue;
    if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  node.append(...children);
  return node;
}
var svgNamespace = null;
function svg(tag, attrs) {
  if (svgNamespace === null) {
    const template = document.createElement("template");
    template.innerHTML = "<svg></svg>";
    svgNamespace = /** @type {Element} */
    template.content.firstElementChild.namespaceURI;
  }
  const node = (
    /** @type {SVGElement} */
    document.createElementNS(svgNamespace, tag)
  );
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}
function measureTexts(host, className, texts) {
  const box = h("div", { class: "tp-measure", "aria-hidden": "true" });
  const spans = texts.map((t) => h("span", { class: className, text: t }));
  box.append(...spans);
  host.append(box);
  const widths = spans.map((s) => s.getBoundingClientRect().width);
  box.remove();
  return widths;
}
var exactFormat = null;
function exactTitle(v, unit) {
  exactFormat ??= new Intl.NumberFormat("en-US", { maximumFractionDigits: 3 });
  return missing(v) ? "" : `${exactFormat.format(v)} ${unit}`;
}
function labelElement() {
  return h("span", { class: "tp-label" });
}
function fillLabel(label, name, range) {
  if (!range || range[1] <= range[0]) {
    if (label.childNodes.length !== 1 || label.textContent !== name) label.textContent = name;
    return;
  }
  const [a, b] = range;
  label.replaceChildren(...[name.slice(0, a), h("mark", { text: name.slice(a, b) }), name.slice(b)].filter((part) => part !== ""));
}
function typeTag(data, i) {
  return data.kind[i] === data.moduleCode && data.type[i] !== data.name[i] ? data.type[i] || "" : "";
}

// src/payload.js
var FORMAT = "torchprof-1";
var MAGIC = [84, 80, 70, 49];
async function inflate(bytes) {
  const stream = new Blob([
    /** @type {BlobPart} */
    bytes
  ]).stream().pipeThrough(new DecompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}
function asBytes(src) {
  if (src instanceof Uint8Array) return src;
  if (src instanceof ArrayBuffer) return new Uint8Array(src);
  if (ArrayBuffer.isView(src)) return new Uint8Array(src.buffer, src.byteOffset, src.byteLength);
  return null;
}
function isRaw(bytes) {
  return MAGIC.every((b, k) => bytes[k] === b);
}
async function loadPayload(src) {
  const bytes = asBytes(src);
  if (bytes === null) return decodePayload(src);
  return decodePayload(isRaw(bytes) ? bytes : await inflate(bytes));
}
function decodePayload(src) {
  const bytes = asBytes(src);
  let spec = src;
  let base = 0;
  if (bytes !== null) {
    if (!isRaw(bytes)) throw new Error("not a torchprof payload");
    const headerLength = new DataView(bytes.buffer, bytes.byteOffset + 4, 4).getUint32(0, true);
    spec = JSON.parse(new TextDecoder().decode(bytes.subarray(8, 8 + headerLength)));
    base = Math.ceil((8 + headerLength) / 8) * 8;
  }
  if (!spec || spec.format !== FORMAT || !spec.vocab) throw new Error("not a torchprof payload");
  const array = (ref, Type, n) => {
    if (Array.isArray(ref)) return Type.from(ref, (v) => v === null ? NaN : v);
    if (ref && typeof ref === "object" && "const" in ref) return new Type(n).fill(ref.const === null ? NaN : ref.const);
    const offset = (
      /** @type {Uint8Array} */
      bytes.byteOffset + base + ref.offset
    );
    const buffer = (
      /** @type {Uint8Array} */
      bytes.buffer
    );
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
    const numbers = (refs) => Object.fromEntries(Object.entries(refs || {}).map(([c, ref]) => [
      c,
      /** @type {Float64Array} */
      array(ref, Float64Array, f.n)
    ]));
    const table = decodeTable(f, spec.vocab, array);
    table.summary = { name: table.name[0] };
    data.folded = { table, low: numbers(f.low), high: numbers(f.high), runs: f.runs, count: f.count };
  }
  return data;
}
function decodeTable(spec, vocab, array) {
  const n = spec.n;
  const parent = array(spec.parent, Int32Array, n);
  const flags = array(spec.flags, Uint8Array, n);
  const num = {};
  const allNaN = {};
  for (const c of vocab.number_columns) {
    const ref = spec.num[c];
    if (ref === void 0 || ref && typeof ref === "object" && "const" in ref) {
      const v = ref === void 0 || ref.const === null ? NaN : ref.const;
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
  const text = {};
  for (const c of vocab.text_columns) {
    const values = spec.text?.[c];
    text[c] = values && values.length ? values : new Array(n).fill(null);
  }
  const childStart = new Int32Array(n + 1);
  for (let i = 1; i < n; i++) childStart[parent[i] + 1]++;
  for (let i = 0; i < n; i++) childStart[i + 1] += childStart[i];
  const fill = childStart.slice(0, n);
  const childIndex = new Int32Array(Math.max(0, n - 1));
  for (let i = 1; i < n; i++) childIndex[fill[parent[i]]++] = i;
  const end = new Int32Array(n);
  const R = vocab.roles;
  const empty = new Array(n).fill(null);
  for (let i = n - 1; i >= 0; i--) {
    const last = childStart[i + 1] > childStart[i] ? childIndex[childStart[i + 1] - 1] : -1;
    end[i] = last < 0 ? i + 1 : end[last];
  }
  return {
    n,
    parent,
    kind,
    backward,
    depth,
    end,
    path,
    name,
    num,
    allNaN,
    childStart,
    childIndex,
    text,
    type: text[R.type] || empty,
    shapes: text[R.shapes] || empty,
    source: text[R.source] || empty,
    vocab,
    roles: R,
    spec: Object.fromEntries(vocab.columns.map((c) => [c.name, c])),
    layerCodes: new Set(vocab.layer_kinds.map((k) => vocab.kinds.indexOf(k))),
    moduleCode: vocab.kinds.indexOf(vocab.module_kind),
    stepCode: vocab.kinds.indexOf(vocab.step_kind),
    summary: {},
    summaryItems: [],
    steps: [],
    cache: {},
    folded: null,
    memory: null,
    fields: {}
  };
}
function numberColumns(vocab) {
  return vocab.number_columns;
}
function isTextColumn(data, key) {
  const spec = data.spec[key];
  return spec !== void 0 && spec.dtype !== "float" && spec.dtype !== "int";
}
function column(data, key) {
  if (key in data.num) return data.num[key];
  if (key in data.text) return data.text[key];
  const R = data.roles;
  if (key === R.name) return data.name;
  if (key === R.path) return data.path;
  if (key === R.depth) return Float64Array.from(data.depth);
  if (key === R.kind) return Array.from(data.kind, (k) => data.vocab.kinds[k]);
  throw new Error(`unknown column ${key}`);
}
function cached(data, key, make) {
  if (!(key in data.cache)) data.cache[key] = make();
  return data.cache[key];
}
function lowered(data, key) {
  return cached(data, "lower:" + key, () => Array.from(
    /** @type {ArrayLike<any>} */
    column(data, key),
    (v) => v === null || v === void 0 ? null : String(v).toLowerCase()
  ));
}

// src/search.js
var REGEX_SYNTAX = /[\\^$.*+?()[\]{}|/]/g;
var CLASS_SPECIAL = /[\\\]\-^[]/g;
function globToRegExp(pat) {
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
        for (; ; ) {
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
          if (
            /** @type {string} */
            chunks[m - 1].at(-1) > chunks[m][0]
          ) {
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
var isGlob = (p) => /[*?[]/.test(p);
function textTest(pattern) {
  if (!isGlob(pattern)) return (t) => t.includes(pattern);
  const re = globToRegExp(pattern);
  return (t) => re.test(t);
}
function typeTest(pattern) {
  if (!isGlob(pattern)) return (t) => t === pattern;
  const re = globToRegExp(pattern);
  return (t) => re.test(t);
}
function pathTest(pattern) {
  if (!isGlob(pattern)) return (t) => t.includes(pattern);
  const re = globToRegExp(pattern);
  return (t) => {
    if (re.test(t)) return true;
    for (let k = 0; k < t.length; k++) if ((t[k] === "." || t[k] === "/") && re.test(t.slice(k + 1))) return true;
    return false;
  };
}
function parseSearch(vocab, search) {
  let patterns = search;
  if (typeof search === "string") patterns = search.trim() ? [search] : [];
  const prefix = vocab.path_search;
  return (
    /** @type {string[]} */
    (patterns || []).map((raw) => {
      const p = raw.toLowerCase();
      if (p.startsWith(prefix)) {
        const pattern = p.slice(prefix.length).trim();
        const test = pathTest(pattern);
        return { onPath: true, pattern, test, ofType: test };
      }
      return { onPath: false, pattern: p, test: textTest(p), ofType: typeTest(p) };
    })
  );
}
function makeMatcher(data, search) {
  const tests = parseSearch(data.vocab, search);
  if (tests.length === 0) return null;
  const names = lowered(data, data.roles.name);
  const paths = tests.some((t) => t.onPath) ? lowered(data, data.roles.path) : names;
  const types = data.roles.type ? lowered(data, data.roles.type) : [];
  const module = data.moduleCode;
  return (i) => tests.some((t) => {
    if (t.onPath) return t.test(
      /** @type {string} */
      paths[i]
    );
    if (t.test(
      /** @type {string} */
      names[i]
    )) return true;
    const type = data.kind[i] === module ? types[i] : null;
    return typeof type === "string" && t.ofType(type);
  });
}
function matchesType(vocab, search, type) {
  if (!type) return false;
  const lower = type.toLowerCase();
  return parseSearch(vocab, search).some((t) => !t.onPath && t.ofType(lower));
}
function matchRange(vocab, search, name, path) {
  const lower = name.toLowerCase();
  for (const t of parseSearch(vocab, search)) {
    if (t.onPath) {
      if (path === void 0 || !t.pattern || !t.test(path.toLowerCase())) continue;
      const p = path.toLowerCase();
      const nameAt = p.endsWith(lower) ? p.length - lower.length : -1;
      const at = isGlob(t.pattern) ? -1 : p.lastIndexOf(t.pattern);
      if (at >= 0 && nameAt >= 0 && at + t.pattern.length > nameAt) return [Math.max(0, at - nameAt), Math.min(name.length, at + t.pattern.length - nameAt)];
      return [0, name.length];
    }
    if (!isGlob(t.pattern)) {
      const at = lower.indexOf(t.pattern);
      if (at >= 0 && t.pattern.length) return [at, at + t.pattern.length];
    } else if (t.test(lower)) {
      return [0, name.length];
    }
  }
  return null;
}

// src/rows.js
function resolveSort(vocab, key) {
  const fallback = stateDefaults(vocab).sort_by;
  if (Array.isArray(key)) key = key[0];
  if (!key) return fallback;
  key = vocab.sort_aliases[key] || key;
  return vocab.columns.some((c) => c.name === key && c.sortable) ? key : fallback;
}
function sortsAscending(data, key) {
  return isTextColumn(data, key) || key === data.roles.order;
}
function stateDefaults(vocab) {
  return Object.fromEntries(vocab.state.map((k) => [k.name, k.default]));
}
function selectRows(data, state) {
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
      if (Number.isNaN(v) || 100 * Math.abs(v) / Math.abs(base) < minPct) continue;
    }
    if (match && !match(i)) continue;
    shown[i] = 1;
  }
  for (let i = end - 1; i > root; i--) if (shown[i]) shown[parent[i]] = 1;
  return shown;
}
function shownValues(data, name, shown) {
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
function naturalKey(text) {
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
function compareNatural(a, b) {
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
function compareCodePoints(a, b) {
  const x = Array.from(a);
  const y = Array.from(b);
  const m = Math.min(x.length, y.length);
  for (let k = 0; k < m; k++) {
    if (x[k] !== y[k]) return (
      /** @type {number} */
      x[k].codePointAt(0) - /** @type {number} */
      y[k].codePointAt(0)
    );
  }
  return x.length - y.length;
}
function isStepRow(data, i) {
  return data.kind[i] === data.stepCode && data.name[i].startsWith(data.vocab.step_prefix);
}
function siblingCompare(data, key, ascending, shown) {
  const sign = ascending ? 1 : -1;
  if (isTextColumn(data, key)) {
    const text = column(data, key);
    const keys = cached(data, "natural:" + key, () => Array.from(
      /** @type {ArrayLike<any>} */
      text,
      (v) => v === null || v === void 0 ? null : naturalKey(String(v))
    ));
    return {
      compare: (a, b) => sign * compareNatural(
        /** @type {any} */
        keys[a],
        /** @type {any} */
        keys[b]
      ),
      present: (i) => keys[i] !== null
    };
  }
  const order = key in data.num ? shownValues(data, key, shown) : (
    /** @type {Float64Array} */
    column(data, key)
  );
  return {
    compare: (a, b) => {
      const va = order[a];
      const vb = order[b];
      return ascending ? va - vb : vb - va;
    },
    present: (i) => !Number.isNaN(order[i])
  };
}
function visibleRows(data, state) {
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
  const exec = data.num[data.roles.order];
  const order = (kids) => {
    const steps = kids.filter((k) => isStepRow(data, k));
    const rest = steps.length ? kids.filter((k) => !isStepRow(data, k)) : kids;
    const have = rest.filter(present);
    have.sort(compare);
    if (have.length < rest.length) {
      for (const k of rest) if (!present(k)) have.push(k);
    }
    if (!steps.length) return have;
    if (exec) steps.sort((a, b) => exec[a] - exec[b]);
    return steps.concat(have);
  };
  const rows = [];
  const stack = [root];
  while (stack.length) {
    const i = (
      /** @type {number} */
      stack.pop()
    );
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
function hiddenCounts(data, state, shown = selectRows(data, state)) {
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
    else if (usePct && (Number.isNaN(values[i]) || 100 * Math.abs(values[i]) / Math.abs(base) < minPct)) below++;
    else unmatched++;
  }
  return { below, unmatched, ops };
}

// src/tree.js
function stepRows(data) {
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
  return exec ? out.sort((a, b) => exec[a] - exec[b]) : [];
}
function viewedTable(data, step) {
  if (step && step === data.vocab.all_steps && data.folded) return { table: data.folded.table, root: 0, folded: data.folded };
  if (step) {
    const name = data.vocab.step_prefix + step;
    for (const row of stepRows(data)) if (data.name[row] === name) return { table: data, root: row, folded: null };
  }
  return { table: data, root: 0, folded: null };
}
function rowOfPath(data, path) {
  if (!path) return -1;
  const index = cached(data, "rowOfPath", () => new Map(data.path.map((p, i) => [p, i])));
  return index.get(path) ?? -1;
}
function defaultExpanded(data, showOps, root = 0) {
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
function isLeafLayer(data, i) {
  const layers = data.layerCodes;
  if (!layers.has(data.kind[i])) return false;
  const { childStart, childIndex, kind } = data;
  if (childStart[i + 1] === childStart[i]) return false;
  for (let c = childStart[i]; c < childStart[i + 1]; c++) if (layers.has(kind[childIndex[c]])) return false;
  return true;
}
function allExpandable(data) {
  const out = [];
  for (let i = 1; i < data.n; i++) if (data.childStart[i + 1] > data.childStart[i]) out.push(data.path[i]);
  return out;
}
function toggleExpanded(list, path) {
  return list.includes(path) ? list.filter((p) => p !== path) : [...list, path];
}
function withPaths(list, paths) {
  const have = new Set(list);
  const added = paths.filter((p) => !have.has(p) && (have.add(p), true));
  return added.length ? [...list, ...added] : list;
}
function expandMatches(data, state, list) {
  const shown = selectRows(data, state);
  const root = state.root ?? 0;
  const open = [];
  for (let i = root + 1; i < data.end[root]; i++) {
    const p = data.parent[i];
    if (shown[i] && p > root && shown[p] === 1) {
      open.push(data.path[p]);
      shown[p] = 2;
    }
  }
  return withPaths(list, open);
}
function expandLeafLayers(data, rows, list) {
  return withPaths(list, rows.filter((i) => i > 0 && isLeafLayer(data, i)).map((i) => data.path[i]));
}
function expandTo(data, i, root, list) {
  const open = [];
  for (let p = data.parent[i]; p > root; p = data.parent[p]) open.push(data.path[p]);
  return withPaths(list, open.reverse());
}
function ancestorPaths(data, i) {
  const out = [];
  for (let p = data.parent[i]; p > 0; p = data.parent[p]) out.push(data.path[p]);
  return out.reverse();
}
function execChildren(data) {
  return cached(data, "execChildren", () => {
    const exec = data.num[data.roles.order];
    const index = Int32Array.from(data.childIndex);
    if (!exec) return { start: data.childStart, index };
    for (let i = 0; i < data.n; i++) {
      const a = data.childStart[i];
      const b = data.childStart[i + 1];
      if (b - a > 1) index.subarray(a, b).sort((x, y) => exec[x] - exec[y] || x - y);
    }
    return { start: data.childStart, index };
  });
}
function ancestry(data, root, i) {
  const out = [];
  for (let p = i; p >= 0; p = data.parent[p]) {
    out.push(p);
    if (p === root) return out.reverse();
  }
  return [root];
}

// src/answers.js
function hotRows(data) {
  const hot = data.fields.hot_path;
  return new Set(hot && Array.isArray(hot.rows) ? hot.rows.filter((r) => r > 0 && r < data.n) : []);
}
function headlineOf(data) {
  const text = typeof data.summary.headline === "string" ? data.summary.headline : "";
  const layer = data.fields.hot_path?.layer;
  const bottleneck = data.summary.bottleneck;
  let row = typeof layer === "number" && layer > 0 && layer < data.n ? layer : -1;
  if (row < 0 && bottleneck && typeof bottleneck.path === "string") row = rowOfPath(data, bottleneck.path);
  return { text, row };
}
function buildHeadline(data) {
  const { text, row } = headlineOf(data);
  if (!text) return null;
  const line = h("div", { class: "tp-headline", "data-testid": "headline" });
  const names = row > 0 ? [data.summary.bottleneck?.layer, data.summary.bottleneck?.path, data.path[row], data.name[row]] : [];
  const name = names.find((n) => typeof n === "string" && n && text.includes(n)) || "";
  const at = name ? text.indexOf(name) : -1;
  if (at < 0) {
    line.textContent = text;
    return line;
  }
  const link = h("button", { type: "button", class: "tp-link", "data-testid": "headline-layer", "data-row": row, title: "Show this layer in the table", text: name });
  line.append(text.slice(0, at), link, text.slice(at + name.length));
  return line;
}
function openRowValues(ctx, i) {
  const { data } = ctx;
  const st = ctx.state();
  const values = { view: ctx.rowsView, step: "", selected: data.path[i], expanded: expandTo(data, i, 0, st.expandedList) };
  if (!visibleRows(data, { ...st, expanded: new Set(values.expanded), root: 0 }).rows.includes(i)) Object.assign(values, { min_pct: 0, search: "" });
  return values;
}
function openRow(ctx, i) {
  if (i >= 0 && i < ctx.data.n) ctx.change(openRowValues(ctx, i));
}
function hotPathIn(data, viewed) {
  const hot = data.fields.hot_path;
  if (!hot || !Array.isArray(hot.open)) return [];
  const prefix = data.vocab.step_prefix;
  const out = [];
  for (
    const p of
    /** @type {string[]} */
    hot.open
  ) {
    const inStep = !!prefix && p.startsWith(prefix);
    const cut = inStep ? p.indexOf("/") : -1;
    if (inStep && cut < 0) continue;
    const key = cut > 0 ? p.slice(cut + 1) : p;
    const path = viewed.folded ? key : viewed.root === 0 ? p : `${viewed.table.path[viewed.root]}/${key}`;
    if (rowOfPath(viewed.table, path) >= 0) out.push(path);
  }
  return out;
}
function stepOpening(data, step, list, showOps) {
  const viewed = viewedTable(data, step);
  return withPaths(withPaths(list, defaultExpanded(viewed.table, showOps, viewed.root)), hotPathIn(data, viewed));
}

// src/columns.js
function widthSamples(unit, lo, hi) {
  const top = Math.max(Math.abs(lo), Math.abs(hi));
  if (!Number.isFinite(top)) return [];
  if (unit === "int") return [String(Math.round(hi)), String(Math.round(lo))];
  const out = /* @__PURE__ */ new Set([formatValue(unit, hi), formatValue(unit, lo)]);
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
function percentSamples(lo, hi, base) {
  if (!base || Number.isNaN(base)) return [];
  const out = /* @__PURE__ */ new Set(["9.9%", formatPercent(hi, base), formatPercent(lo, base)]);
  if (Math.abs(hi / base) >= 0.1) out.add("99%");
  if (lo < 0) out.add("-9.9%");
  out.delete("");
  return [...out];
}
var NODE_MIN = 168;
var NODE_MAX = 440;
var CELL_PAD = 16;
var PCT_GAP = 4;
function tableLayout(cols, available, nodeMin = NODE_MIN, nodeNeed2 = 0) {
  const node = Math.ceil(Math.max(nodeMin, Math.min(NODE_MAX, nodeNeed2)));
  const widths = (pct) => cols.map((c) => Math.ceil(Math.max(c.head, c.value + (pct && c.pct ? PCT_GAP + c.pct : 0)) + CELL_PAD));
  const sum = (w) => w.reduce((a, b) => a + b, 0);
  const withPct = widths(true);
  if (node + sum(withPct) <= available) return { showPct: true, widths: withPct, minWidth: node + sum(withPct), node };
  const bare = widths(false);
  return { showPct: false, widths: bare, minWidth: node + sum(bare), node };
}
var NODE = "node";
function hasData(data, name) {
  if (name === data.roles.calls) return data.n > 0;
  const values = data.num[name];
  if (!values || data.allNaN[name]) return false;
  for (let i = 1; i < values.length; i++) if (!Number.isNaN(values[i]) && values[i] !== 0) return true;
  return false;
}
function shownSpec(data, name, showOps) {
  const spec = data.spec[name];
  return !showOps && spec?.layer_alt ? data.spec[spec.layer_alt] || spec : spec;
}
function columnsFor(data, folded = null, showOps = true) {
  const cols = [{ key: data.roles.name, label: data.spec[data.roles.name].label, type: NODE, title: "Layer, region, op or kernel; hover for path, type and input shapes", sortable: true }];
  const shown = new Set(data.vocab.view_columns.filter((c) => hasData(data, c)));
  for (const name of data.vocab.view_columns) {
    const spec = data.spec[name];
    if (!shown.has(name) || spec.needs && !shown.has(spec.needs)) continue;
    const self = data.vocab.columns.find((c) => c.subtree === name);
    const named = shownSpec(data, name, showOps);
    const title = named !== spec ? `${named.about} (${spec.label} with the op rows shown)` : spec.layer_alt ? `${spec.about} An op row the threshold hides folds into its layer's figure.` : spec.about;
    cols.push({
      key: name,
      label: named.label,
      type: spec.unit,
      title,
      of: spec.percent_of,
      family: spec.family,
      self: self?.name,
      sortable: true,
      unknown: spec.unknown ? data.vocab.unknown_mark : void 0
    });
    if (folded && name === data.vocab.threshold_column && folded.low[name]) {
      for (
        const [spread, word] of
        /** @type {const} */
        [["low", "min"], ["high", "max"]]
      ) {
        cols.push({
          key: name,
          label: `${spec.label} ${word}`,
          type: spec.unit,
          title: `The ${word === "min" ? "least" : "most"} ${spec.label} of any of the ${folded.count} steps (0 where a step did not run the row)`,
          of: spec.percent_of,
          family: spec.family,
          spread,
          sortable: false
        });
      }
    }
  }
  return cols;
}

// src/controls.js
var SLIDER_STEPS = 1e3;
var SLIDER_DECADES = [-2, 2];
function sliderToPct(position) {
  if (!(position > 0)) return 0;
  const [lo, hi] = SLIDER_DECADES;
  const pct = 10 ** (lo + (hi - lo) * Math.min(position, SLIDER_STEPS) / SLIDER_STEPS);
  return Number(pct.toPrecision(2));
}
function pctToSlider(pct) {
  if (!(pct > 0)) return 0;
  const [lo, hi] = SLIDER_DECADES;
  const position = Math.round((Math.log10(pct) - lo) / (hi - lo) * SLIDER_STEPS);
  return Math.max(1, Math.min(SLIDER_STEPS, position));
}
function pctLabel(pct) {
  return `${Number(Number(pct).toPrecision(2))}%`;
}
function hiddenNote(counts, minPct, search) {
  const parts = [];
  if (counts.below) parts.push(`${counts.below} below ${pctLabel(minPct)} of CPU total`);
  if (counts.unmatched) parts.push(`${counts.unmatched} not matching “${search.trim()}”`);
  if (!parts.length) return "";
  const total = counts.below + counts.unmatched;
  return `${total} ${total === 1 ? "row" : "rows"} hidden (${parts.join(", ")})`;
}
var viewLabel = (view) => view.charAt(0).toUpperCase() + view.slice(1);
function stepPicker(data) {
  const steps = stepRows(data);
  if (!steps.length) return null;
  const step = (
    /** @type {HTMLSelectElement} */
    h(
      "select",
      { class: "tp-select", "data-testid": "step", "aria-label": "Part of the run viewed" },
      h("option", { value: "", text: "whole run" })
    )
  );
  if (data.folded) step.append(h("option", { value: data.vocab.all_steps, text: `all ${data.folded.count} steps (mean)` }));
  for (const row of steps) {
    const number = data.name[row].slice(data.vocab.step_prefix.length);
    step.append(h("option", { value: number, text: `step #${number}` }));
  }
  return step;
}
function sortPicker(data) {
  const R = data.roles;
  const sort = (
    /** @type {HTMLSelectElement} */
    h("select", { class: "tp-select", "data-testid": "sort", "aria-label": "Sort siblings by" })
  );
  if (data.spec[R.order]) sort.append(h("option", { value: R.order, text: "execution order" }));
  sort.append(h("option", { value: R.name, text: "name (natural)" }));
  for (const col of columnsFor(data)) if (col.type !== NODE) sort.append(h("option", { value: col.key, text: col.label }));
  return sort;
}
function buildControls(data, views) {
  const uses = Object.fromEntries(views);
  const usedBy = (acts) => views.filter(([, use]) => acts(use)).map(([name]) => name).join(" ");
  const switcher = h(
    "div",
    { class: "tp-switch", role: "group", "aria-label": "View" },
    ...views.map(([view]) => h("button", { type: "button", class: "tp-switch-btn", "data-view": view, "data-testid": `view-${view}`, text: viewLabel(view) }))
  );
  const step = stepPicker(data);
  const slider = (
    /** @type {HTMLInputElement} */
    h("input", { type: "range", min: "0", max: String(SLIDER_STEPS), step: "1", "data-testid": "min-pct", "aria-label": "Minimum percent of CPU total" })
  );
  const sliderValue = h("output", { class: "tp-slider-value", "data-testid": "min-pct-value" });
  const ops = (
    /** @type {HTMLInputElement} */
    h("input", { type: "checkbox", "data-testid": "show-ops" })
  );
  const search = (
    /** @type {HTMLInputElement} */
    h("input", { type: "search", "data-testid": "search", "data-for": usedBy((u) => u.search), placeholder: "Find: name, glob * ?, or path:…", "aria-label": "Find rows by name (glob * ?), or by path after path:", spellcheck: "false" })
  );
  const sort = sortPicker(data);
  const rowCount = h("span", { class: "tp-count", "data-testid": "row-count", "aria-live": "polite", "data-for": usedBy((u) => u.rowCount) });
  const bar = h(
    "div",
    { class: "tp-controls" },
    switcher,
    ...step ? [h("label", { class: "tp-ctl", title: "View one step (percentages are of that step), every step folded into one tree (mean, min and max per row), or the whole run" }, "step ", step)] : [],
    h("label", { class: "tp-ctl", "data-for": usedBy((u) => u.threshold), title: "Hide rows whose CPU total is below this share of the viewed root's (whatever the sort); the ancestors of shown rows stay. Logarithmic: 0, then 0.01% to 100%." }, "min ", slider, sliderValue, h("span", { class: "tp-ctl-unit", text: "of CPU total" })),
    h("label", { class: "tp-ctl", "data-for": usedBy((u) => u.ops), title: "Show aten ops and kernels under their layers. Numbers never change silently: a layer's Self counts every op row that is not shown" }, ops, " aten ops"),
    search,
    h("label", { class: "tp-ctl", "data-for": usedBy((u) => u.sort) }, "sort ", sort),
    h("button", { type: "button", class: "tp-btn", "data-for": usedBy((u) => u.expand), "data-testid": "expand-all", text: "Expand all" }),
    h("button", { type: "button", class: "tp-btn", "data-for": usedBy((u) => u.expand), "data-testid": "collapse-all", text: "Collapse all" }),
    h("button", { type: "button", class: "tp-btn", "data-testid": "export-csv", title: "Download every row of the part of the run viewed as CSV (the DataFrame's columns), whatever is expanded or filtered", text: "Export CSV" }),
    rowCount
  );
  const noteText = h("span", { "data-testid": "hidden-note" });
  const note = h("div", { class: "tp-note", hidden: true }, noteText, " ", h("button", { type: "button", class: "tp-link", "data-testid": "show-hidden", text: "Show them" }));
  return { bar, switcher, step, slider, sliderValue, ops, search, sort, rowCount, note, noteText, uses };
}
function showControls(c, data, st, view, viewed, vis) {
  c.slider.value = String(pctToSlider(st.min_pct || 0));
  c.sliderValue.textContent = pctLabel(st.min_pct || 0);
  c.ops.checked = !!st.show_ops;
  for (const o of c.sort.options) if (data.spec[o.value]?.layer_alt) o.textContent = shownSpec(data, o.value, !!st.show_ops).label;
  if (c.search.value !== st.search) c.search.value = st.search;
  const active = resolveSort(data.vocab, st.sort_by);
  if (![...c.sort.options].some((o) => o.value === active)) c.sort.append(h("option", { value: active, text: data.spec[active]?.label || active }));
  c.sort.value = active;
  if (c.step) c.step.value = st.step;
  for (const b of c.switcher.children) b.setAttribute("aria-pressed", String(
    /** @type {HTMLElement} */
    b.dataset.view === view
  ));
  for (const control of c.bar.querySelectorAll("[data-for]")) {
    control.hidden = !/** @type {HTMLElement} */
    (control.dataset.for || "").split(" ").includes(view);
  }
  const hidden = hiddenCounts(viewed.table, { ...st, root: viewed.root }, vis.shown);
  const text = c.uses[view]?.hiddenNote ? hiddenNote(hidden, st.min_pct || 0, st.search) : "";
  c.note.hidden = !text;
  c.noteText.textContent = text;
  c.note.title = hidden.ops && !st.show_ops ? `${hidden.ops} op and kernel rows are folded into their layers (tick “aten ops” to list them)` : "";
  c.rowCount.textContent = `${vis.rows.length} of ${viewed.table.end[viewed.root] - viewed.root} rows`;
}
function inputChange(c, data, st, target) {
  if (target === c.slider) return { min_pct: sliderToPct(Number(c.slider.value)) };
  if (target !== c.search) return null;
  const text = c.search.value;
  const values = { search: text };
  if (text.trim()) {
    const viewed = viewedTable(data, st.step);
    const opened = expandMatches(viewed.table, { ...st, search: text, root: viewed.root }, st.expandedList);
    if (opened !== st.expandedList) values.expanded = opened;
  }
  return values;
}
function pickChange(c, data, st, target) {
  if (target === c.ops) {
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

// src/csv.js
function csvField(text) {
  const s = String(text);
  return /[",\r\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
}
function csvText(vocab, text) {
  return text.length > 0 && vocab.csv_formula_start.includes(text[0]) ? "'" + text : text;
}
function csvValue(data, col, i) {
  const R = data.roles;
  if (col in data.text) return data.text[col][i] ?? "";
  if (col in data.num) return Number.isNaN(data.num[col][i]) ? "" : String(data.num[col][i]);
  if (col === R.path) return data.path[i];
  if (col === R.name) return data.name[i];
  if (col === R.kind) return data.vocab.kinds[data.kind[i]];
  if (col === R.parent) return data.parent[i] >= 0 ? data.path[data.parent[i]] : "";
  if (col === R.depth) return String(data.depth[i]);
  if (col === R.backward) return data.backward[i] ? "True" : "False";
  return "";
}
function exportFileName(data, step) {
  const label = String(data.summary.name ?? data.name[0] ?? "profile");
  const moduleCode = data.moduleCode;
  const tops = [];
  for (let c = data.childStart[0]; c < data.childStart[1]; c++) if (data.kind[data.childIndex[c]] === moduleCode) tops.push(data.childIndex[c]);
  let base = label;
  if (data.kind[0] !== moduleCode && tops.length === 1 && data.name[tops[0]] !== label) base += "-" + data.name[tops[0]];
  if (step) base += step === data.vocab.all_steps ? "-all-steps" : "-step" + step;
  return base.replace(/[^\w.-]+/g, "_") + ".csv";
}
function toCSV(data, rows) {
  const cols = data.vocab.columns.map((c) => c.name);
  const text = new Set(data.vocab.columns.filter((c) => c.dtype === "str").map((c) => c.name));
  const cell = (c, i) => {
    const v = csvValue(data, c, i);
    return csvField(text.has(c) ? csvText(data.vocab, v) : v);
  };
  const lines = [cols.map(csvField).join(",")];
  for (const i of rows) lines.push(cols.map((c) => cell(c, i)).join(","));
  return lines.join("\n") + "\n";
}

// src/state.js
function createModel(initial) {
  const state = { ...initial };
  const listeners = /* @__PURE__ */ new Map();
  const emit = (event) => {
    for (const cb of [...listeners.get(event) || []]) cb();
  };
  return {
    get: (key) => state[key],
    set(key, value) {
      const old = state[key];
      state[key] = value;
      if (old !== value) emit("change:" + key);
    },
    on(event, cb) {
      if (!listeners.has(event)) listeners.set(event, /* @__PURE__ */ new Set());
      listeners.get(event)?.add(cb);
    },
    off(event, cb) {
      if (event === void 0) listeners.clear();
      else if (cb === void 0) listeners.delete(event);
      else listeners.get(event)?.delete(cb);
    },
    save_changes() {
      emit("save");
    }
  };
}
function stateValue(key, value) {
  const missing2 = value === void 0 || value === null;
  switch (key.type) {
    case "float": {
      const n = Number(value);
      return missing2 || Number.isNaN(n) ? Number(key.default) || 0 : n;
    }
    case "bool":
      return missing2 ? !!key.default : !!value;
    case "paths":
      return missing2 ? [] : value;
    default:
      return missing2 || value === "" ? String(key.default ?? "") : String(value);
  }
}
function stateReader(model, vocab) {
  const sets = /* @__PURE__ */ new Map();
  return () => {
    const st = {};
    for (const key of vocab.state) {
      const value = stateValue(key, model.get(key.name));
      if (key.type !== "paths") {
        st[key.name] = value;
        continue;
      }
      let held = sets.get(key.name);
      if (!held || held.list !== value) sets.set(key.name, held = { list: value, set: new Set(value) });
      st[key.name] = held.set;
      st[key.name + "List"] = value;
    }
    return (
      /** @type {FullState} */
      st
    );
  };
}

// src/summary.js
function buildSummary(box, data) {
  const s = data.summary;
  box.replaceChildren();
  box.append(h("span", { class: "tp-title", text: s.name ?? data.path[0] }));
  for (const [label, value, title] of data.summaryItems) {
    const warn = label === "stopped by" || label === "note";
    box.append(h("span", { class: warn ? "tp-stat tp-warn" : "tp-stat", title }, h("span", { class: "tp-stat-k", text: label }), " ", h("b", { text: value })));
  }
  const steps = data.steps;
  if (steps.length) {
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
    box.append(h(
      "span",
      { class: "tp-stat tp-steps", title: "Wall time of each ProfilerStep, in the order they ran" },
      h("span", { class: "tp-stat-k", text: `${steps.length} steps` }),
      " ",
      bars,
      " ",
      h("span", { text: `${list}  (min ${formatTime(sorted[0])}, median ${formatTime(median)}, max ${formatTime(max)})` })
    ));
  }
}

// src/views/flame.js
var flame_exports = {};
__export(flame_exports, {
  COLOURINGS: () => COLOURINGS,
  FLAME_ROW: () => FLAME_ROW,
  controls: () => controls,
  create: () => create,
  flameColouring: () => flameColouring,
  flameDeltas: () => flameDeltas,
  flameHit: () => flameHit,
  flameLayout: () => flameLayout,
  flameMetric: () => flameMetric,
  flameMetrics: () => flameMetrics,
  flameTip: () => flameTip,
  phaseColumns: () => phaseColumns,
  phaseRoles: () => phaseRoles,
  phaseShares: () => phaseShares
});

// src/colours.js
function deltaClass(v) {
  return Number.isNaN(v) || v === 0 ? "" : v < 0 ? "tp-faster" : "tp-slower";
}
function markDelta(cell, v) {
  cell.classList.add("tp-delta");
  cell.classList.remove("tp-faster", "tp-slower");
  const cls = deltaClass(v);
  if (cls) cell.classList.add(cls);
}
function deltaColour(v, scale, dark) {
  if (!(v !== 0 && scale > 0) || Number.isNaN(v)) return dark ? "hsl(215 8% 45%)" : "hsl(215 12% 84%)";
  const size = Math.min(1, Math.abs(v) / scale);
  const hue = v < 0 ? 135 : 2;
  const light = dark ? 30 + 25 * (1 - size) : 88 - 40 * size;
  return `hsl(${hue} ${dark ? 50 : 65}% ${light.toFixed(1)}%)`;
}
function typeHue(text) {
  let h2 = 2166136261;
  for (let k = 0; k < text.length; k++) {
    h2 ^= text.charCodeAt(k);
    h2 = Math.imul(h2, 16777619);
  }
  return (h2 >>> 0) % 360;
}
function luminance(colour) {
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
function canvasPalette(el) {
  const css = getComputedStyle(el);
  const v = (name, fallback) => css.getPropertyValue(name).trim() || fallback;
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
    selfMark: "rgba(0, 0, 0, 0.28)"
  };
}

// src/views/flame.js
function flameMetrics(data) {
  const out = [];
  const names = [...data.vocab.view_columns, ...data.vocab.columns.filter((c) => c.unit === "count" && c.threshold).map((c) => c.name)];
  for (const name of new Set(names)) {
    const spec = data.spec[name];
    if (!spec || !hasData(data, name)) continue;
    const sized = (spec.unit === "time" || spec.unit === "count" && spec.threshold) && spec.rollup === "total";
    if (sized) out.push({ key: name, label: spec.label, width: name, self: null });
    else if (spec.rollup === "self" && spec.subtree && hasData(data, spec.subtree)) out.push({ key: name, label: shownSpec(data, name, false).label, width: spec.subtree, self: name });
  }
  return out;
}
function flameMetric(data, key) {
  const all = flameMetrics(data);
  const size = data.vocab.threshold_column;
  return all.find((m) => m.key === key) || all[0] || { key: size, label: data.spec[size]?.label ?? size, width: size, self: null };
}
function flameLayout(data, { root = 0, width, widthColumn, showOps = false, minPx = 0.75 }) {
  const values = data.num[widthColumn];
  const { start, index } = execChildren(data);
  const layers = data.layerCodes;
  const value = (i) => values[i] > 0 ? values[i] : 0;
  const node = [];
  const xs = [];
  const ws = [];
  const level = [];
  let levels = 0;
  if (value(root) > 0 && width > 0) {
    const stack = [[root, 0, width, 0]];
    while (stack.length) {
      const [i, x, w, l] = (
        /** @type {[number, number, number, number]} */
        stack.pop()
      );
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
      for (let c = kids.length - 1; c >= 0; c--) stack.push(
        /** @type {[number, number, number, number]} */
        kids[c]
      );
    }
  }
  const count = node.length;
  const levelStart = new Int32Array(levels + 1);
  for (const l of level) levelStart[l + 1]++;
  for (let l = 0; l < levels; l++) levelStart[l + 1] += levelStart[l];
  const fill = levelStart.slice(0, levels);
  const byLevel = new Int32Array(count);
  for (let r = 0; r < count; r++) byLevel[fill[level[r]]++] = r;
  return {
    count,
    node: Int32Array.from(node),
    x: Float64Array.from(xs),
    w: Float64Array.from(ws),
    level: Int32Array.from(level),
    levels,
    byLevel,
    levelStart
  };
}
function flameHit(layout, px, py, rowHeight) {
  const l = Math.floor(py / rowHeight);
  if (l < 0 || l >= layout.levels) return -1;
  let lo = layout.levelStart[l];
  let hi = layout.levelStart[l + 1] - 1;
  while (lo <= hi) {
    const mid = lo + hi >> 1;
    const r = layout.byLevel[mid];
    if (px < layout.x[r]) hi = mid - 1;
    else if (px >= layout.x[r] + layout.w[r]) lo = mid + 1;
    else return r;
  }
  return -1;
}
function phaseColumns(data, metric) {
  const of = data.spec[metric.width]?.percent_of;
  if (!of) return [];
  return data.vocab.view_columns.filter((c) => c !== of && data.spec[c].percent_of === of && data.spec[c].rollup === "total" && hasData(data, c));
}
function phaseRoles(data, phases) {
  let seen = 0;
  return phases.map((c) => data.spec[c].family === "bwd" ? "bwd" : seen++ === 0 ? "fwd" : "other");
}
function phaseShares(data, i, phases) {
  const roles = phaseRoles(data, phases);
  const parts = phases.map((c) => data.num[c][i] > 0 ? data.num[c][i] : 0);
  const sum = parts.reduce((a, b) => a + b, 0);
  if (!(sum > 0)) return [{ role: data.backward[i] ? "bwd" : "fwd", share: 1 }];
  return parts.map((v, k) => ({ role: roles[k], share: v / sum })).filter((p) => p.share > 0);
}
function flameColouring(data, colour) {
  return data.vocab.flame_colours.includes(colour) ? colour : data.vocab.flame_colours[0];
}
function flameDeltas(data, metric) {
  const stem = metric.width.replace(/_(base|new)$/, "");
  const column2 = data.num[stem + "_delta"] ? stem + "_delta" : data.vocab.columns.find((c) => c.delta && data.num[c.name])?.name ?? "";
  const values = data.num[column2] || new Float64Array(data.n).fill(NaN);
  let scale = 0;
  for (let i = 1; i < data.n; i++) if (Math.abs(values[i]) > scale) scale = Math.abs(values[i]);
  return { column: column2, values, scale };
}
var FLAME_ROW = 18;
function swatches(colours, items) {
  return items.flatMap(([role, label]) => {
    const swatch = h("span", { class: `tp-swatch tp-swatch-${role}` });
    swatch.style.background = colours[role];
    return [swatch, h("span", { text: label })];
  });
}
var COLOURINGS = {
  phase: {
    label: "forward / backward / other",
    painter(table, metric, pal) {
      const phases = phaseColumns(table, metric);
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
        }
      };
    },
    legend(table, metric, pal) {
      const phases = phaseColumns(table, metric);
      const roles = phaseRoles(table, phases);
      const items = phases.length ? phases.map((c, k) => [roles[k], table.spec[c].label]) : [["fwd", "forward"], ["bwd", "backward"]];
      return swatches(
        /** @type {any} */
        pal,
        items
      );
    }
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
        }
      };
    },
    legend: () => [h("span", { class: "tp-legend-note", text: "one colour per module type" })]
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
        }
      };
    },
    legend(table, metric, pal) {
      const column2 = flameDeltas(table, metric).column;
      const note = h("span", { class: "tp-legend-note", text: `by ${table.spec[column2]?.label || column2}, deeper for a bigger change` });
      return [...swatches({ faster: deltaColour(-1, 1, pal.dark), slower: deltaColour(1, 1, pal.dark) }, [["faster", "faster"], ["slower", "slower"]]), note];
    }
  }
};
function colouringOf(table, colour) {
  return COLOURINGS[flameColouring(table, colour)] || Object.values(COLOURINGS)[0];
}
function flameTip(viewed, metric, zoomRow, i) {
  const table = viewed.table;
  const R = table.roles;
  const base = table.num[metric.width][zoomRow];
  const kind = table.vocab.kinds[table.kind[i]];
  const backward = table.backward[i] ? " · backward" : "";
  const lines = [table.path[i], table.type[i] ? `${kind} · ${table.type[i]}${backward}` : `${kind}${backward}`];
  const v = table.num[metric.width][i];
  const spec = table.spec[metric.width];
  lines.push(`${spec.label}: ${formatValue(spec.unit, v)} (${formatPercent(v, base)} of ${table.name[zoomRow]})`);
  for (const c of columnsFor(table, null, false)) {
    if (c.type === NODE || c.key === metric.width || !(c.type === "time" || c.key === R.flops || c.key === R.calls)) continue;
    const val = table.num[table.spec[c.key].layer_alt || c.key][i];
    if (!Number.isNaN(val) && val !== 0) lines.push(`${c.label}: ${formatValue(c.type, val)}`);
  }
  if (viewed.folded) lines.push(`ran in ${viewed.folded.runs[i]} of ${viewed.folded.count} steps (means per step)`);
  return lines.join("\n");
}
var FlameView = class {
  /** @param {Context} ctx */
  constructor(ctx) {
    const { data } = ctx;
    this.ctx = ctx;
    this.crumbs = h("nav", { class: "tp-crumbs", "aria-label": "Zoom path", "data-testid": `${ctx.view}-crumbs` });
    this.metricSelect = /** @type {HTMLSelectElement} */
    h("select", { class: "tp-select", "data-testid": `${ctx.view}-metric`, "aria-label": "Bar width" });
    for (const m of flameMetrics(data)) this.metricSelect.append(h("option", { value: m.key, text: m.label }));
    this.colourSelect = /** @type {HTMLSelectElement} */
    h("select", { class: "tp-select", "data-testid": `${ctx.view}-colour`, "aria-label": "Bar colour" });
    for (const c of data.vocab.flame_colours) this.colourSelect.append(h("option", { value: c, text: COLOURINGS[c]?.label || c }));
    this.legend = h("span", { class: "tp-legend", "data-testid": `${ctx.view}-legend` });
    const bar = h(
      "div",
      { class: "tp-flame-bar" },
      this.crumbs,
      h("label", { class: "tp-ctl" }, "width ", this.metricSelect),
      h("label", { class: "tp-ctl" }, "colour ", this.colourSelect),
      this.legend
    );
    this.canvas = /** @type {HTMLCanvasElement} */
    h("canvas", { class: "tp-flame-canvas", "data-testid": `${ctx.view}-canvas`, role: "img", "aria-label": "Flame graph of the layer tree" });
    this.tip = h("div", { class: "tp-tip", "data-testid": `${ctx.view}-tip`, hidden: true, role: "tooltip" });
    this.scroll = h("div", { class: "tp-flame-scroll", tabindex: "0", "data-testid": ctx.view }, this.canvas);
    this.el = h("div", { class: `tp-panel tp-panel-${ctx.view}`, "data-view": ctx.view }, bar, this.scroll, this.tip);
    this.layout = null;
    this.viewed = viewedTable(data, "");
    this.st = ctx.state();
    this.zoomRow = 0;
    this.metric = flameMetric(data, this.st.metric);
    this.lastWidth = -1;
    this.canvas.addEventListener("mousemove", (event) => this.onMove(event));
    this.canvas.addEventListener("mouseleave", () => this.tip.hidden = true);
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
    const g = (
      /** @type {CanvasRenderingContext2D} */
      canvas.getContext("2d")
    );
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    const pal = canvasPalette(el);
    g.fillStyle = pal.bg;
    g.fillRect(0, 0, width, height);
    g.font = `11px ${getComputedStyle(el).fontFamily || "sans-serif"}`;
    g.textBaseline = "middle";
    const painter = colouringOf(table, st.flame_colour).painter(table, metric, pal);
    const searched = this.paintBars(g, layout, painter, pal);
    const outlined = this.outlineSelection(g, layout, pal);
    Object.assign(el.dataset, {
      drawMs: (performance.now() - t0).toFixed(1),
      rects: String(layout.count),
      matches: String(searched.matches),
      dimmed: String(searched.dimmed),
      selected: outlined,
      faster: String(painter.tally.faster),
      slower: String(painter.tally.slower)
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
      const faded = !!match && r !== 0 && !match(i);
      if (match && r !== 0) faded ? dimmed++ : matches++;
      g.globalAlpha = faded ? 0.28 : 1;
      painter.fill(g, i, x[r], top, rw, r);
      if (selfValues && widthValues[i] > 0) {
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
    const below = event.clientY - box.top + 14;
    const top = below + tip.offsetHeight > el.clientHeight && event.clientY - box.top > tip.offsetHeight + 8 ? event.clientY - box.top - tip.offsetHeight - 8 : below;
    tip.style.left = left + "px";
    tip.style.top = top + "px";
  }
  /** @param {MouseEvent} event */
  onClick(event) {
    const { ctx, viewed } = this;
    const table = viewed.table;
    const crumb = (
      /** @type {HTMLElement|null} */
      /** @type {HTMLElement} */
      event.target.closest(".tp-crumb")
    );
    if (crumb) {
      const path = (
        /** @type {string} */
        crumb.dataset.path
      );
      ctx.change({ zoom: rowOfPath(table, path) === viewed.root ? "" : path });
      return;
    }
    if (event.target !== this.canvas || !this.layout) return;
    const r = this.rectAt(event);
    if (r < 0) return;
    const i = this.layout.node[r];
    this.scroll.focus({ preventScroll: true });
    if (r === 0) {
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
};
function create(ctx) {
  return new FlameView(ctx);
}
var controls = { ops: true, search: true };

// src/views/insights.js
var insights_exports = {};
__export(insights_exports, {
  badge: () => badge,
  controls: () => controls2,
  create: () => create2,
  insightRows: () => insightRows,
  offered: () => offered
});
function insightRows(data) {
  const found = Array.isArray(data.fields.insights) ? data.fields.insights : [];
  const [rule, atStake, share, paths, message, advice] = data.vocab.insight_columns || [];
  return found.map((f) => {
    const figures = [];
    if (!missing(f[share] ?? NaN)) figures.push(`${formatPercent(f[share], 1)} of the ${missing(f[atStake] ?? NaN) ? "memory peak" : "run"}`);
    if (!missing(f[atStake] ?? NaN)) figures.push(`${formatTime(f[atStake])} at stake`);
    const list = Array.isArray(f[paths]) ? f[paths] : [];
    return {
      rule: String(f[rule] ?? ""),
      title: String(f[rule] ?? "").replace(/_/g, " "),
      figures: figures.join(" · "),
      message: String(f[message] ?? ""),
      advice: String(f[advice] ?? ""),
      links: list.map((p) => ({ path: String(p), row: rowOfPath(data, String(p)) }))
    };
  });
}
var InsightsView = class {
  /** @param {Context} ctx */
  constructor(ctx) {
    this.ctx = ctx;
    this.el = h("div", { class: `tp-panel tp-panel-${ctx.view} tp-insights`, "data-view": ctx.view, "data-testid": ctx.view });
    this.onClick = this.onClick.bind(this);
    this.el.addEventListener("click", this.onClick);
    this.build();
  }
  build() {
    const rows = insightRows(this.ctx.data);
    if (!rows.length) {
      this.el.replaceChildren(h("p", {
        class: "tp-insights-none",
        "data-testid": "insights-none",
        text: "No findings: none of torchprof's rules (data loading, host syncs, device idle, exposed communication, optimizer, torch.compile, activations, low MFU, memory limit, Python overhead) fired on this profile."
      }));
      return;
    }
    const list = h("ol", { class: "tp-insight-list", role: "list" });
    rows.forEach((r, k) => {
      const first = r.links.find((l) => l.row >= 0);
      const links = h("span", { class: "tp-insight-paths" });
      for (const l of r.links.slice(0, 8)) {
        if (l.row >= 0) links.append(h("button", { type: "button", class: "tp-link", "data-row": l.row, title: "Show this row in the table", text: l.path }));
        else links.append(h("span", { text: l.path }));
      }
      if (r.links.length > 8) links.append(h("span", { text: `… ${r.links.length - 8} more` }));
      list.append(h(
        "li",
        {
          class: "tp-insight",
          "data-testid": "insight",
          "data-rule": r.rule,
          "data-row": first ? first.row : null,
          tabindex: "0",
          title: first ? "Click to show it in the table" : null
        },
        h(
          "div",
          { class: "tp-insight-head" },
          h("span", { class: "tp-insight-rank", text: `${k + 1}.` }),
          h("b", { class: "tp-insight-rule", text: r.title }),
          h("span", { class: "tp-insight-figures", text: r.figures })
        ),
        h("div", { class: "tp-insight-message", text: r.message }),
        h("div", { class: "tp-insight-advice" }, h("span", { class: "tp-stat-k", text: "Try: " }), r.advice),
        links
      ));
    });
    this.el.replaceChildren(h("div", { class: "tp-insights-note", text: `${rows.length} finding${rows.length === 1 ? "" : "s"}, the most time at stake first` }), list);
    this.el.addEventListener("keydown", (event) => {
      const item = (
        /** @type {HTMLElement} */
        event.target.closest(".tp-insight")
      );
      if (item && (event.key === "Enter" || event.key === " ") && event.target === item) {
        event.preventDefault();
        this.open(item);
      }
    });
  }
  /** @param {Element} el */
  open(el) {
    const row = Number(
      /** @type {HTMLElement} */
      el.dataset.row
    );
    if (el.getAttribute("data-row") !== null && row >= 0) openRow(this.ctx, row);
  }
  /** @param {Event} event */
  onClick(event) {
    const target = (
      /** @type {HTMLElement} */
      event.target
    );
    const link = target.closest(".tp-link[data-row]");
    if (link) return this.open(link);
    const item = target.closest(".tp-insight");
    if (item && !window.getSelection()?.toString()) this.open(item);
  }
  update() {
  }
  resized() {
  }
  destroy() {
    this.el.removeEventListener("click", this.onClick);
  }
};
function create2(ctx) {
  return new InsightsView(ctx);
}
var offered = (data) => Array.isArray(data.fields.insights) && !!data.vocab.insight_columns;
var badge = (data) => Array.isArray(data.fields.insights) && data.fields.insights.length ? String(data.fields.insights.length) : "";
var controls2 = {};

// src/views/memory.js
var memory_exports = {};
__export(memory_exports, {
  bandRects: () => bandRects,
  controls: () => controls3,
  create: () => create3,
  downsampleMinMax: () => downsampleMinMax,
  memoryPath: () => memoryPath,
  memoryReadout: () => memoryReadout,
  memoryScales: () => memoryScales,
  offered: () => offered2,
  phaseAt: () => phaseAt,
  pointAt: () => pointAt
});

// src/makeup.js
function categoryLabel(category) {
  return category.replace(/_/g, " ");
}
function makeupSegments(categories, makeup) {
  const total = makeup.categories.reduce((a, b) => a + Math.max(0, b || 0), 0);
  const segments = categories.map((c, k) => ({ category: c, index: k, label: categoryLabel(c), bytes: Math.max(0, makeup.categories[k] || 0) })).filter((s) => s.bytes > 0).map((s) => ({ ...s, share: total > 0 ? s.bytes / total : 0 }));
  return { total, segments };
}
function buildMakeup(data, series) {
  const makeup = series.makeup;
  const categories = data.vocab.memory_categories || [];
  if (!makeup || !categories.length) return null;
  const { total, segments } = makeupSegments(categories, makeup);
  if (!(total > 0)) return null;
  const bar = h("div", {
    class: "tp-makeup-bar",
    "data-testid": "memory-makeup-bar",
    role: "img",
    "aria-label": segments.map((s) => `${s.label} ${formatBytes(s.bytes)}`).join(", ")
  });
  const legend = h("div", { class: "tp-makeup-legend" });
  for (const s of segments) {
    const seg = h("span", { class: `tp-makeup-seg tp-cat-${s.index}`, "data-category": s.category, title: `${s.label}: ${formatBytes(s.bytes)} (${formatPercent(s.bytes, total)})` });
    seg.style.width = (100 * s.share).toFixed(3) + "%";
    bar.append(seg);
    legend.append(h(
      "span",
      { class: "tp-makeup-key" },
      h("span", { class: `tp-makeup-swatch tp-cat-${s.index}` }),
      `${s.label} `,
      h("b", { text: formatBytes(s.bytes) }),
      ` (${formatPercent(s.bytes, total)})`
    ));
  }
  const note = [`What ${series.name}'s peak holds: ${formatBytes(total)}`];
  if (makeup.before > 0) note.push(`${formatBytes(makeup.before)} of it allocated before the profiled block`);
  const layers = h("ol", { class: "tp-makeup-layers", "data-testid": "memory-makeup-layers" });
  for (const [path, row, bytes, per] of makeup.layers) {
    const parts = categories.map((c, k) => per[k] > 0 ? `${categoryLabel(c)} ${formatBytes(per[k])}` : "").filter(Boolean).join(", ");
    const name = row >= 0 ? h("button", { type: "button", class: "tp-link", "data-row": row, title: "Show this layer in the table", text: path }) : h("span", { text: path });
    layers.append(h(
      "li",
      {},
      name,
      h("span", { class: "tp-makeup-bytes", text: ` ${formatBytes(bytes)} (${formatPercent(bytes, total)})` }),
      h("span", { class: "tp-makeup-parts", text: parts ? ` · ${parts}` : "" })
    ));
  }
  return h(
    "div",
    { class: "tp-makeup", "data-testid": "memory-makeup" },
    h("div", { class: "tp-makeup-title", text: note.join(" · ") }),
    bar,
    legend,
    h("div", { class: "tp-makeup-title", text: "Layers holding the most at the peak" }),
    layers
  );
}

// src/views/memory.js
function downsampleMinMax(t, v, buckets) {
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
    const b = Math.min(buckets - 1, Math.floor((t[i] - t0) * buckets / span));
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
function memoryScales(series, width, height, pad = {}) {
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
  const h2 = plot.bottom - plot.top;
  return {
    x: (time) => plot.left + (time - t0) / span * w,
    y: (v) => plot.bottom - Math.max(0, v) / vmax * h2,
    time: (x) => t0 + (x - plot.left) / (w || 1) * span,
    t0,
    t1,
    vmax,
    plot
  };
}
function memoryPath(series, keep, s) {
  if (!keep.length) return "";
  const r = (v) => Math.round(v * 10) / 10;
  const first = keep[0];
  let d = `M${r(s.x(series.t[first]))},${r(s.y(series.v[first]))}`;
  for (let k = 1; k < keep.length; k++) {
    const i = keep[k];
    d += `H${r(s.x(series.t[i]))}V${r(s.y(series.v[i]))}`;
  }
  return d + `H${r(s.plot.right)}`;
}
function bandRects(bands, phases, s) {
  const out = [];
  for (const [start, end, code] of bands) {
    const x0 = Math.max(s.plot.left, s.x(start));
    const x1 = Math.min(s.plot.right, s.x(end));
    if (x1 - x0 >= 0.5) out.push({ x: x0, width: x1 - x0, phase: phases[code] ?? "other" });
  }
  return out;
}
function pointAt(t, time) {
  let lo = 0;
  let hi = t.length - 1;
  if (hi < 0 || time < t[0]) return -1;
  while (lo < hi) {
    const mid = lo + hi + 1 >> 1;
    if (t[mid] <= time) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}
function memoryReadout(data, series, i, phase) {
  const row = series.row[i];
  const where = row > 0 ? data.path[row] : data.path[0];
  return `${formatTime(series.t[i])} · ${formatBytes(series.v[i])} · ${where}${phase ? ` (${phase})` : ""}`;
}
function phaseAt(memory, time) {
  for (const [start, end, code] of memory.bands) if (time >= start && time <= end) return memory.phases[code] ?? null;
  return null;
}
var MEMORY_HEIGHT = 180;
function chartParts(data, memory, series, scales) {
  const { plot } = scales;
  const keep = downsampleMinMax(series.t, series.v, Math.max(1, Math.floor(plot.right - plot.left)));
  const parts = [];
  for (const band of bandRects(memory.bands, memory.phases, scales)) {
    parts.push(svg("rect", { class: `tp-mem-band tp-mem-${band.phase}`, x: band.x, y: plot.top, width: band.width, height: plot.bottom - plot.top }));
  }
  const label = (text, at) => {
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
var MemoryView = class {
  /** @param {Context} ctx */
  constructor(ctx) {
    this.ctx = ctx;
    this.data = ctx.data;
    const memory = (
      /** @type {MemoryData} */
      ctx.data.memory
    );
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
    this.readout.textContent = p ? `${series.name} peak ${formatBytes(p.v)} at ${formatTime(p.t)} in ${this.data.path[p.row]} (${p.phase}) · click the line to open a layer` : series.name;
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
    this.cursor = /** @type {SVGElement} */
    parts.at(-1);
    chart.replaceChildren(...parts);
    const makeup = buildMakeup(this.data, series);
    this.makeupBox.replaceChildren(...makeup ? [makeup] : []);
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
    const i = this.pointOf(
      /** @type {MouseEvent} */
      event
    );
    if (i < 0) {
      cursor.setAttribute("visibility", "hidden");
      this.idle();
      return;
    }
    const x = String(this.scales.x(series.t[i]));
    cursor.setAttribute("x1", x);
    cursor.setAttribute("x2", x);
    cursor.setAttribute("visibility", "visible");
    this.readout.textContent = memoryReadout(this.data, series, i, phaseAt(this.memory, series.t[i]) ?? void 0);
  }
  /** @param {Event} event */
  click(event) {
    const i = this.pointOf(
      /** @type {MouseEvent} */
      event
    );
    if (i >= 0 && this.series.row[i] > 0) this.select(this.series.row[i]);
  }
  /** @param {Event} event */
  headClick(event) {
    const button = (
      /** @type {HTMLElement} */
      event.target.closest("button")
    );
    if (!button) return;
    if (button.dataset.row !== void 0) {
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
};
function create3(ctx) {
  return new MemoryView(ctx);
}
var offered2 = (data) => !!data.memory;
var controls3 = {};

// src/views/steps.js
var steps_exports = {};
__export(steps_exports, {
  controls: () => controls4,
  create: () => create4,
  offered: () => offered3,
  partLabel: () => partLabel,
  stepBars: () => stepBars
});
var PART_WORDS = (
  /** @type {Record<string, string>} */
  { data: "data loading", comm: "communication", other: "other (Python, idle)" }
);
function partLabel(part) {
  const bare = part.replace(/_us$/, "");
  return PART_WORDS[bare] ?? bare;
}
function stepBars(data) {
  const parts = (
    /** @type {string[]} */
    data.vocab.step_parts || []
  );
  const [idleKey, slowKey] = (
    /** @type {string[]} */
    data.vocab.step_extra || []
  );
  const steps = data.steps.map((s) => {
    const values = parts.map((p) => missing(s[p] ?? NaN) ? 0 : Math.max(0, s[p]));
    return {
      step: String(s.step),
      wall: s.wall_us ?? NaN,
      values,
      total: values.reduce((a, b) => a + b, 0),
      idle: idleKey ? s[idleKey] ?? NaN : NaN,
      slow: slowKey ? !!s[slowKey] : false
    };
  });
  const longest = Math.max(0, ...steps.map((s) => s.total));
  const walls = steps.map((s) => s.wall).filter((v) => !missing(v)).sort((a, b) => a - b);
  const median = walls.length ? walls.length % 2 ? walls[(walls.length - 1) / 2] : (walls[walls.length / 2 - 1] + walls[walls.length / 2]) / 2 : NaN;
  const min = walls.length ? walls[0] : NaN;
  const max = walls.length ? walls[walls.length - 1] : NaN;
  return {
    parts,
    steps: steps.map((s) => ({ ...s, shares: s.values.map((v) => longest > 0 ? v / longest : 0) })),
    median,
    min,
    max,
    spread: median > 0 ? (max - min) / median : NaN
  };
}
var StepsView = class {
  /** @param {Context} ctx */
  constructor(ctx) {
    this.ctx = ctx;
    this.el = h("div", { class: `tp-panel tp-panel-${ctx.view} tp-steps-view`, "data-view": ctx.view, "data-testid": ctx.view });
    this.onClick = this.onClick.bind(this);
    this.el.addEventListener("click", this.onClick);
    this.build();
  }
  build() {
    const bars = stepBars(this.ctx.data);
    const legend = h("div", { class: "tp-steps-legend" });
    bars.parts.forEach((p, k) => legend.append(h("span", { class: "tp-steps-key" }, h("span", { class: `tp-part tp-part-${k}` }), partLabel(p))));
    const slow = bars.steps.filter((s) => s.slow).map((s) => "#" + s.step);
    const spread = `${bars.steps.length} steps · wall median ${formatTime(bars.median)}, min ${formatTime(bars.min)}, max ${formatTime(bars.max)}` + (missing(bars.spread) ? "" : ` · spread ${formatPercent(bars.spread, 1)} of the median`) + (slow.length ? ` · slow: ${slow.join(", ")}` : " · no slow step");
    const list = h("div", { class: "tp-steps-list", role: "list" });
    for (const s of bars.steps) {
      const bar = h("span", { class: "tp-steps-bar" });
      s.values.forEach((v, k) => {
        if (v <= 0) return;
        const seg = h("span", { class: `tp-part tp-part-${k}`, title: `${partLabel(bars.parts[k])}: ${formatTime(v)} (${formatPercent(v, s.total)})` });
        seg.style.width = (100 * s.shares[k]).toFixed(3) + "%";
        bar.append(seg);
      });
      const title = bars.parts.map((p, k) => `${partLabel(p)} ${formatTime(s.values[k])}`).join("\n") + (missing(s.idle) ? "" : `
device idle ${formatTime(s.idle)}`);
      list.append(h(
        "button",
        { type: "button", class: `tp-steps-row${s.slow ? " tp-slow" : ""}`, role: "listitem", "data-testid": "step-bar", "data-step": s.step, title: `step ${s.step}: click to show it
${title}` },
        h("span", { class: "tp-steps-name", text: `#${s.step}` }),
        bar,
        h("span", { class: "tp-steps-wall", text: formatTime(s.wall) + (missing(s.idle) ? "" : ` · idle ${formatTime(s.idle)}`) }),
        h("span", { class: "tp-steps-flag", text: s.slow ? "slow" : "" })
      ));
    }
    this.el.replaceChildren(h("div", { class: "tp-steps-note", "data-testid": "steps-spread", text: spread }), legend, list);
  }
  /** @param {Event} event */
  onClick(event) {
    const button = (
      /** @type {HTMLElement|null} */
      /** @type {HTMLElement} */
      event.target.closest("[data-step]")
    );
    if (!button) return;
    const { ctx } = this;
    const st = ctx.state();
    const step = (
      /** @type {string} */
      button.dataset.step
    );
    ctx.change({ step, view: ctx.rowsView, selected: "", zoom: "", expanded: stepOpening(ctx.data, step, st.expandedList, !!st.show_ops) });
  }
  /** @param {import("../types.js").FullState} st */
  update(st) {
    for (const b of this.el.querySelectorAll("[data-step]")) b.setAttribute("aria-current", String(
      /** @type {HTMLElement} */
      b.dataset.step === st.step
    ));
  }
  resized() {
  }
  destroy() {
    this.el.removeEventListener("click", this.onClick);
  }
};
function create4(ctx) {
  return new StepsView(ctx);
}
var offered3 = (data) => data.steps.length > 0 && Array.isArray(data.vocab.step_parts);
var controls4 = {};

// src/views/table.js
var table_exports = {};
__export(table_exports, {
  OVERSCAN: () => OVERSCAN,
  ROW_HEIGHT: () => ROW_HEIGHT,
  controls: () => controls5,
  create: () => create5,
  keyAction: () => keyAction,
  listsRows: () => listsRows,
  virtualWindow: () => virtualWindow
});
function keyAction(data, view, expanded, root, current, key, page = 10) {
  const { rows, hasKids } = view;
  if (!rows.length) return null;
  const at = rows.indexOf(current);
  const pick = (k) => ({ select: rows[Math.max(0, Math.min(rows.length - 1, k))] });
  const open = current === root || expanded.has(data.path[current]);
  switch (key) {
    case "ArrowDown":
      return pick(at < 0 ? 0 : at + 1);
    case "ArrowUp":
      return pick(at < 0 ? 0 : at - 1);
    case "Home":
      return pick(0);
    case "End":
      return pick(rows.length - 1);
    case "PageDown":
      return pick(at + page);
    case "PageUp":
      return pick(at - page);
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
var ROW_HEIGHT = 24;
var OVERSCAN = 16;
function virtualWindow(scrollTop, viewportHeight, rowHeight, total, overscan = OVERSCAN) {
  const height = total * rowHeight;
  const visible = Math.ceil(Math.max(0, viewportHeight) / rowHeight) + 1;
  const maxFirst = Math.max(0, total - visible + 1);
  const first = Math.min(maxFirst, Math.max(0, Math.floor(scrollTop / rowHeight)));
  const start = Math.max(0, first - overscan);
  const end = Math.min(total, first + visible + overscan);
  return { start, end, offset: start * rowHeight, height };
}
function nodeTitle(data, i, folded) {
  const kind = data.vocab.kinds[data.kind[i]];
  const lines = [data.path[i], data.type[i] ? `${kind} · ${data.type[i]}` : kind];
  if (data.backward[i]) lines[1] += " · backward";
  if (data.shapes[i]) lines.push("input shapes: " + data.shapes[i]);
  if (data.source[i]) lines.push("called from: " + data.source[i]);
  if (folded) lines.push(`ran in ${folded.runs[i]} of ${folded.count} steps; numbers are means per step`);
  return lines.join("\n");
}
function rowTemplate(columns) {
  const row = h("div", { class: "tp-row", role: "row" });
  for (const col of columns) {
    if (col.type === NODE) {
      row.append(h(
        "div",
        { class: "tp-cell tp-name", role: "gridcell", "data-col": col.key },
        h("span", { class: "tp-caret-slot" }),
        labelElement(),
        h("span", { class: "tp-badge" }),
        h("span", { class: "tp-tag" })
      ));
    } else if (col.type === "time") {
      row.append(h(
        "div",
        { class: `tp-cell tp-num tp-fam-${col.family}`, role: "gridcell", "data-col": col.key },
        h("span", { class: "tp-bar" }),
        h("span", { class: "tp-v" }),
        h("span", { class: "tp-pct" })
      ));
    } else {
      row.append(h("div", { class: "tp-cell tp-num", role: "gridcell", "data-col": col.key }, h("span", { class: "tp-v" })));
    }
  }
  const template = document.createElement("template");
  template.content.append(row);
  return template;
}
function measureColumns(host, table, numeric, folded) {
  const groups = numeric.map((col) => {
    const values2 = col.spread && folded ? folded[col.spread][col.key] : table.num[col.key];
    let lo = Infinity;
    let hi = -Infinity;
    for (const v of values2) {
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    if (!(hi >= lo)) lo = hi = 0;
    const base = col.of ? table.num[col.of][0] : NaN;
    const alt = table.spec[col.key]?.layer_alt;
    if (alt && !col.spread) {
      for (const v of table.num[alt]) if (v > hi) hi = v;
    }
    return {
      values: widthSamples(col.type, lo, hi),
      pct: col.type === "time" ? percentSamples(lo, hi, base) : [],
      words: col.label.split(/\s+/)
    };
  });
  const width = (cls, lists) => {
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
  return numeric.map((_, j) => ({ value: values[j], pct: pcts[j], head: heads[j] + 14 }));
}
function fillNumber(cell, col, table, i, folded) {
  const v = (
    /** @type {Float64Array} */
    col.values[i]
  );
  const value = (
    /** @type {Element} */
    col.type === "time" ? cell.children[1] : cell.firstElementChild
  );
  const empty = Number.isNaN(v) || v === 0 && col.type !== "int";
  const el = (
    /** @type {HTMLElement} */
    cell
  );
  if (col.type === "time") {
    const base = (
      /** @type {number} */
      col.base
    );
    const pct = empty ? 0 : 100 * v / base;
    value.textContent = empty ? "" : formatTime(v);
    cell.children[2].textContent = empty ? "" : cellPercent(v, base);
    cell.firstElementChild.style.width = Number.isFinite(pct) ? Math.max(0, Math.min(100, pct)) + "%" : "0";
    let title = empty ? "" : exactTitle(v, "µs");
    if (folded && !col.spread && !empty && folded.low[col.key]) {
      title = `mean ${formatTime(v)} · min ${formatTime(folded.low[col.key][i])} · max ${formatTime(folded.high[col.key][i])} over ${folded.count} steps
${title}`;
    }
    el.title = title;
  } else if (col.type === "bytes") {
    value.textContent = empty ? "" : formatBytes(v);
    const own = col.self ? table.num[col.self][i] : NaN;
    el.title = empty ? "" : `${exactTitle(v, "bytes")}
self: ${formatBytes(own)}`;
  } else if (col.type === "count") {
    if (Number.isNaN(v) && col.unknown) {
      value.textContent = col.unknown;
      el.title = "Unknown: this row holds an op of unknown cost (listed in prof.unsupported_ops, said under the profile)";
      return;
    }
    value.textContent = empty ? "" : formatCount(v);
    const R = table.roles;
    el.title = empty ? "" : col.key === R.flops && table.num[R.macs] ? `${exactTitle(v, table.spec[R.flops].label)}
${table.spec[R.macs].label}: ${formatCount(table.num[R.macs][i])}` : exactTitle(v, col.key);
  } else {
    value.textContent = Number.isNaN(v) ? "" : String(v);
  }
  if (table.spec[col.key].delta) markDelta(cell, v);
}
var NAMES_MEASURED = 2e3;
function nodeNeed(host, table, root, rows, cache) {
  const shown = rows.slice(0, NAMES_MEASURED);
  const fresh = /* @__PURE__ */ new Set();
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
    for (const k of keys) cache.set(k, 1.04 * (k[0] === "n" ? names[a++] : tags[b++]));
    if (names.every((w) => w === 0) && keys.length) for (const k of keys) cache.delete(k);
  }
  const indent = parseFloat(getComputedStyle(host).getPropertyValue("--tp-indent")) || 14;
  let need = 0;
  for (const i of shown) {
    const tag = typeTag(table, i);
    const w = 4 + (table.depth[i] - table.depth[root]) * indent + 18 + (cache.get("n" + table.name[i]) || 0) + (table.backward[i] ? 36 : 0) + (tag ? 8 + (cache.get("t" + tag) || 0) : 0) + CELL_PAD / 2 + 1;
    if (w > need) need = w;
  }
  return Math.ceil(need);
}
var TableView = class {
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
    this.columns = [];
    this.numeric = [];
    this.signature = "";
    this.template = document.createElement("template");
    this.measured = [];
    this.spare = [];
    this.headHeight = 0;
    this.windowStart = 0;
    this.version = 0;
    this.view = { rows: [], hasKids: new Uint8Array(0), shown: new Uint8Array(0) };
    this.st = ctx.state();
    this.viewed = viewedTable(this.data, "");
    this.selectedRow = -1;
    this.revealed = "";
    this.hot = hotRows(ctx.data);
    this.nameWidths = /* @__PURE__ */ new Map();
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
    const sig2 = columns.map((c) => c.label).join("|");
    if (sig2 === this.signature) return;
    this.signature = sig2;
    this.columns = columns;
    this.numeric = columns.filter((c) => c.type !== NODE);
    this.head.replaceChildren(...columns.map((col) => h("div", {
      class: `tp-th${col.type === NODE ? " tp-name" : " tp-num"}`,
      role: "columnheader",
      "data-col": col.key,
      "data-sortable": col.sortable ? "1" : null,
      tabindex: col.sortable ? "0" : null,
      title: col.title + (col.sortable ? "\nClick (or Enter) to sort" : "")
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
    const badge2 = label.nextElementSibling;
    badge2.textContent = bwd ? "bwd" : "";
    const tag = typeTag(table, i);
    const tagEl = badge2.nextElementSibling;
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
    if (shift > 0 && shift < have) for (let k = 0; k < shift; k++) rowsBox.append(
      /** @type {Element} */
      rowsBox.firstElementChild
    );
    else if (shift < 0 && -shift < have) for (let k = 0; k < -shift; k++) rowsBox.prepend(
      /** @type {Element} */
      rowsBox.lastElementChild
    );
    for (; have > count; have--) spare.push(
      /** @type {HTMLElement} */
      rowsBox.removeChild(
        /** @type {Element} */
        rowsBox.lastElementChild
      )
    );
    for (; have < count; have++) rowsBox.append(spare.pop() || /** @type {Element} */
    this.template.content.firstElementChild.cloneNode(true));
    this.windowStart = win.start;
    let row = rowsBox.firstElementChild;
    for (let k = 0; k < count; k++, row = /** @type {Element} */
    row.nextElementSibling) this.fillRow(row, view.rows[win.start + k]);
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
    const target = (
      /** @type {HTMLElement} */
      event.target
    );
    const th = (
      /** @type {HTMLElement|null} */
      target.closest(".tp-th")
    );
    if (th) {
      if (th.dataset.sortable) this.sortBy(
        /** @type {string} */
        th.dataset.col
      );
      return;
    }
    const rowEl = target.closest('[role="row"][data-path]');
    if (!rowEl) return;
    const path = (
      /** @type {string} */
      rowEl.getAttribute("data-path")
    );
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
    const th = (
      /** @type {HTMLElement|null} */
      /** @type {HTMLElement} */
      event.target.closest(".tp-th")
    );
    if (th) {
      if ((event.key === "Enter" || event.key === " ") && th.dataset.sortable) {
        event.preventDefault();
        this.sortBy(
          /** @type {string} */
          th.dataset.col
        );
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
    const values = {};
    if (action.toggle !== void 0) values.expanded = toggleExpanded(now.expandedList, action.toggle);
    if (action.select !== void 0) {
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
      const t = (
        /** @type {HTMLElement} */
        th
      );
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
};
function create5(ctx) {
  return new TableView(ctx);
}
var controls5 = { threshold: true, ops: true, search: true, sort: true, expand: true, rowCount: true, hiddenNote: true };
var listsRows = true;

// src/views/top.js
var top_exports = {};
__export(top_exports, {
  byType: () => byType,
  controls: () => controls6,
  create: () => create6,
  foldStepLayers: () => foldStepLayers,
  shortOpName: () => shortOpName,
  topColumn: () => topColumn,
  topLayers: () => topLayers
});
function topColumn(data, metric) {
  const spec = data.spec[metric];
  if (spec?.rollup === "self" && spec.layer_alt) return metric;
  const selfOf = (total) => data.vocab.columns.find((c) => c.subtree === total && c.layer_alt);
  return (selfOf(metric) ?? selfOf(data.vocab.threshold_column))?.name ?? metric;
}
function topLayers(data, root, selfColumn, limit = 100) {
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
function foldStepLayers(data, ranked) {
  const prefix = data.vocab.step_prefix;
  const groups = /* @__PURE__ */ new Map();
  for (const t of ranked) {
    const path = data.path[t.row];
    const inStep = !!prefix && path.startsWith(prefix);
    const cut = inStep ? path.indexOf("/") : -1;
    const key = cut > 0 ? path.slice(cut + 1) : inStep ? prefix + "*" : path;
    let g = groups.get(key);
    if (!g) groups.set(key, g = { row: t.row, value: 0, best: -Infinity, key, steps: 0, ops: /* @__PURE__ */ new Map() });
    g.value += t.value;
    if (inStep) g.steps++;
    if (t.value > g.best) [g.best, g.row] = [t.value, t.row];
    for (const o of t.ops) {
      const op = g.ops.get(data.name[o.row]);
      if (op) op.value += o.value;
      else g.ops.set(data.name[o.row], { ...o });
    }
  }
  return [...groups.values()].map((g) => ({ row: g.row, value: g.value, key: g.key, steps: g.steps, ops: [...g.ops.values()].sort((a, b) => b.value - a.value || a.row - b.row) })).sort((a, b) => b.value - a.value || a.row - b.row);
}
function byType(data, root = 0) {
  const moduleCode = data.moduleCode;
  const additive = data.vocab.columns.filter((c) => ["total", "self", "count"].includes(c.rollup) && c.name in data.num);
  const groups = /* @__PURE__ */ new Map();
  const path = [];
  const runs = [/* @__PURE__ */ new Map()];
  for (let i = root; i < data.end[root]; i++) {
    while (path.length && path[path.length - 1] !== data.parent[i]) {
      const top = (
        /** @type {number} */
        path.pop()
      );
      if (data.kind[top] === moduleCode) {
        const counts = runs[runs.length - 1];
        const t = String(data.type[top]);
        counts.set(
          t,
          /** @type {number} */
          counts.get(t) - 1
        );
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
      runs.push(/* @__PURE__ */ new Map());
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
function shortOpName(data, i) {
  const name = data.name[i];
  const prefix = data.vocab.backward_prefix;
  return prefix && name.startsWith(prefix) ? `${name.slice(prefix.length)} (bwd)` : name;
}
function create6(ctx) {
  const { data } = ctx;
  const layersBox = h("div", { class: "tp-top-list", role: "list", "data-testid": "top-layers" });
  const typesBox = h("div", { class: "tp-top-list", role: "list", "data-testid": "top-types" });
  const layersTitle = h("h3", { class: "tp-top-title" });
  const foldBox = (
    /** @type {HTMLInputElement} */
    h("input", { type: "checkbox", "data-testid": "top-fold-steps", checked: true })
  );
  const foldLabel = h("label", { class: "tp-ctl tp-top-fold", title: "Add up each layer over the ProfilerStep#N rows it ran in" }, foldBox, " fold steps");
  const typesTitle = h("h3", { class: "tp-top-title" });
  const el = h(
    "div",
    { class: `tp-panel tp-panel-${ctx.view}`, "data-view": ctx.view },
    h("section", { class: "tp-top-section" }, h("div", { class: "tp-top-head" }, layersTitle, foldLabel), layersBox),
    h("section", { class: "tp-top-section" }, typesTitle, typesBox)
  );
  let viewed = viewedTable(data, "");
  let last = null;
  function line(rank, name, title, tag, value, pct, share, note) {
    const label = labelElement();
    fillLabel(label, name, null);
    const bar = h("span", { class: "tp-bar" });
    bar.style.width = Math.max(0, Math.min(100, share)) + "%";
    return h(
      "div",
      { class: "tp-top-row", role: "listitem", title },
      h("span", { class: "tp-top-rank", text: String(rank) }),
      h("span", { class: "tp-top-name" }, label, h("span", { class: "tp-tag", text: tag })),
      h("span", { class: "tp-top-value tp-num" }, bar, h("span", { class: "tp-v", text: value }), h("span", { class: "tp-pct", text: pct })),
      h("span", { class: "tp-top-note", text: note })
    );
  }
  function onClick(event) {
    const row = (
      /** @type {HTMLElement|null} */
      /** @type {HTMLElement} */
      event.target.closest(".tp-top-row[data-path]")
    );
    if (row) ctx.change({ selected: (
      /** @type {string} */
      row.dataset.path
    ) });
  }
  function onOpen(event) {
    const row = (
      /** @type {HTMLElement|null} */
      /** @type {HTMLElement} */
      event.target.closest(".tp-top-row[data-path]")
    );
    if (!row) return;
    if (event instanceof KeyboardEvent && event.key !== "Enter") return;
    const path = (
      /** @type {string} */
      row.dataset.path
    );
    const i = rowOfPath(viewed.table, path);
    ctx.change({ view: ctx.rowsView, selected: path, expanded: expandTo(viewed.table, i, viewed.root, ctx.state().expandedList) });
  }
  el.addEventListener("click", onClick);
  foldBox.addEventListener("change", () => last && face.update(
    last,
    viewed,
    /** @type {any} */
    null
  ));
  el.addEventListener("dblclick", onOpen);
  el.addEventListener("keydown", onOpen);
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
      const label = shownSpec(table, selfColumn, false).label;
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
        const row = line(
          k + 1,
          where,
          `${table.path[i]}${inSteps ? ` (the costliest of its ${t.steps} steps; the time adds them up)` : ""}
${label}: ${formatTime(t.value)}${ops ? "\nops: " + ops : ""}
Double-click or Enter: show in the table`,
          tag,
          formatTime(t.value),
          cellPercent(t.value, base),
          100 * t.value / base,
          note
        );
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
      const calls = (g) => g.sums[table.roles.calls];
      typesBox.replaceChildren(...ranked.map((g, k) => line(
        k + 1,
        g.type,
        `${g.type}: ${g.modules} modules
${label} (ops folded in): ${formatTime(g.sums[alt])}
${table.spec[totalColumn].label} (outermost of each): ${formatTime(g.sums[totalColumn])}
calls: ${calls(g)}`,
        `${g.modules}×`,
        formatTime(g.sums[alt]),
        cellPercent(g.sums[alt], base),
        100 * g.sums[alt] / base,
        `${table.spec[totalColumn].label} ${formatTime(g.sums[totalColumn])} · ${calls(g)} call${calls(g) === 1 ? "" : "s"}${viewed.folded ? ` in ${viewed.folded.count} steps` : ""}`
      )));
      if (!top.length) layersBox.append(h("p", { class: "tp-empty", text: "No layer has self time here." }));
    },
    resized() {
    },
    destroy() {
    }
  };
  return face;
}
var controls6 = { search: true };

// src/views/index.js
var VIEWS = { table: table_exports, insights: insights_exports, flame: flame_exports, top: top_exports, steps: steps_exports, memory: memory_exports };

// src/widget.js
function offeredViews(data) {
  return data.vocab.views.filter((v) => VIEWS[v] && (!VIEWS[v].offered || VIEWS[v].offered(data))).map((v) => [v, VIEWS[v]]);
}
function mount(root, model, data) {
  root.style.setProperty("--tp-row", ROW_HEIGHT + "px");
  const offered4 = offeredViews(data);
  const summary = h("div", { class: "tp-summary", "data-testid": "summary" });
  buildSummary(summary, data);
  const headline = buildHeadline(data);
  if (headline) summary.append(headline);
  const controls7 = buildControls(data, offered4.map(([name, view]) => [name, view.controls || {}]));
  for (const [name, view] of offered4) {
    const count = view.badge ? view.badge(data) : "";
    const button = [...controls7.switcher.children].find((b) => (
      /** @type {HTMLElement} */
      b.dataset.view === name
    ));
    if (count && button) button.append(h("span", { class: "tp-switch-badge", text: count }));
  }
  const body = h("div", { class: "tp-body" });
  root.replaceChildren(summary, controls7.bar, controls7.note, body);
  const state = stateReader(model, data.vocab);
  const names = offered4.map(([name]) => name);
  const rowsView = offered4.find(([, view]) => view.listsRows)?.[0] ?? names[0];
  const fallback = names.includes(stateDefaults(data.vocab).view) ? stateDefaults(data.vocab).view : names[0];
  const change = (values) => {
    for (const [k, v] of Object.entries(values)) model.set(k, v);
    model.save_changes();
  };
  const faces = {};
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
    showControls(controls7, data, st, view, viewed, vis);
    root.dataset.view = view;
    const current = face(view);
    for (const [name, f] of Object.entries(faces)) f.el.hidden = name !== view;
    current.update(st, viewed, vis);
    root.dataset.renders = String(++renders);
    root.setAttribute("aria-busy", "false");
  };
  const ctx = (
    /** @type {Context} */
    { root, model, data, state, change, view: rowsView, rowsView }
  );
  const unbind = bind(root, model, data, { controls: controls7, state, change, redraw, faces, open: (row) => openRow(ctx, row) });
  redraw();
  return () => {
    unbind();
    for (const f of Object.values(faces)) f.destroy();
  };
}
function bind(root, model, data, { controls: controls7, state, change, redraw, faces, open }) {
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
  const onClick = (event) => {
    const target = (
      /** @type {HTMLElement} */
      event.target
    );
    const viewButton = (
      /** @type {HTMLElement|null} */
      target.closest(".tp-switch-btn")
    );
    if (viewButton) return change({ view: viewButton.dataset.view });
    const headlineLink = (
      /** @type {HTMLElement|null} */
      target.closest('[data-testid="headline-layer"]')
    );
    if (headlineLink) return open(Number(headlineLink.dataset.row));
    const button = (
      /** @type {HTMLElement|null} */
      target.closest("button[data-testid]")
    );
    if (!button || button.closest(".tp-body")) return;
    const viewed = viewedTable(data, state().step);
    const action = button.dataset.testid;
    if (action === "expand-all") change({ expanded: allExpandable(viewed.table) });
    else if (action === "collapse-all") change({ expanded: [] });
    else if (action === "show-hidden") change({ min_pct: 0, search: "" });
    else if (action === "export-csv") exportCSV(root, data, viewed, state().step);
  };
  const onInput = (event) => {
    const values = inputChange(controls7, data, state(), event.target);
    if (values) change(values);
  };
  const onChange = (event) => {
    const values = pickChange(controls7, data, state(), event.target);
    if (values) change(values);
  };
  const keep = (event) => event.stopPropagation();
  const events = data.vocab.state.map((k) => "change:" + k.name);
  for (const e of events) model.on(e, schedule);
  root.setAttribute("data-lm-suppress-shortcuts", "true");
  const listeners = (
    /** @type {[string, (e: any) => void][]} */
    [
      ["click", onClick],
      ["input", onInput],
      ["change", onChange],
      ["keydown", keep],
      ["keyup", keep],
      ["keypress", keep]
    ]
  );
  for (const [type, fn] of listeners) root.addEventListener(type, fn);
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(() => faces[
    /** @type {string} */
    root.dataset.view
  ]?.resized()) : null;
  resize?.observe(root);
  return () => {
    for (const e of events) model.off(e, schedule);
    resize?.disconnect();
    for (const [type, fn] of listeners) root.removeEventListener(type, fn);
  };
}
function exportCSV(root, data, viewed, step) {
  const rows = [];
  for (let i = viewed.root; i < viewed.table.end[viewed.root]; i++) rows.push(i);
  const blob = new Blob([toCSV(viewed.table, rows)], { type: "text/csv;charset=utf-8" });
  const url = URL.createObjectURL(blob);
  const link = h("a", { href: url, download: exportFileName(data, step), hidden: true });
  root.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 6e4);
}
async function render({ model, el }) {
  const root = h("div", { class: "torchprof", "data-testid": "torchprof", "aria-busy": "true" });
  el.append(root);
  let unmount = () => {
  };
  let generation = 0;
  async function load() {
    const mine = ++generation;
    let data;
    try {
      data = await loadPayload(model.get("data"));
    } catch (err) {
      root.replaceChildren(h("div", { class: "tp-error", text: `torchprof: cannot show this profile (${/** @type {Error} */
      err.message})` }));
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
var widget_default = { render };
export {
  CELL_PAD,
  COLOURINGS,
  FLAME_ROW,
  FORMAT,
  NODE,
  NODE_MAX,
  NODE_MIN,
  OVERSCAN,
  PCT_GAP,
  ROW_HEIGHT,
  SLIDER_STEPS,
  VIEWS,
  allExpandable,
  ancestorPaths,
  ancestry,
  bandRects,
  buildControls,
  buildHeadline,
  byType,
  cached,
  canvasPalette,
  cellPercent,
  column,
  columnsFor,
  compareNatural,
  createModel,
  csvField,
  csvText,
  decodePayload,
  widget_default as default,
  defaultExpanded,
  deltaClass,
  deltaColour,
  downsampleMinMax,
  execChildren,
  expandLeafLayers,
  expandMatches,
  expandTo,
  exportFileName,
  flameColouring,
  flameDeltas,
  flameHit,
  flameLayout,
  flameMetric,
  flameMetrics,
  flameTip,
  formatBytes,
  formatCount,
  formatFraction,
  formatPercent,
  formatRate,
  formatTime,
  formatValue,
  globToRegExp,
  hasData,
  headlineOf,
  hiddenCounts,
  hiddenNote,
  hotPathIn,
  hotRows,
  inflate,
  inputChange,
  isLeafLayer,
  isStepRow,
  isTextColumn,
  keyAction,
  loadPayload,
  lowered,
  luminance,
  makeMatcher,
  markDelta,
  matchRange,
  matchesType,
  memoryPath,
  memoryReadout,
  memoryScales,
  missing,
  naturalKey,
  numberColumns,
  offeredViews,
  openRow,
  openRowValues,
  parseSearch,
  pathTest,
  pctLabel,
  pctToSlider,
  percentSamples,
  phaseAt,
  phaseColumns,
  phaseRoles,
  phaseShares,
  pickChange,
  pointAt,
  pyFixed,
  render,
  resolveSort,
  rowOfPath,
  selectRows,
  shortOpName,
  showControls,
  shownSpec,
  shownValues,
  sliderToPct,
  sortsAscending,
  stateDefaults,
  stateReader,
  stateValue,
  stepOpening,
  stepRows,
  tableLayout,
  textTest,
  toCSV,
  toggleExpanded,
  topColumn,
  topLayers,
  typeHue,
  typeTest,
  viewLabel,
  viewedTable,
  virtualWindow,
  visibleRows,
  widthSamples,
  withPaths
};
