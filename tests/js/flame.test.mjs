// The Flame view's geometry and colours, and the Top view's rankings, as pure functions.
import { test } from "node:test";
import assert from "node:assert/strict";
import { deltaColour, luminance, typeHue } from "../../js/src/colours.js";
import { ancestry, execChildren } from "../../js/src/tree.js";
import { flameMetrics, flameMetric, flameLayout, flameHit, phaseColumns, phaseShares, flameDeltas } from "../../js/src/views/flame.js";
import { VIEWS } from "../../js/src/views/index.js";
import { byType, shortOpName, topColumn, topLayers } from "../../js/src/views/top.js";
import { small, decode, VOCAB } from "./helpers.mjs";

/** Net (100) -> conv (40, ran first), fc (50, ran last), relu (10); a backward op under fc. */
function net() {
  return decode([
    { path: "Net", name: "Net", kind: "module", type: "Net", parent: -1, cpu_us: 100, fwd_cpu_us: 60, bwd_cpu_us: 30, other_cpu_us: 10, exec_order: 0 },
    { path: "Net.fc", name: "fc", kind: "module", type: "Linear", parent: 0, cpu_us: 50, fwd_cpu_us: 20, bwd_cpu_us: 30, exec_order: 7 },
    { path: "Net.fc/aten::mm", name: "aten::mm", kind: "op", parent: 1, cpu_us: 30, bwd_cpu_us: 30, backward: true, exec_order: 8 },
    { path: "Net.conv", name: "conv", kind: "module", type: "Conv2d", parent: 0, cpu_us: 40, fwd_cpu_us: 40, exec_order: 1 },
    { path: "Net.relu", name: "relu", kind: "module", type: "ReLU", parent: 0, cpu_us: 10, fwd_cpu_us: 0, other_cpu_us: 10, exec_order: 3 },
  ]);
}

const rects = (data, layout) => Array.from({ length: layout.count }, (_, r) => [data.name[layout.node[r]], layout.level[r], +layout.x[r].toFixed(3), +layout.w[r].toFixed(3)]);

test("the icicle's widths are the metric's shares, children in execution order under their parent", () => {
  const data = net();
  const layout = flameLayout(data, { width: 1000, widthColumn: "cpu_us" });
  assert.deepEqual(rects(data, layout), [
    ["Net", 0, 0, 1000],
    ["conv", 1, 0, 400],
    ["relu", 1, 400, 100],
    ["fc", 1, 500, 500],
  ]);
  assert.equal(layout.levels, 2);
  // Ops join with show_ops; a child never reaches past its parent.
  const ops = flameLayout(data, { width: 1000, widthColumn: "cpu_us", showOps: true });
  assert.deepEqual(rects(data, ops).at(-1), ["aten::mm", 2, 500, 300]);
  for (let r = 0; r < ops.count; r++) {
    const parent = data.parent[ops.node[r]];
    const p = [...ops.node].indexOf(parent);
    if (p >= 0) assert.ok(ops.x[r] >= ops.x[p] && ops.x[r] + ops.w[r] <= ops.x[p] + ops.w[p] + 1e-9);
  }
});

test("a zoomed icicle starts at its node; other metrics size it; nothing drawn below a pixel", () => {
  const data = net();
  const zoomed = flameLayout(data, { root: 1, width: 600, widthColumn: "cpu_us", showOps: true });
  assert.deepEqual(rects(data, zoomed), [["fc", 0, 0, 600], ["aten::mm", 1, 0, 360]]);
  const bwd = flameLayout(data, { width: 300, widthColumn: "bwd_cpu_us" });
  assert.deepEqual(rects(data, bwd), [["Net", 0, 0, 300], ["fc", 1, 0, 300]], "no backward time: no bar");
  const tiny = flameLayout(data, { width: 12, widthColumn: "cpu_us", minPx: 2 });
  assert.deepEqual(rects(data, tiny).map((r) => r[0]), ["Net", "conv", "fc"], "relu (1.2 px) is not drawn");
  assert.equal(flameLayout(data, { width: 100, widthColumn: "cuda_us" }).count, 0, "no CUDA time: an empty icicle");
});

