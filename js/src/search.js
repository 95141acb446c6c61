// @ts-check
// The search (mirror of src/torchprof/_views/rows.py text_test, path_test, row_matcher): a name
// contains a pattern or matches it as a glob; after `path:`, the same on paths.
import { lowered } from "./payload.js";

/** @import { Data, Vocab } from "./types.js" */

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
 * _views/rows.py type_test: one lower-cased pattern against a lower-cased module class: a glob
 * of the whole class, anything else the whole class (`conv2` finds layers named conv2, not every
 * Conv2d).
 * @param {string} pattern @returns {(t: string) => boolean}
 */
export function typeTest(pattern) {
  if (!isGlob(pattern)) return (t) => t === pattern;
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
 * @returns {{onPath: boolean, pattern: string, test: (t: string) => boolean, ofType: (t: string) => boolean}[]}
 */
export function parseSearch(vocab, search) {
  let patterns = search;
  if (typeof search === "string") patterns = search.trim() ? [search] : [];
  const prefix = vocab.path_search;
  return /** @type {string[]} */ (patterns || []).map((raw) => {
    const p = raw.toLowerCase();
    if (p.startsWith(prefix)) {
      const pattern = p.slice(prefix.length).trim();
      const test = pathTest(pattern);
      return { onPath: true, pattern, test, ofType: test };
    }
    return { onPath: false, pattern: p, test: textTest(p), ofType: typeTest(p) };
  });
}

/**
 * _views/rows.py row_matcher: `(row) => matches` for a table, or null when nothing is searched.
 * A pattern matches names and a module's class (`Conv2d` finds every convolution); one starting
 * `path:` matches paths. Several patterns: any.
 * @param {Data} data @param {string|string[]|undefined} search
 * @returns {((i: number) => boolean)|null}
 */
export function makeMatcher(data, search) {
  const tests = parseSearch(data.vocab, search);
  if (tests.length === 0) return null;
  const names = lowered(data, data.roles.name);
  const paths = tests.some((t) => t.onPath) ? lowered(data, data.roles.path) : names;
  const types = data.roles.type ? lowered(data, data.roles.type) : [];
  const module = data.moduleCode;
  return (i) => tests.some((t) => {
    if (t.onPath) return t.test(/** @type {string} */ (paths[i]));
    if (t.test(/** @type {string} */ (names[i]))) return true;
    const type = data.kind[i] === module ? types[i] : null;
    return typeof type === "string" && t.ofType(type);
  });
}

/**
 * Whether the search matches a module's class (its type tag is highlighted).
 * @param {Vocab} vocab @param {string} search @param {string} type
 */
export function matchesType(vocab, search, type) {
  if (!type) return false;
  const lower = type.toLowerCase();
  return parseSearch(vocab, search).some((t) => !t.onPath && t.ofType(lower));
}

/**
 * Where the search matches a name, for highlighting: [start, end) of the first substring match,
 * the whole name for a glob match, null for none. With the row's `path`, a `path:` search that
 * matches it marks the name's part of the match (the whole name when the match lies above it).
 * @param {Vocab} vocab @param {string} search @param {string} name @param {string} [path]
 * @returns {[number, number]|null}
 */
export function matchRange(vocab, search, name, path) {
  const lower = name.toLowerCase();
  for (const t of parseSearch(vocab, search)) {
    if (t.onPath) {
      if (path === undefined || !t.pattern || !t.test(path.toLowerCase())) continue;
      const p = path.toLowerCase();
      const nameAt = p.endsWith(lower) ? p.length - lower.length : -1;
      const at = isGlob(t.pattern) ? -1 : p.lastIndexOf(t.pattern);
      // The part of the name inside the matched substring; all of it when the match is elsewhere.
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

