// The payload decoder, the columns a profile gets, and the in-page model of the HTML report.
import { test } from "node:test";
import assert from "node:assert/strict";
import { columnsFor } from "../../js/src/columns.js";
import { decodePayload, loadPayload } from "../../js/src/payload.js";
import { createModel, stateReader } from "../../js/src/state.js";
import { payloadFrom, small, VOCAB } from "./helpers.mjs";

test("paths are rebuilt from the parent's path plus a tail, names from the tail", () => {
  const data = decodePayload({
    format: "torchprof-1", n: 4, parent: [-1, 0, 1, 1],
    // root (absolute), "Net" (absolute: the root's label is dropped), ".fc" (name in tail), "/aten::mm" (name in tail)
    flags: [1 | 8, 0 | 8, 0 | 16, 2 | 16], tail: ["profile", "Net", ".fc", "/aten::mm"],
    names: [[0, "profile"], [1, "Net"]],
    text: { type: [null, "Net", "Linear", null], input_shapes: [null, null, null, "[[2, 2]]"] },
    num: { cpu_us: [3, 2, 1, 1], calls: { const: 1 } }, vocab: VOCAB, summary: {}, steps: [],
  });
  assert.deepEqual(data.path, ["profile", "Net", "Net.fc", "Net/aten::mm"]);
  assert.deepEqual(data.name, ["profile", "Net", "fc", "aten::mm"]);
  assert.deepEqual([...data.depth], [0, 1, 2, 2]);
  assert.deepEqual([...data.num.calls], [1, 1, 1, 1]);
  assert.equal(data.allNaN.cuda_us, true, "a column the payload leaves out is all NaN");
  assert.deepEqual([...data.childIndex.slice(data.childStart[1], data.childStart[2])], [2, 3]);
});

test("a payload that is not torchprof's is refused with a message, not half-drawn", async () => {
  assert.throws(() => decodePayload({ format: "other" }), /not a torchprof payload/);
  await assert.rejects(loadPayload(new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8])), /./);
});

test("CUDA, memory, FLOPs and params columns appear only when the profile has them", () => {
  const keys = (data) => columnsFor(data).map((c) => c.key);
  assert.deepEqual(keys(small()), ["name", "self_cpu_us", "cpu_us", "flops", "params", "calls"]);
  const gpu = decodePayload(payloadFrom([
    { path: "p", name: "p", kind: "region", parent: -1, cpu_us: 1, cuda_us: 2, cpu_mem: 10, cuda_mem: 20, act_cpu_mem: 10,
      peak_cpu_mem: 30, act_cuda_mem: 20, peak_cuda_mem: 40 },
    { path: "p/m", name: "m", kind: "module", parent: 0, self_cpu_us: 1, cpu_us: 1, fwd_cpu_us: 0.5, bwd_cpu_us: 0.5,
      self_cuda_us: 2, cuda_us: 2, bwd_cuda_us: 1, cpu_mem: 10, cuda_mem: 20, act_cpu_mem: 10, peak_cpu_mem: 30,
      act_cuda_mem: 20, peak_cuda_mem: 40 },
  ]));
  // Memory: what each layer keeps and the peak while it ran, not the net columns (in prof.df).
  assert.deepEqual(keys(gpu), ["name", "self_cpu_us", "cpu_us", "fwd_cpu_us", "bwd_cpu_us", "self_cuda_us", "cuda_us",
    "bwd_cuda_us", "act_cpu_mem", "peak_cpu_mem", "act_cuda_mem", "peak_cuda_mem", "calls"]);
});

test("the report's model: get/set, change events only on change, off, save_changes", () => {
  const model = createModel({ min_pct: 1 });
  const seen = [];
  const onChange = () => seen.push(model.get("min_pct"));
  model.on("change:min_pct", onChange);
  model.on("save", () => seen.push("saved"));
  model.set("min_pct", 5);
  model.set("min_pct", 5);
  model.save_changes();
  model.off("change:min_pct", onChange);
  model.set("min_pct", 7);
  assert.deepEqual(seen, [5, "saved"]);
  assert.equal(model.get("min_pct"), 7);
});

test("the view state is read by the vocabulary's keys: types, defaults for what the model lacks, one Set per list", () => {
  const keys = VOCAB.state.map((k) => k.name);
  const model = createModel({ min_pct: "2.5", show_ops: 1, search: null, expanded: ["Net"], view: "" });
  const read = stateReader(model, VOCAB);
  const st = read();
  for (const key of VOCAB.state) assert.ok(key.name in st, key.name);
  assert.equal(st.min_pct, 2.5);
  assert.equal(st.show_ops, true);
  assert.equal(st.search, "");
  const defaults = Object.fromEntries(VOCAB.state.map((k) => [k.name, k.default]));
  assert.equal(st.view, defaults.view, "an empty view is the vocabulary's default");
  assert.equal(st.sort_by, defaults.sort_by);
  assert.equal(st.ascending, defaults.ascending);
  assert.deepEqual([...st.expanded], ["Net"]);
  assert.deepEqual(st.expandedList, ["Net"]);
  assert.equal(read().expanded, st.expanded, "the same list gives the same Set");
  model.set("expanded", ["Net", "Net.fc"]);
  assert.deepEqual([...read().expanded], ["Net", "Net.fc"]);
  // A vocabulary with a key renamed and a new one: the reader follows it, spelling none itself.
  const renamed = { ...VOCAB, state: [...VOCAB.state.filter((k) => k.name !== "zoom"), { name: "zoom_path", type: "text", default: "x" }] };
  const other = stateReader(createModel({}), renamed)();
  assert.deepEqual(Object.keys(other).filter((k) => !k.endsWith("List")), [...keys.filter((k) => k !== "zoom"), "zoom_path"]);
  assert.equal(other.zoom_path, "x");
});

test("the widget module imports in node without touching a DOM", async () => {
  const mod = await import("../../js/widget.js");
  assert.equal(typeof mod.default.render, "function");
  assert.equal(typeof globalThis.document, "undefined");
});

test("a missing FLOPs value is written as unknown, a missing time as nothing", () => {
  const cols = columnsFor(small());
  const flops = cols.find((c) => c.key === "flops");
  assert.equal(flops?.unknown, VOCAB.unknown_mark);
  assert.equal(VOCAB.unknown_mark, "?");
  assert.equal(cols.find((c) => c.key === "cpu_us")?.unknown, undefined);
});
