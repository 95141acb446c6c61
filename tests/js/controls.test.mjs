// The controls and the table layout as pure functions: the log-scale threshold, the hidden-rows
// note, column widths that never truncate a number, names that truncate in the middle, the
// keyboard, the CSV export's name and zero percentages.
import { test } from "node:test";
import assert from "node:assert/strict";
import { widthSamples, percentSamples, tableLayout, NODE_MIN, NODE_MAX, CELL_PAD } from "../../js/src/columns.js";
import { sliderToPct, pctToSlider, pctLabel, hiddenNote, SLIDER_STEPS } from "../../js/src/controls.js";
import { exportFileName } from "../../js/src/csv.js";
import { cellPercent, formatValue } from "../../js/src/format.js";
import { decodePayload } from "../../js/src/payload.js";
import { visibleRows } from "../../js/src/rows.js";
import { keyAction } from "../../js/src/views/table.js";
import { small, decode, payloadFrom } from "./helpers.mjs";

test("the threshold slider is logarithmic: a short drag from 0 stays below 0.1%", () => {
  assert.equal(sliderToPct(0), 0);
  assert.equal(sliderToPct(SLIDER_STEPS), 100);
  assert.equal(sliderToPct(SLIDER_STEPS / 2), 1);
  assert.equal(sliderToPct(1), 0.01);
  // The old linear track was 0-100% over ~144 px: a 27 px drag jumped to 16%. The same drag here:
  const drag = Math.round((27 / 144) * SLIDER_STEPS);
  assert.ok(sliderToPct(drag) < 0.1, `${sliderToPct(drag)}%`);
  // Each decade gets a quarter of the track, and positions round-trip.
  assert.deepEqual([250, 500, 750].map(sliderToPct), [0.1, 1, 10]);
  for (const pct of [0.01, 0.05, 0.3, 1, 2.5, 16, 100]) assert.equal(sliderToPct(pctToSlider(pct)), pct);
  assert.equal(pctToSlider(0), 0);
  assert.deepEqual([0, 0.012, 1, 25].map(pctLabel), ["0%", "0.012%", "1%", "25%"]);
});

test("the hidden-rows note says how many rows are hidden and by what", () => {
  assert.equal(hiddenNote({ below: 0, unmatched: 0 }, 1, ""), "");
  assert.equal(hiddenNote({ below: 12, unmatched: 0 }, 1, ""), "12 rows hidden (12 below 1% of CPU total)");
  assert.equal(hiddenNote({ below: 1, unmatched: 0 }, 0.5, ""), "1 row hidden (1 below 0.5% of CPU total)");
  assert.equal(hiddenNote({ below: 3, unmatched: 40 }, 2, " conv "), "43 rows hidden (3 below 2% of CPU total, 40 not matching “conv”)");
});

test("a numeric column's width samples cover its longest texts, signs included", () => {
  const samples = widthSamples("time", 0, 1_300_000);
  for (const text of ["1.30s", "10.00µs", "100.0µs", "1000µs", "10.00ms", "100.0ms", "1000ms"]) assert.ok(samples.includes(text), text);
  assert.ok(!samples.some((t) => t.endsWith("s") && t.startsWith("10.00s")), "nothing above the column's largest value");
  assert.ok(widthSamples("bytes", -4e7, 4.7e7).includes("-1024 KB"), "negative byte counts get a sign");
  assert.ok(widthSamples("bytes", 0, 2048).includes("1024 B"));
  assert.deepEqual(widthSamples("int", 1, 7), ["7", "1"]);
  assert.deepEqual(widthSamples("time", NaN, NaN), []);
  // Every value of the column formats no longer than some sample.
  for (const v of [0.5, 9.996, 99.99, 999.7, 4321, 99_999, 999_999, 1_299_999]) {
    const len = formatValue("time", v).length;
    assert.ok(samples.some((t) => t.length >= len), `${v} -> ${formatValue("time", v)}`);
  }
  assert.ok(percentSamples(0, 200, 200).includes("100%"));
  assert.ok(percentSamples(-5, 200, 200).includes("-9.9%"));
  assert.deepEqual(percentSamples(0, 1, NaN), []);
});

test("columns keep their numbers' width; percentages go before any number is cut", () => {
  const cols = [{ value: 48, pct: 30, head: 40 }, { value: 52, pct: 30, head: 60 }, { value: 20, pct: 0, head: 38 }];
  const wide = tableLayout(cols, 1400);
  assert.equal(wide.showPct, true);
  assert.deepEqual(wide.widths, [48 + 4 + 30 + CELL_PAD, 52 + 4 + 30 + CELL_PAD, 38 + CELL_PAD]);
  const narrow = tableLayout(cols, NODE_MIN + 200);
  assert.equal(narrow.showPct, false);
  assert.deepEqual(narrow.widths, [48 + CELL_PAD, 60 + CELL_PAD, 38 + CELL_PAD], "a header wider than its numbers sets the width");
  assert.equal(narrow.minWidth, NODE_MIN + narrow.widths.reduce((a, b) => a + b));
  // Narrower still: the same widths (the table scrolls sideways), never less than the numbers.
  assert.deepEqual(tableLayout(cols, 300).widths, narrow.widths);
});

