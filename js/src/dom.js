// @ts-check
// Building the DOM: elements, SVG, measured text widths, exact values for tooltips, and a name's
// label (one text node, a search match marked). Text from the profile only ever reaches the DOM
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

/** An empty label (fillLabel fills it). */
export function labelElement() {
  return h("span", { class: "tp-label" });
}

/**
 * Fills a label element with a name: one text node, so that copying a row gives the name intact
 * (the table gives the Node column the room its names need; where one still does not fit, its
 * end gives way to "…" and the row's tooltip has the whole path). A search match is marked.
 * @param {HTMLElement} label @param {string} name @param {[number, number]|null} range
 */
export function fillLabel(label, name, range) {
  if (!range || range[1] <= range[0]) {
    if (label.childNodes.length !== 1 || label.textContent !== name) label.textContent = name;
    return;
  }
  const [a, b] = range;
  label.replaceChildren(...[name.slice(0, a), h("mark", { text: name.slice(a, b) }), name.slice(b)].filter((part) => part !== ""));
}

/**
 * The type tag a row's name gets: a module's class, unless that is its name already (an
 * unlabelled root: "ResNet", not "ResNet ResNet"); "" for the rest.
 * @param {import("./types.js").Data} data @param {number} i
 */
export function typeTag(data, i) {
  return data.kind[i] === data.moduleCode && data.type[i] !== data.name[i] ? data.type[i] || "" : "";
}
