// @ts-check
// Building the DOM: elements, SVG, measured text widths, exact values for tooltips, and a name's
// label (the head gives way, the tail shows). Text from the profile only ever reaches the DOM
// through textContent and setAttribute; nothing here touches the DOM at import time.
import { missing } from "./format.js";

/**
 * An element with attributes (`text` sets its text; null, undefined and false leave one out) and
 * children.
 * @param {string} tag @param {Record<string, any>|null} attrs @param {...(Node|string)} children
 * @returns {HTMLElement}
 */
export function h(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  node.append(...children);
  return node;
}

/** @type {string|null} */
let svgNamespace = null; // taken from a parsed <svg>: the report page must name no URL at all

/**
 * An SVG element with attributes.
 * @param {string} tag @param {Record<string, string|number>} attrs
 * @returns {SVGElement}
 */
export function svg(tag, attrs) {
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
 * Widths of texts as the widget draws them, measured in one layout pass: each text in a span
 * with `className` inside a hidden box in the widget (so the widget's fonts apply). Zero while
 * the widget is not laid out (not attached yet, or hidden).
 * @param {HTMLElement} host @param {string} className @param {string[]} texts
 */
export function measureTexts(host, className, texts) {
  const box = h("div", { class: "tp-measure", "aria-hidden": "true" });
  const spans = texts.map((t) => h("span", { class: className, text: t }));
  box.append(...spans);
  host.append(box);
  const widths = spans.map((s) => s.getBoundingClientRect().width);
  box.remove();
  return widths;
}

/** @type {Intl.NumberFormat|null} */
let exactFormat = null; // one Intl formatter: creating one per call costs more than a row

/** A value to the last digit, for a tooltip: "1,234,567.5 µs"; "" when missing. @param {number} v @param {string} unit */
export function exactTitle(v, unit) {
  exactFormat ??= new Intl.NumberFormat("en-US", { maximumFractionDigits: 3 });
  return missing(v) ? "" : `${exactFormat.format(v)} ${unit}`;
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

/** An empty label: a head that gives way and a tail that shows (fillLabel fills it). */
export function labelElement() {
  return h("span", { class: "tp-label" }, h("span", { class: "tp-label-head" }), h("span", { class: "tp-label-tail" }));
}

/**
 * Fills a label element with a name's head and tail (the head gives way, "…" in the middle) and
 * the search match marked.
 * @param {HTMLElement} label @param {string} name @param {[number, number]|null} range
 */
export function fillLabel(label, name, range) {
  const parts = labelParts(name, range);
  const [head, tail] = /** @type {HTMLElement[]} */ ([label.firstElementChild, label.lastElementChild]);
  for (const [box, runs] of /** @type {const} */ ([[head, parts.head], [tail, parts.tail]])) {
    if (runs.length === 1 && !runs[0].mark) box.textContent = runs[0].text;
    else box.replaceChildren(...runs.map((r) => (r.mark ? h("mark", { text: r.text }) : r.text)));
  }
}

/**
 * The type tag a row's name gets: a module's class, unless that is its name already (an
 * unlabelled root: "ResNet", not "ResNet ResNet"); "" for the rest.
 * @param {import("./types.js").Data} data @param {number} i
 */
export function typeTag(data, i) {
  return data.kind[i] === data.moduleCode && data.type[i] !== data.name[i] ? data.type[i] || "" : "";
}
