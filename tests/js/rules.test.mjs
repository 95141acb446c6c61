// The rules behind the issue-9 findings on the table: numbers that never change silently, natural
// and execution-order sorts, steps in the order they ran, views of one step, the rows a filter
// hides and why.
import { test } from "node:test";
import assert from "node:assert/strict";
import { decodePayload } from "../../js/src/payload.js";
import { visibleRows, shownValues, selectRows, hiddenCounts, naturalKey, compareNatural } from "../../js/src/rows.js";
import { stepRows, viewedTable, defaultExpanded, expandTo } from "../../js/src/tree.js";
import { small, names, decode, payloadFrom } from "./helpers.mjs";

const all = (data, state = {}) => names(data, visibleRows(data, { expanded: null, ...state }).rows);
const shown = (data, state, col = "self_cpu_us") => {
  const view = visibleRows(data, { expanded: null, ...state });
  const values = shownValues(data, col, view.shown);
  return Object.fromEntries(view.rows.map((i) => [data.name[i], values[i]]));
};

/** attn: 499 ms of its own inline softmax/matmul ops (one op row each), 0.857 ms of its own. */
function attention() {
  return decode([
    { path: "GPT", name: "GPT", kind: "module", type: "GPT", parent: -1, cpu_us: 1_000_000, self_cpu_us: 0, layer_self_cpu_us: 0 },
    { path: "GPT.attn", name: "attn", kind: "module", type: "Attention", parent: 0, cpu_us: 607_857, self_cpu_us: 857, layer_self_cpu_us: 499_857 },
    { path: "GPT.attn/aten::softmax", name: "aten::softmax", kind: "op", parent: 1, cpu_us: 300_000, self_cpu_us: 300_000, layer_self_cpu_us: 300_000 },
    { path: "GPT.attn/aten::matmul", name: "aten::matmul", kind: "op", parent: 1, cpu_us: 199_000, self_cpu_us: 199_000, layer_self_cpu_us: 199_000 },
    { path: "GPT.attn/aten::view", name: "aten::view", kind: "op", parent: 1, cpu_us: 1_000, self_cpu_us: 1_000, layer_self_cpu_us: 1_000 },
    { path: "GPT.attn.qkv", name: "qkv", kind: "module", type: "Linear", parent: 1, cpu_us: 107_000, self_cpu_us: 107_000, layer_self_cpu_us: 107_000 },
    { path: "GPT.mlp", name: "mlp", kind: "module", type: "MLP", parent: 0, cpu_us: 392_143, self_cpu_us: 392_143, layer_self_cpu_us: 392_143 },
  ]);
}

test("ticking aten ops while the threshold hides every op row changes no number", () => {
  const data = attention();
  // 31%: no op row passes (softmax, the largest, is 30%).
  const before = shown(data, { min_pct: 31 });
  const after = shown(data, { min_pct: 31, show_ops: true });
  assert.deepEqual(Object.keys(after), Object.keys(before), "no op row shows at 31%");
  assert.equal(before.attn, 499_857);
  assert.equal(after.attn, 499_857, "attn's Self CPU stays 499.857 ms (it once fell to 857 µs)");
});

test("a layer's Self counts exactly the op rows that are not shown beside it", () => {
  const data = attention();
  // 20%: softmax (30%) shows, matmul (19.9%) and view (0.1%) do not: Self = 857 + 199000 + 1000.
  const partial = shown(data, { min_pct: 20, show_ops: true });
  assert.deepEqual(Object.keys(partial), ["GPT", "attn", "aten::softmax", "mlp"]);
  assert.equal(partial.attn, 857 + 199_000 + 1_000);
  // Every op shown: the layer's own 857 µs; no op shown: the layer column exactly.
  assert.equal(shown(data, { show_ops: true }).attn, 857);
  assert.equal(shown(data, {}).attn, 499_857);
  // Self plus the op rows shown plus the child layers (shown or under the threshold) is the total.
  assert.equal(partial.attn + 300_000 + 107_000, 607_857);
  // A search that hides the ops folds them too.
  assert.equal(shown(data, { show_ops: true, search: "attn" }).attn, 499_857);
});

