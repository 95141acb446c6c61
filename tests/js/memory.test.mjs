// The Memory view's pure parts: downsampling, scales, the line, the bands, the point under the
// cursor, what the readout says and which rows open to show a selected layer.
import { test } from "node:test";
import assert from "node:assert/strict";
import { decodePayload } from "../../js/src/payload.js";
import { ancestorPaths } from "../../js/src/tree.js";
import { downsampleMinMax, memoryScales, memoryPath, bandRects, pointAt, memoryReadout, phaseAt } from "../../js/src/views/memory.js";
import { payloadFrom } from "./helpers.mjs";

test("downsampling keeps at most two points per bucket, the ends and the peak", () => {
  const n = 100_000;
  const t = Array.from({ length: n }, (_, i) => i * 3);
  const v = t.map((_, i) => (i * 7919) % 1000);
  v[61_234] = 50_000;
  v[20_000] = -5;
  const keep = downsampleMinMax(t, v, 500);
  assert.ok(keep.length <= 1002, `${keep.length} points`);
  assert.deepEqual([keep[0], keep[keep.length - 1]], [0, n - 1]);
  assert.ok(keep.every((k, j) => j === 0 || k > keep[j - 1]), "in time order, each once");
  assert.ok(keep.includes(61_234) && keep.includes(20_000), "the highest and lowest points survive");
  assert.deepEqual(downsampleMinMax([0, 1, 2], [5, 6, 7], 500), [0, 1, 2]); // few points: all of them
});

test("downsampling keeps exactly each bucket's lowest and highest point", () => {
  // tests/test_memory.py also runs this function against Python's minmax_thin on the same points.
  const t = Array.from({ length: 1000 }, (_, i) => i);
  const v = t.map((i) => (i * 37) % 101);
  const keep = downsampleMinMax(t, v, 10);
  assert.equal(keep.length, 22);
  for (let b = 0; b < 10; b++) {
    const inBucket = keep.filter((k) => k > 0 && k < 999 && Math.min(9, Math.floor((k * 10) / 999)) === b);
    const all = t.filter((k) => k > 0 && k < 999 && Math.min(9, Math.floor((k * 10) / 999)) === b);
    const values = all.map((k) => v[k]);
    assert.deepEqual(inBucket.map((k) => v[k]).sort((a, c) => a - c), [Math.min(...values), Math.max(...values)]);
  }
});

const series = { name: "cpu", t: [0, 10, 20, 40], v: [100, 400, 200, 0], row: [1, 2, 2, 1], peak: { t: 10, v: 400, row: 2, phase: "forward" } };

test("scales map the run onto the plot and back", () => {
  const s = memoryScales(series, 464, 130, { left: 64, right: 0, top: 10, bottom: 20 });
  assert.deepEqual([s.x(0), s.x(40), s.y(0), s.y(400), s.vmax], [64, 464, 110, 10, 400]);
  assert.equal(s.time(264), 20);
});

test("the line steps after each event and runs to the end of the plot", () => {
  const s = memoryScales(series, 464, 130, { left: 64, right: 0, top: 10, bottom: 20 });
  assert.equal(memoryPath(series, [0, 1, 2, 3], s), "M64,85H164V10H264V60H464V110H464");
  assert.equal(memoryPath(series, [], s), "");
});

test("bands become rectangles clipped to the plot, the narrow ones left out", () => {
  const s = memoryScales(series, 464, 130, { left: 64, right: 0, top: 10, bottom: 20 });
  const rects = bandRects([[-10, 20, 0], [20, 20.001, 3], [20, 60, 1]], ["forward", "backward", "optimizer", "other"], s);
  assert.deepEqual(rects, [{ x: 64, width: 200, phase: "forward" }, { x: 264, width: 200, phase: "backward" }]);
});

test("the point under the cursor is the last event at or before its time", () => {
  assert.deepEqual([pointAt(series.t, -1), pointAt(series.t, 0), pointAt(series.t, 15), pointAt(series.t, 40), pointAt(series.t, 99)], [-1, 0, 1, 3, 3]);
  assert.equal(pointAt([], 5), -1);
  assert.equal(phaseAt({ devices: [], bands: [[0, 20, 0], [20, 40, 1]], phases: ["forward", "backward"] }, 30), "backward");
});

const tree = () => decodePayload(payloadFrom([
  { path: "profile", name: "profile", kind: "region", parent: -1, cpu_us: 10 },
  { path: "Net", name: "Net", kind: "module", parent: 0, cpu_us: 9 },
  { path: "Net.fc", name: "fc", kind: "module", parent: 1, cpu_us: 5 },
  { path: "Net.fc/aten::addmm", name: "aten::addmm", kind: "op", parent: 2, cpu_us: 5 },
], { memory: { devices: [series], bands: [[0, 40, 0]], phases: ["forward"] } }));

test("the readout names the time, the bytes, the layer and the phase", () => {
  const data = tree();
  assert.equal(memoryReadout(data, series, 1, "forward"), "10.0µs · 400 B · Net.fc (forward)");
  assert.equal(data.memory.devices[0].name, "cpu"); // the payload's memory arrives decoded as is
});

test("selecting a row opens its ancestors below the root", () => {
  const data = tree();
  assert.deepEqual(ancestorPaths(data, 3), ["Net", "Net.fc"]);
  assert.deepEqual(ancestorPaths(data, 1), []);
});
