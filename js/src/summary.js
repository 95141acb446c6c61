// @ts-check
// The summary line above the controls: the profile's name, its figures (summary_items from
// src/torchprof/_views/format.py) and the wall time of each step as small bars.
import { h } from "./dom.js";
import { formatTime, missing } from "./format.js";

/**
 * Fills the summary box.
 * @param {HTMLElement} box @param {import("./types.js").Data} data
 */
export function buildSummary(box, data) {
  const s = data.summary;
  box.replaceChildren();
  box.append(h("span", { class: "tp-title", text: s.name ?? data.path[0] }));
  for (const [label, value, title] of data.summaryItems) {
    const warn = label === "stopped by" || label === "note";
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