test("sorting by Self uses the values shown", () => {
  const data = attention();
  assert.deepEqual(all(data, { sort_by: "self_cpu_us" }), ["GPT", "attn", "qkv", "mlp"], "attn (499 ms with its ops) before mlp (392 ms)");
  assert.deepEqual(all(data, { sort_by: "self_cpu_us", show_ops: true }),
    ["GPT", "mlp", "attn", "aten::softmax", "aten::matmul", "qkv", "aten::view"]);
});

test("name sort is natural: 0, 1, 2, 10, 11, not 0, 1, 10, 11, 2", () => {
  const nodes = [{ path: "Seq", name: "Seq", kind: "module", parent: -1, cpu_us: 100 }];
  for (const k of [10, 2, 0, 11, 1, 100]) nodes.push({ path: `Seq.${k}`, name: String(k), kind: "module", parent: 0, cpu_us: 10 + k });
  const data = decode(nodes);
  assert.deepEqual(all(data, { sort_by: "name", ascending: true }), ["Seq", "0", "1", "2", "10", "11", "100"]);
  assert.deepEqual(all(data, { sort_by: "name", ascending: false }), ["Seq", "100", "11", "10", "2", "1", "0"]);
  const order = (texts) => [...texts].sort((a, b) => compareNatural(naturalKey(a), naturalKey(b)));
  assert.deepEqual(order(["layer10", "layer2", "Layer1", "layer"]), ["layer", "Layer1", "layer2", "layer10"]);
  assert.deepEqual(order(["x100000000000000000001", "x99999999999999999999"]), ["x99999999999999999999", "x100000000000000000001"],
    "digits beyond 2^53 keep their order");
});

test("execution order lists a Sequential's children as they ran, whatever their times", () => {
  const data = decode([
    { path: "Net", name: "Net", kind: "module", parent: -1, cpu_us: 100, exec_order: 0 },
    { path: "Net.fc", name: "fc", kind: "module", parent: 0, cpu_us: 50, exec_order: 9 },
    { path: "Net.conv", name: "conv", kind: "module", parent: 0, cpu_us: 30, exec_order: 1 },
    { path: "Net.pool", name: "pool", kind: "module", parent: 0, cpu_us: 20, exec_order: 5 },
  ]);
  assert.deepEqual(all(data, { sort_by: "exec_order", ascending: true }), ["Net", "conv", "pool", "fc"]);
  assert.deepEqual(all(data, { sort_by: "exec_order", ascending: false }), ["Net", "fc", "pool", "conv"]);
});

/** Three steps, #9 the slowest: by time they would read #9, #2, #10. */
function stepped() {
  const nodes = [{ path: "profile", name: "profile", kind: "region", parent: -1, cpu_us: 600, exec_order: 0 }];
  let order = 1;
  for (const [step, t] of [[2, 150], [9, 300], [10, 100], [11, 50]]) {
    const at = nodes.length;
    nodes.push({ path: `ProfilerStep#${step}`, name: `ProfilerStep#${step}`, kind: "region", parent: 0, cpu_us: t, exec_order: order++ });
    nodes.push({ path: `ProfilerStep#${step}/Net`, name: "Net", kind: "module", parent: at, cpu_us: t * 0.9, exec_order: order++ });
    nodes.push({ path: `ProfilerStep#${step}/Net.fc`, name: "fc", kind: "module", parent: at + 1, cpu_us: t * 0.5, exec_order: order++ });
  }
  // The steps are listed in tree order (by time) in the payload, as the tree sorts them.
  const rows = [0, 4, 5, 6, 1, 2, 3, 7, 8, 9, 10, 11, 12];
  const remap = new Map(rows.map((r, k) => [r, k]));
  return decode(rows.map((r) => ({ ...nodes[r], parent: nodes[r].parent < 0 ? -1 : remap.get(nodes[r].parent) })));
}

