// @ts-check
// What a memory peak is made of (src/torchprof/_views/memory.py `makeup`), for the Memory view:
// a stacked bar of the vocabulary's `memory_categories` (parameters, gradients, optimizer state,
// activations, temporaries, autograd's own, other) and the layers holding the most at the peak.
import { h } from "./dom.js";
import { formatBytes, formatPercent } from "./format.js";

/** @import { Data } from "./types.js" */

/**
 * One device's make-up.
 * @typedef {object} Makeup
 * @property {number[]} categories bytes per category at the peak, in the vocabulary's order
 * @property {[string, number, number, number[]][]} layers [path, row or -1, bytes, bytes per category]
 * @property {number} allocator the allocator's own total at the peak
 * @property {number} before bytes allocated before the profiled block that the peak holds
 */

/** A category in words: "optimizer_state" -> "optimizer state". @param {string} category */
export function categoryLabel(category) {
  return category.replace(/_/g, " ");
}

/**
 * The bar's segments (pure: node-tested): each category with bytes, its label and share of the
 * total, in the vocabulary's order, and the total.
 * @param {string[]} categories @param {Makeup} makeup
 */
export function makeupSegments(categories, makeup) {
  const total = makeup.categories.reduce((a, b) => a + Math.max(0, b || 0), 0);
  const segments = categories.map((c, k) => ({ category: c, index: k, label: categoryLabel(c), bytes: Math.max(0, makeup.categories[k] || 0) }))
    .filter((s) => s.bytes > 0)
    .map((s) => ({ ...s, share: total > 0 ? s.bytes / total : 0 }));
  return { total, segments };
}

/**
 * The make-up box: a title, the stacked bar with its legend, and the top layers (a button each
 * that opens the layer in the table: `data-row`). Null when the device has no make-up.
 * @param {Data} data @param {{name: string, makeup?: Makeup|null}} series
 */
export function buildMakeup(data, series) {
  const makeup = series.makeup;
  const categories = data.vocab.memory_categories || [];
  if (!makeup || !categories.length) return null;
  const { total, segments } = makeupSegments(categories, makeup);
  if (!(total > 0)) return null;
  const bar = h("div", { class: "tp-makeup-bar", "data-testid": "memory-makeup-bar", role: "img",
    "aria-label": segments.map((s) => `${s.label} ${formatBytes(s.bytes)}`).join(", ") });
  const legend = h("div", { class: "tp-makeup-legend" });
  for (const s of segments) {
    const seg = h("span", { class: `tp-makeup-seg tp-cat-${s.index}`, "data-category": s.category, title: `${s.label}: ${formatBytes(s.bytes)} (${formatPercent(s.bytes, total)})` });
    seg.style.width = (100 * s.share).toFixed(3) + "%";
    bar.append(seg);
    legend.append(h("span", { class: "tp-makeup-key" }, h("span", { class: `tp-makeup-swatch tp-cat-${s.index}` }),
      `${s.label} `, h("b", { text: formatBytes(s.bytes) }), ` (${formatPercent(s.bytes, total)})`));
  }
  const note = [`What ${series.name}'s peak holds: ${formatBytes(total)}`];
  if (makeup.before > 0) note.push(`${formatBytes(makeup.before)} of it allocated before the profiled block`);
  const layers = h("ol", { class: "tp-makeup-layers", "data-testid": "memory-makeup-layers" });
  for (const [path, row, bytes, per] of makeup.layers) {
    const parts = categories.map((c, k) => (per[k] > 0 ? `${categoryLabel(c)} ${formatBytes(per[k])}` : "")).filter(Boolean).join(", ");
    const name = row >= 0 ? h("button", { type: "button", class: "tp-link", "data-row": row, title: "Show this layer in the table", text: path }) : h("span", { text: path });
    layers.append(h("li", {}, name, h("span", { class: "tp-makeup-bytes", text: ` ${formatBytes(bytes)} (${formatPercent(bytes, total)})` }),
      h("span", { class: "tp-makeup-parts", text: parts ? ` · ${parts}` : "" })));
  }
  return h("div", { class: "tp-makeup", "data-testid": "memory-makeup" },
    h("div", { class: "tp-makeup-title", text: note.join(" · ") }), bar, legend,
    h("div", { class: "tp-makeup-title", text: "Layers holding the most at the peak" }), layers);
}
