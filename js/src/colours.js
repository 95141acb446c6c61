// @ts-check
// Colours: a change between two runs (green faster, red slower), a module type's hue, and how
// light a theme's background is.

/**
 * The class of a delta cell: a time that went down is faster, one that went up slower; none for
 * no change or a missing value.
 * @param {number} v
 */
export function deltaClass(v) {
  return Number.isNaN(v) || v === 0 ? "" : v < 0 ? "tp-faster" : "tp-slower";
}

/** Colours a cell of a column the payload flags `delta`. @param {Element} cell @param {number} v */
export function markDelta(cell, v) {
  cell.classList.add("tp-delta");
  cell.classList.remove("tp-faster", "tp-slower");
  const cls = deltaClass(v);
  if (cls) cell.classList.add(cls);
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

/** @typedef {ReturnType<typeof canvasPalette>} Palette */

/**
 * Colours for the canvas, read from the widget's CSS variables (so JupyterLab's light and dark
 * themes apply) with the canvas's own fallbacks.
 * @param {HTMLElement} el
 */
export function canvasPalette(el) {
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
