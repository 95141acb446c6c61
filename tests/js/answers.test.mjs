// The views that answer, their pure halves: the headline and hot path read from the payload, the
// Insights rows, the Steps bars, the memory peak's make-up.
import { test } from "node:test";
import assert from "node:assert/strict";
import { decodePayload } from "../../js/src/payload.js";
import { headlineOf, hotRows } from "../../js/src/answers.js";
import { insightRows } from "../../js/src/views/insights.js";
import { partLabel, stepBars } from "../../js/src/views/steps.js";
import { categoryLabel, makeupSegments } from "../../js/src/makeup.js";
import { payloadFrom, small, VOCAB } from "./helpers.mjs";

const NODES = [
  { path: "profile", name: "profile", kind: "region", parent: -1, cpu_us: 200 },
  { path: "Net", name: "Net", kind: "module", type: "Net", parent: 0, cpu_us: 150 },
  { path: "Net.fc2", name: "fc2", kind: "module", type: "Linear", parent: 1, cpu_us: 70 },
];

test("the hot path and the headline come from the payload, the headline's layer a row", () => {
  const headline = "Costliest layer: Net.fc2 (Linear) 35% of CPU time · costliest type: Linear 35% (1 modules)";
  const data = decodePayload(payloadFrom(NODES, {
    summary: { name: "profile", headline, bottleneck: { path: "Net.fc2", layer: "Net.fc2" } },
    hot_path: { rows: [0, 1, 2], open: ["Net"], metric: "cpu_us", branch: -1, layer: 2 },
  }));
  assert.deepEqual([...hotRows(data)], [1, 2], "the root is not marked");
  assert.deepEqual(headlineOf(data), { text: headline, row: 2 });
  // A comparison (no hot path, no headline): nothing to mark, nothing to say.
  assert.deepEqual([...hotRows(small())], []);
  assert.deepEqual(headlineOf(small()), { text: "", row: -1 });
});

test("insights: one row per finding in rank order, figures written out, paths found in the table", () => {
  const [rule, atStake, share, paths, message, advice] = VOCAB.insight_columns;
  const finding = (r, us, sh, ps) => ({ [rule]: r, [atStake]: us, [share]: sh, [paths]: ps, [message]: `seen ${r}`, [advice]: `try ${r}` });
  const data = decodePayload(payloadFrom(NODES, {
    insights: [finding("host_sync", 1_200_000, 0.23, ["Net.fc2", "gone"]), finding("memory_limit", null, 0.9, [])],
  }));
  const rows = insightRows(data);
  assert.deepEqual(rows.map((r) => [r.rule, r.title, r.figures]), [
    ["host_sync", "host sync", "23% of the run · 1.20s at stake"],
    ["memory_limit", "memory limit", "90% of the memory peak"],
  ]);
  assert.deepEqual(rows[0].links, [{ path: "Net.fc2", row: 2 }, { path: "gone", row: -1 }]);
  assert.equal(rows[0].advice, "try host_sync");
  assert.deepEqual(insightRows(small()), [], "no findings: no rows");
});

test("steps: each step's parts as shares of the longest, slow steps flagged, the spread of the wall times", () => {
  const [data_, fwd, bwd, opt, comm, other] = VOCAB.step_parts;
  const [idle, slow] = VOCAB.step_extra;
  const step = (n, wall, parts, isSlow = false) => ({ step: n, wall_us: wall, ...Object.fromEntries([data_, fwd, bwd, opt, comm, other].map((p, k) => [p, parts[k]])), [idle]: null, [slow]: isSlow });
  const data = decodePayload(payloadFrom(NODES, {
    steps: [step(1, 100, [0, 30, 50, 10, 0, 10]), step(2, 110, [0, 30, 60, 10, 0, 10]), step(3, 300, [180, 30, 60, 10, 0, 20], true)],
  }));
  const bars = stepBars(data);
  assert.deepEqual(bars.parts, VOCAB.step_parts);
  assert.deepEqual(bars.steps.map((s) => [s.step, s.total, s.slow]), [["1", 100, false], ["2", 110, false], ["3", 300, true]]);
  assert.ok(Math.abs(bars.steps[2].shares.reduce((a, b) => a + b) - 1) < 1e-12, "the longest step fills the bar");
  assert.equal(bars.steps[0].shares[2], 50 / 300);
  assert.deepEqual([bars.median, bars.min, bars.max], [110, 100, 300]);
  assert.equal(bars.spread, 200 / 110);
  assert.equal(partLabel(data_), "data loading");
  assert.equal(partLabel(comm), "communication");
  assert.equal(partLabel(fwd), "forward");
});