test("children adding up to more than their parent are scaled to fit it", () => {
  const data = decode([
    { path: "r", name: "r", kind: "region", parent: -1, cuda_us: 10 },
    { path: "r/a", name: "a", kind: "region", parent: 0, cuda_us: 15 },
    { path: "r/b", name: "b", kind: "region", parent: 0, cuda_us: 5 },
    { path: "r/c", name: "c", kind: "region", parent: 0, cuda_us: -3 },
  ]);
  assert.deepEqual(rects(data, flameLayout(data, { width: 100, widthColumn: "cuda_us" })), [["r", 0, 0, 100], ["a", 1, 0, 75], ["b", 1, 75, 25]]);
});

test("a point finds the bar under it", () => {
  const data = net();
  const layout = flameLayout(data, { width: 1000, widthColumn: "cpu_us" });
  const at = (x, y) => {
    const r = flameHit(layout, x, y, 18);
    return r < 0 ? null : data.name[layout.node[r]];
  };
  assert.equal(at(10, 5), "Net");
  assert.equal(at(10, 20), "conv");
  assert.equal(at(450, 20), "relu");
  assert.equal(at(999, 30), "fc");
  assert.equal(at(1000, 20), null);
  assert.equal(at(10, 40), null, "below the deepest level");
  assert.equal(at(10, -1), null);
});

test("execution order, breadcrumbs", () => {
  const data = net();
  const { start, index } = execChildren(data);
  assert.deepEqual([...index.subarray(start[0], start[1])].map((i) => data.name[i]), ["conv", "relu", "fc"]);
  assert.deepEqual(ancestry(data, 0, 2).map((i) => data.name[i]), ["Net", "fc", "aten::mm"]);
  assert.deepEqual(ancestry(data, 1, 2).map((i) => data.name[i]), ["fc", "aten::mm"]);
});

test("the metrics are the registry's totals and self columns that have data, with their labels", () => {
  const data = net();
  assert.deepEqual(flameMetrics(data).map((m) => [m.key, m.label, m.width, m.self]), [
    ["cpu_us", "CPU total", "cpu_us", null],
    ["fwd_cpu_us", "CPU fwd", "fwd_cpu_us", null],
    ["bwd_cpu_us", "CPU bwd", "bwd_cpu_us", null],
    ["other_cpu_us", "CPU other", "other_cpu_us", null],
  ]);
  const s = small();
  assert.deepEqual(flameMetrics(s).map((m) => m.key), ["self_cpu_us", "cpu_us", "flops"]);
  assert.deepEqual(flameMetric(s, "self_cpu_us"), { key: "self_cpu_us", label: "Own CPU", width: "cpu_us", self: "self_cpu_us" });
  assert.equal(flameMetric(s, "bogus").key, "self_cpu_us", "an unknown metric falls back to the first");
});

test("colours: a bar splits into forward, backward and other; types keep one hue", () => {
  const data = net();
  const metric = flameMetric(data, "cpu_us");
  const phases = phaseColumns(data, metric);
  assert.deepEqual(phases, ["fwd_cpu_us", "bwd_cpu_us", "other_cpu_us"]);
  assert.deepEqual(phaseShares(data, 0, phases), [{ role: "fwd", share: 0.6 }, { role: "bwd", share: 0.3 }, { role: "other", share: 0.1 }]);
  assert.deepEqual(phaseShares(data, 2, phases), [{ role: "bwd", share: 1 }]);
  assert.deepEqual(phaseShares(data, 2, []), [{ role: "bwd", share: 1 }], "without parts, the backward flag decides");
  assert.deepEqual(phaseShares(data, 3, []), [{ role: "fwd", share: 1 }]);
  assert.equal(typeHue("Conv2d"), typeHue("Conv2d"));
  assert.notEqual(typeHue("Conv2d"), typeHue("Linear"));
  assert.ok(typeHue("Linear") >= 0 && typeHue("Linear") < 360);
  assert.ok(luminance("#111418") < 0.4 && luminance("#ffffff") > 0.9 && luminance("rgb(0, 0, 0)") === 0);
});

