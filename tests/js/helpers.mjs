// Hand-written trees for the node tests, in the payload's JSON form.
import { readFileSync } from "node:fs";
import { numberColumns, decodePayload } from "../../js/src/payload.js";

/** The vocabulary Python sends (tests/js/fixtures/vocab.json; tests/test_widget.py keeps it current). */
export const VOCAB = JSON.parse(readFileSync(new URL("./fixtures/vocab.json", import.meta.url), "utf-8"));

/**
 * nodes: [{path, name, kind, parent, ...numbers}] in pre-order, parent as a row index (-1 for
 * the root). Paths go in whole (the "absolute" flag) and names as exceptions, which is a valid
 * if unoptimised encoding.
 */
export function payloadFrom(nodes, extra = {}) {
  const num = {};
  for (const c of numberColumns(VOCAB)) {
    // Nodes ran in the order they are listed unless they say otherwise.
    const values = nodes.map((node, i) => (node[c] === undefined ? (c === "exec_order" ? i : null) : node[c]));
    num[c] = values.every((v) => v === null) ? { const: null } : values;
  }
  const F = VOCAB.flags;
  return {
    format: "torchprof-1",
    n: nodes.length,
    parent: nodes.map((node) => node.parent),
    flags: nodes.map((node) => VOCAB.kinds.indexOf(node.kind) | (node.backward ? F.backward : 0) | F.absolute_path),
    tail: nodes.map((node) => node.path),
    names: nodes.map((node, i) => [i, node.name]),
    text: { type: nodes.map((node) => node.type ?? null), input_shapes: nodes.map((node) => node.shapes ?? null) },
    num,
    vocab: VOCAB,
    summary: { name: nodes[0].name },
    steps: [],
    ...extra,
  };
}

export const decode = (nodes) => decodePayload(payloadFrom(nodes));

/** root -> Net -> (fc1, fc2 (+ops)), opt region, backward region. cpu_us totals add up. */
export function small() {
  return decode([
    { path: "profile", name: "profile", kind: "region", parent: -1, cpu_us: 200, self_cpu_us: 10, layer_self_cpu_us: 10, calls: 1, flops: 1000 },
    { path: "Net", name: "Net", kind: "module", type: "Net", parent: 0, cpu_us: 150, self_cpu_us: 30, layer_self_cpu_us: 30, calls: 1, flops: 900, params: 300 },
    { path: "Net.fc2", name: "fc2", kind: "module", type: "Linear", parent: 1, cpu_us: 70, self_cpu_us: 10, layer_self_cpu_us: 70, calls: 1, flops: 100, params: 100 },
    { path: "Net.fc2/aten::addmm", name: "aten::addmm", kind: "op", parent: 2, cpu_us: 60, self_cpu_us: 60, layer_self_cpu_us: 60, calls: 1, flops: 100 },
    { path: "Net.fc1", name: "fc1", kind: "module", type: "Linear", parent: 1, cpu_us: 50, self_cpu_us: 50, layer_self_cpu_us: 50, calls: 2, flops: 800, params: 200 },
    { path: "Optimizer.step#SGD.step", name: "Optimizer.step#SGD.step", kind: "region", parent: 0, cpu_us: 25, self_cpu_us: 5, layer_self_cpu_us: 25, calls: 1, flops: 100 },
    { path: "Optimizer.step#SGD.step/aten::add_", name: "aten::add_", kind: "op", parent: 5, cpu_us: 20, self_cpu_us: 20, layer_self_cpu_us: 20, calls: 4, flops: 100 },
    { path: "(backward, no module)", name: "(backward, no module)", kind: "region", parent: 0, cpu_us: 15, self_cpu_us: 15, layer_self_cpu_us: 15, calls: 2, backward: true },
  ]);
}

export function names(data, rows) {
  return rows.map((i) => data.name[i]);
}