test("the memory make-up: categories in the vocabulary's order, empty ones left out, shares of the total", () => {
  const cats = VOCAB.memory_categories;
  const bytes = cats.map((_, k) => (k === 0 ? 600 : k === 1 ? 300 : k === 3 ? 100 : 0));
  const { total, segments } = makeupSegments(cats, { categories: bytes, layers: [], allocator: 0, before: 0 });
  assert.equal(total, 1000);
  assert.deepEqual(segments.map((s) => [s.category, s.share]), [[cats[0], 0.6], [cats[1], 0.3], [cats[3], 0.1]]);
  assert.equal(categoryLabel("optimizer_state"), "optimizer state");
});

test("the Top view folds each layer of every ProfilerStep#N into one line, its times added up", async () => {
  const { foldStepLayers } = await import("../../js/src/views/top.js");
  const data = decodePayload(payloadFrom([
    { path: "profile", name: "profile", kind: "region", parent: -1, cpu_us: 100 },
    { path: "ProfilerStep#1", name: "ProfilerStep#1", kind: "region", parent: 0, cpu_us: 40 },
    { path: "ProfilerStep#1/Optimizer.step#SGD.step", name: "Optimizer.step#SGD.step", kind: "region", parent: 1, cpu_us: 30 },
    { path: "ProfilerStep#1/Optimizer.step#SGD.step/aten::add_", name: "aten::add_", kind: "op", parent: 2, cpu_us: 20 },
    { path: "ProfilerStep#2", name: "ProfilerStep#2", kind: "region", parent: 0, cpu_us: 50 },
    { path: "ProfilerStep#2/Optimizer.step#SGD.step", name: "Optimizer.step#SGD.step", kind: "region", parent: 4, cpu_us: 35 },
    { path: "ProfilerStep#2/Optimizer.step#SGD.step/aten::add_", name: "aten::add_", kind: "op", parent: 5, cpu_us: 25 },
    { path: "loss", name: "loss", kind: "region", parent: 0, cpu_us: 10 },
  ]));
  const ranked = [
    { row: 5, value: 35, ops: [{ row: 6, value: 25 }] },
    { row: 2, value: 30, ops: [{ row: 3, value: 20 }] },
    { row: 7, value: 10, ops: [] },
    { row: 1, value: 5, ops: [] },
    { row: 4, value: 4, ops: [] },
  ];
  assert.deepEqual(foldStepLayers(data, ranked), [
    { row: 5, value: 65, key: "Optimizer.step#SGD.step", steps: 2, ops: [{ row: 6, value: 45 }] },
    { row: 7, value: 10, key: "loss", steps: 0, ops: [] },
    { row: 1, value: 9, key: "ProfilerStep#*", steps: 2, ops: [] },
  ]);
});

test("a step opens on the run's hot path: the same layers in that step, or in the folded steps", async () => {
  const { hotPathIn } = await import("../../js/src/answers.js");
  const data = decodePayload(payloadFrom([
    { path: "profile", name: "profile", kind: "region", parent: -1, cpu_us: 100 },
    { path: "ProfilerStep#1", name: "ProfilerStep#1", kind: "region", parent: 0, cpu_us: 40 },
    { path: "ProfilerStep#1/Net", name: "Net", kind: "module", parent: 1, cpu_us: 30 },
    { path: "ProfilerStep#1/Net.enc", name: "enc", kind: "module", parent: 2, cpu_us: 25 },
    { path: "ProfilerStep#1/Net.enc.fc", name: "fc", kind: "module", parent: 3, cpu_us: 20 },
    { path: "ProfilerStep#2", name: "ProfilerStep#2", kind: "region", parent: 0, cpu_us: 60 },
    { path: "ProfilerStep#2/Net", name: "Net", kind: "module", parent: 5, cpu_us: 50 },
    { path: "ProfilerStep#2/Net.enc", name: "enc", kind: "module", parent: 6, cpu_us: 45 },
    { path: "ProfilerStep#2/Net.enc.fc", name: "fc", kind: "module", parent: 7, cpu_us: 40 },
  ], { hot_path: { rows: [0, 5, 6, 7, 8], open: ["ProfilerStep#2", "ProfilerStep#2/Net", "ProfilerStep#2/Net.enc"], layer: 8 } }));
  assert.deepEqual(hotPathIn(data, { table: data, root: 0, folded: null }), ["ProfilerStep#2/Net", "ProfilerStep#2/Net.enc"]);
  assert.deepEqual(hotPathIn(data, { table: data, root: 1, folded: null }), ["ProfilerStep#1/Net", "ProfilerStep#1/Net.enc"]);
  const folded = decodePayload(payloadFrom([
    { path: "all steps", name: "all steps", kind: "region", parent: -1, cpu_us: 50 },
    { path: "Net", name: "Net", kind: "module", parent: 0, cpu_us: 40 },
    { path: "Net.enc", name: "enc", kind: "module", parent: 1, cpu_us: 35 },
  ]));
  assert.deepEqual(hotPathIn(data, { table: folded, root: 0, folded: /** @type {any} */ ({}) }), ["Net", "Net.enc"]);
});