test("steps are listed in the order they ran, whatever the sort", () => {
  const data = stepped();
  const steps = (state) => all(data, { expanded: new Set(), ...state }).slice(1);
  assert.deepEqual(steps({}), ["ProfilerStep#2", "ProfilerStep#9", "ProfilerStep#10", "ProfilerStep#11"]);
  assert.deepEqual(steps({ ascending: true }), steps({}));
  assert.deepEqual(steps({ sort_by: "name" }), steps({}));
  assert.deepEqual(stepRows(data).map((i) => data.name[i]), ["ProfilerStep#2", "ProfilerStep#9", "ProfilerStep#10", "ProfilerStep#11"]);
});

test("viewing one step starts at its row, and percentages and thresholds are of that step", () => {
  const data = stepped();
  const { table, root } = viewedTable(data, "10");
  assert.equal(table, data);
  assert.equal(data.name[root], "ProfilerStep#10");
  assert.deepEqual(names(data, visibleRows(data, { root, expanded: null }).rows), ["ProfilerStep#10", "Net", "fc"]);
  // fc is 50 of step #10's 100 (50%), 50 of the run's 600 (8%): 40% keeps it in the step view.
  assert.deepEqual(names(data, visibleRows(data, { root, min_pct: 40, expanded: null }).rows), ["ProfilerStep#10", "Net", "fc"]);
  assert.deepEqual(all(data, { min_pct: 40 }), ["profile", "ProfilerStep#9", "Net"]);
  assert.deepEqual(defaultExpanded(data, false, root), ["ProfilerStep#10/Net"]);
  assert.equal(viewedTable(data, "").root, 0);
  assert.equal(viewedTable(data, "7").root, 0, "an unknown step views the whole run");
});

test("every step folded into one tree arrives with the payload and is viewed with step 'all'", () => {
  const folded = payloadFrom([
    { path: "all steps", name: "all steps", kind: "region", parent: -1, cpu_us: 150 },
    { path: "Net", name: "Net", kind: "module", parent: 0, cpu_us: 140 },
  ]);
  const data = decodePayload(payloadFrom([{ path: "p", name: "p", kind: "region", parent: -1, cpu_us: 1 }], {
    all_steps: { ...folded, low: { cpu_us: [100, 90] }, high: { cpu_us: [200, 180] }, runs: [2, 2], count: 2 },
  }));
  const viewed = viewedTable(data, "all");
  assert.equal(viewed.table.path[1], "Net");
  assert.deepEqual([...viewed.folded.low.cpu_us], [100, 90]);
  assert.deepEqual([...viewed.folded.high.cpu_us], [200, 180]);
  assert.equal(viewed.folded.count, 2);
});

test("hidden rows are counted by why they are hidden: the threshold, the search, or ops off", () => {
  const data = small();
  assert.deepEqual(hiddenCounts(data, { min_pct: 30 }), { below: 3, unmatched: 0, ops: 2 });
  assert.deepEqual(hiddenCounts(data, { min_pct: 30, search: "fc" }), { below: 3, unmatched: 0, ops: 2 });
  assert.deepEqual(hiddenCounts(data, { min_pct: 0, search: "fc1" }), { below: 0, unmatched: 3, ops: 2 });
  assert.deepEqual(hiddenCounts(data, { min_pct: 0, search: "fc1", show_ops: true }), { below: 0, unmatched: 5, ops: 0 });
  assert.deepEqual(hiddenCounts(data, {}), { below: 0, unmatched: 0, ops: 2 });
  const sel = selectRows(data, { min_pct: 30 });
  assert.deepEqual(hiddenCounts(data, { min_pct: 30 }, sel), { below: 3, unmatched: 0, ops: 2 });
});

test("revealing a row opens every ancestor below the viewed root", () => {
  const data = stepped();
  const fc = data.path.indexOf("ProfilerStep#9/Net.fc");
  const root = data.path.indexOf("ProfilerStep#9");
  assert.deepEqual(expandTo(data, fc, 0, []), ["ProfilerStep#9", "ProfilerStep#9/Net"]);
  assert.deepEqual(expandTo(data, fc, root, ["x"]), ["x", "ProfilerStep#9/Net"]);
});