test("the names claim their room before the percentages, and the table scrolls sideways before a name is cut", () => {
  const cols = [{ value: 48, pct: 30, head: 40 }, { value: 52, pct: 30, head: 60 }, { value: 20, pct: 0, head: 38 }];
  const bare = [48 + CELL_PAD, 60 + CELL_PAD, 38 + CELL_PAD];
  const withPct = [48 + 4 + 30 + CELL_PAD, 52 + 4 + 30 + CELL_PAD, 38 + CELL_PAD];
  const sum = (w) => w.reduce((a, b) => a + b);
  // Room for the names and the percentages: both.
  const wide = tableLayout(cols, 300 + sum(withPct), NODE_MIN, 300);
  assert.deepEqual([wide.showPct, wide.node], [true, 300]);
  // Room for the names or the percentages: the names win, the numbers keep their width.
  const mid = tableLayout(cols, 300 + sum(bare) + 10, NODE_MIN, 300);
  assert.deepEqual([mid.showPct, mid.widths, mid.node], [false, bare, 300]);
  // Not even that: the names keep their room and the table scrolls sideways.
  const narrow = tableLayout(cols, 400, NODE_MIN, 300);
  assert.deepEqual([narrow.widths, narrow.minWidth], [bare, 300 + sum(bare)]);
  // A very long name claims at most NODE_MAX; short ones leave NODE_MIN.
  assert.equal(tableLayout(cols, 5000, NODE_MIN, 5000).node, NODE_MAX);
  assert.equal(tableLayout(cols, 5000, NODE_MIN, 20).node, NODE_MIN);
});

test("arrow keys move through the rows, left and right close and open them", () => {
  const data = small();
  const expanded = new Set(["Net"]);
  const view = visibleRows(data, { expanded });
  // rows: profile, Net, fc2, fc1, opt, (backward)
  const key = (current, k) => keyAction(data, view, expanded, 0, current, k, 3);
  assert.deepEqual(key(-1, "ArrowDown"), { select: 0 });
  assert.deepEqual(key(0, "ArrowDown"), { select: 1 });
  assert.deepEqual(key(1, "ArrowUp"), { select: 0 });
  assert.deepEqual(key(0, "ArrowUp"), { select: 0 }, "the first row stays first");
  assert.deepEqual(key(7, "ArrowDown"), { select: 7 }, "the last row stays last");
  assert.deepEqual(key(1, "ArrowLeft"), { toggle: "Net" }, "Left closes an open row");
  assert.deepEqual(key(2, "ArrowLeft"), { select: 1 }, "Left on a leaf goes to its parent");
  assert.deepEqual(key(1, "ArrowRight"), { select: 2 }, "Right on an open row goes to its first child");
  assert.deepEqual(key(0, "End"), { select: 7 });
  assert.deepEqual(key(7, "Home"), { select: 0 });
  assert.deepEqual(key(0, "PageDown"), { select: 4 });
  assert.equal(key(0, "a"), null, "other keys are not the table's");
  const closed = new Set();
  const collapsed = visibleRows(data, { expanded: closed });
  assert.deepEqual(keyAction(data, collapsed, closed, 0, 1, "ArrowRight"), { toggle: "Net" }, "Right opens a closed row");
  assert.deepEqual(keyAction(data, collapsed, closed, 0, 0, "ArrowLeft"), {}, "the root does not close");
});

test("Export CSV is named after the profile's label and model, not always cell.csv", () => {
  const profile = (root, children) => decodePayload(payloadFrom([
    { path: root, name: root, kind: "region", parent: -1, cpu_us: 2 },
    ...children.map((c) => ({ path: c, name: c, kind: "module", parent: 0, cpu_us: 1 })),
  ], { summary: { name: root } }));
  assert.equal(exportFileName(profile("cell", ["model"]), ""), "cell-model.csv");
  assert.equal(exportFileName(profile("profile", ["ResNet"]), ""), "profile-ResNet.csv");
  assert.equal(exportFileName(profile("train loop", ["enc", "dec"]), "7"), "train_loop-step7.csv");
  assert.equal(exportFileName(profile("cell", ["model"]), "all"), "cell-model-all-steps.csv");
  const root = decode([{ path: "ResNet", name: "ResNet", kind: "module", parent: -1, cpu_us: 1 }]);
  assert.equal(exportFileName(root, ""), "ResNet.csv");
});

test("cells leave out a percentage that rounds to zero", () => {
  assert.equal(cellPercent(0.04, 100), "");
  assert.equal(cellPercent(0.2, 100), "0.2%");
  assert.equal(cellPercent(-0.01, 100), "");
  assert.equal(cellPercent(50, 100), "50%");
  assert.equal(cellPercent(1, NaN), "");
});