test("the Top view ranks layers by self time with their ops folded in, and names those ops", () => {
  const data = small();
  assert.equal(topColumn(data, "cpu_us"), "self_cpu_us");
  assert.equal(topColumn(data, "bwd_cpu_us"), "bwd_self_cpu_us");
  assert.equal(topColumn(data, "self_cuda_us"), "self_cuda_us");
  assert.equal(topColumn(data, "flops"), "self_cpu_us");
  const top = topLayers(data, 0, "self_cpu_us");
  assert.deepEqual(top.map((t) => [data.name[t.row], t.value]), [["fc2", 70], ["fc1", 50], ["Net", 30], ["Optimizer.step#SGD.step", 25], ["(backward, no module)", 15]]);
  assert.deepEqual(top[0].ops.map((o) => [data.name[o.row], o.value]), [["aten::addmm", 60]], "fc2's 70 is mostly its addmm");
  assert.deepEqual(topLayers(data, 1, "self_cpu_us").map((t) => data.name[t.row]), ["fc2", "fc1"], "a subtree's layers only");
  assert.equal(topLayers(data, 0, "self_cpu_us", 2).length, 2);
  const bwd = decode([
    { path: "m", name: "m", kind: "module", parent: -1, cpu_us: 2 },
    { path: "m/b", name: `${VOCAB.backward_prefix}ConvolutionBackward0`, kind: "op", parent: 0, cpu_us: 1, backward: true },
  ]);
  assert.equal(shortOpName(bwd, 1), "ConvolutionBackward0 (bwd)", "an autograd node by its name");
  assert.equal(shortOpName(data, 3), "aten::addmm");
});

test("by module type: totals from the outermost module of a class, self values and calls everywhere", () => {
  const data = decode([
    { path: "M", name: "M", kind: "module", type: "Net", parent: -1, cpu_us: 100, self_cpu_us: 10, layer_self_cpu_us: 10, calls: 1 },
    { path: "M.seq", name: "seq", kind: "module", type: "Sequential", parent: 0, cpu_us: 90, self_cpu_us: 5, layer_self_cpu_us: 5, calls: 1 },
    { path: "M.seq.inner", name: "inner", kind: "module", type: "Sequential", parent: 1, cpu_us: 60, self_cpu_us: 10, layer_self_cpu_us: 10, calls: 1 },
    { path: "M.seq.inner.0", name: "0", kind: "module", type: "Linear", parent: 2, cpu_us: 50, self_cpu_us: 50, layer_self_cpu_us: 50, calls: 2 },
    { path: "M.seq.1", name: "1", kind: "module", type: "Linear", parent: 1, cpu_us: 25, self_cpu_us: 25, layer_self_cpu_us: 25, calls: 1 },
  ]);
  const groups = Object.fromEntries(byType(data).map((g) => [g.type, [g.modules, g.sums.cpu_us, g.sums.self_cpu_us, g.sums.calls]]));
  assert.deepEqual(groups, { Net: [1, 100, 10, 1], Sequential: [2, 90, 15, 2], Linear: [2, 75, 75, 3] });
  assert.deepEqual(byType(data).map((g) => g.type), ["Net", "Sequential", "Linear"]);
  assert.ok(Number.isNaN(byType(data)[0].sums.cuda_us), "a column the profile lacks stays NaN");
});

test("the view switcher is a list: each view the vocabulary names has a module", () => {
  assert.deepEqual(Object.keys(VIEWS), VOCAB.views);
  for (const view of VOCAB.views) assert.equal(typeof VIEWS[view].create, "function", view);
});

test("a comparison's bars: green when faster, red when slower, deeper for a bigger change, grey for none", () => {
  const hue = (c) => Number(/hsl\((\d+)/.exec(c)[1]);
  const light = (c) => Number(/ ([\d.]+)%\)$/.exec(c)[1]);
  assert.equal(hue(deltaColour(-5, 10, false)), 135);
  assert.equal(hue(deltaColour(5, 10, false)), 2);
  assert.ok(light(deltaColour(10, 10, false)) < light(deltaColour(1, 10, false))); // deeper = darker on light
  assert.equal(deltaColour(0, 10, false), deltaColour(NaN, 10, false));
  assert.equal(deltaColour(3, 0, false), deltaColour(0, 10, false)); // nothing changed anywhere
  // The sized metric's own delta column when there is one, else the first (CPU total's); the root's change
  // (the sum of all) does not set the scale.
  const vocab = { columns: [{ name: "cpu_us_delta", delta: true }, { name: "cuda_us_delta", delta: true }] };
  const data = { n: 3, vocab, num: { cpu_us_delta: Float64Array.from([-30, -10, 20]), cuda_us_delta: Float64Array.from([5, 1, 2]) } };
  assert.deepEqual({ ...flameDeltas(data, { width: "cpu_us" }), values: null }, { column: "cpu_us_delta", values: null, scale: 20 });
  assert.equal(flameDeltas(data, { width: "cuda_us" }).column, "cuda_us_delta");
  assert.equal(flameDeltas(data, { width: "flops" }).column, "cpu_us_delta");
});
