// The view rules (which rows show, in which order) on a hand-written tree.
import { test } from "node:test";
import assert from "node:assert/strict";
import { visibleRows, resolveSort } from "../../js/src/rows.js";
import { makeMatcher, globToRegExp, matchRange } from "../../js/src/search.js";
import { defaultExpanded, allExpandable, toggleExpanded, expandMatches, expandLeafLayers, isLeafLayer } from "../../js/src/tree.js";
import { small, names, decode, VOCAB } from "./helpers.mjs";

const all = (data, state = {}) => names(data, visibleRows(data, { expanded: null, ...state }).rows);

test("ops are hidden by default and shown, under their layer, with show_ops", () => {
  const data = small();
  assert.deepEqual(all(data), ["profile", "Net", "fc2", "fc1", "Optimizer.step#SGD.step", "(backward, no module)"]);
  assert.deepEqual(all(data, { show_ops: true }),
    ["profile", "Net", "fc2", "aten::addmm", "fc1", "Optimizer.step#SGD.step", "aten::add_", "(backward, no module)"]);
});

test("min_pct hides small rows but keeps the ancestors of shown rows", () => {
  const data = small();
  // 30% of 200 = 60: fc2 (70) stays and so does its parent Net; fc1 (50), opt (25) go.
  assert.deepEqual(all(data, { min_pct: 30 }), ["profile", "Net", "fc2"]);
  // With ops shown the threshold is on the op's own total: aten::addmm (60) keeps fc2 and Net.
  assert.deepEqual(all(data, { min_pct: 30, show_ops: true }), ["profile", "Net", "fc2", "aten::addmm"]);
  // Ancestors stay even when they are below the threshold themselves.
  assert.deepEqual(all(data, { min_pct: 30, show_ops: true, search: "addmm" }), ["profile", "Net", "fc2", "aten::addmm"]);
});

test("min_pct is a percent of the root's CPU total whatever the sort (sorting by backward keeps the optimizer)", () => {
  const data = small();
  // 10% of CPU total (200) = 20: the optimizer (25, no backward) stays when sorting by backward;
  // the threshold once followed the sort column and hid it.
  assert.deepEqual(all(data, { min_pct: 10, sort_by: "bwd_cpu_us" }), ["profile", "Net", "fc2", "fc1", "Optimizer.step#SGD.step"]);
  for (const sort_by of ["flops", "calls", "self_cpu_us", "params", "name"]) {
    assert.deepEqual(new Set(all(data, { min_pct: 30, sort_by })), new Set(["profile", "Net", "fc2"]), sort_by);
  }
});

test("sorting orders siblings within their parent and keeps the hierarchy", () => {
  const data = small();
  assert.deepEqual(all(data, { sort_by: "cpu_us", ascending: true }),
    ["profile", "(backward, no module)", "Optimizer.step#SGD.step", "Net", "fc1", "fc2"]);
  assert.deepEqual(all(data, { sort_by: "flops" }),
    ["profile", "Net", "fc1", "fc2", "Optimizer.step#SGD.step", "(backward, no module)"]);
  assert.deepEqual(all(data, { sort_by: "name", ascending: true }),
    ["profile", "(backward, no module)", "Net", "fc1", "fc2", "Optimizer.step#SGD.step"]);
  assert.deepEqual(all(data, { sort_by: "name" }),
    ["profile", "Optimizer.step#SGD.step", "Net", "fc2", "fc1", "(backward, no module)"]);
});

test("missing values sort last in both directions, text and numbers", () => {
  const data = small();
  // params: only modules have them; the regions (missing) go last, in tree order.
  assert.deepEqual(all(data, { sort_by: "params" }),
    ["profile", "Net", "fc1", "fc2", "Optimizer.step#SGD.step", "(backward, no module)"]);
  assert.deepEqual(all(data, { sort_by: "params", ascending: true }),
    ["profile", "Net", "fc2", "fc1", "Optimizer.step#SGD.step", "(backward, no module)"]);
  // type: modules have one; regions do not.
  assert.deepEqual(all(data, { sort_by: "type", ascending: false }),
    ["profile", "Net", "fc2", "fc1", "Optimizer.step#SGD.step", "(backward, no module)"]);
});

test("ties keep tree order (a stable sort)", () => {
  const data = decode([
    { path: "r", name: "r", kind: "region", parent: -1, cpu_us: 30 },
    { path: "b", name: "b", kind: "module", parent: 0, cpu_us: 10 },
    { path: "a", name: "a", kind: "module", parent: 0, cpu_us: 10 },
    { path: "c", name: "c", kind: "module", parent: 0, cpu_us: 10 },
  ]);
  assert.deepEqual(all(data), ["r", "b", "a", "c"]);
  assert.deepEqual(all(data, { ascending: true }), ["r", "b", "a", "c"]);
});

test("search matches names (a substring, or a glob of the whole name); path: matches paths", () => {
  const data = small();
  assert.deepEqual(all(data, { search: "fc2" }), ["profile", "Net", "fc2"]);
  assert.deepEqual(all(data, { search: "FC" }), ["profile", "Net", "fc2", "fc1"]);
  assert.deepEqual(all(data, { search: "fc?" }), ["profile", "Net", "fc2", "fc1"]);
  // A name search no longer matches a whole path: "net" finds Net, not everything under it.
  assert.deepEqual(all(data, { search: "net" }), ["profile", "Net"]);
  assert.deepEqual(all(data, { search: "net.*" }), ["profile"], "a glob is matched against the whole name");
  assert.deepEqual(all(data, { search: "path:net.*" }), ["profile", "Net", "fc2", "fc1"]);
  assert.deepEqual(all(data, { search: "path:fc?" }), ["profile", "Net", "fc2", "fc1"], "a path glob may match a tail after . or /");
  assert.deepEqual(all(data, { search: "PATH: fc2/", show_ops: true }), ["profile", "Net", "fc2", "aten::addmm"]);
  assert.deepEqual(all(data, { search: "step" }), ["profile", "Optimizer.step#SGD.step"]);
  assert.deepEqual(all(data, { search: "aten::*", show_ops: true }),
    ["profile", "Net", "fc2", "aten::addmm", "Optimizer.step#SGD.step", "aten::add_"]);
  assert.deepEqual(all(data, { search: "nothing" }), ["profile"]);
  assert.deepEqual(all(data, { search: "Linear" }), ["profile", "Net", "fc2", "fc1"], "a module's class matches");
  assert.deepEqual(all(data, { search: "lin*" }), ["profile", "Net", "fc2", "fc1"], "a glob on the class too");
  assert.deepEqual(all(data, { search: "linea" }), ["profile"], "a class matches whole, never a part of it");
  assert.deepEqual(all(data, { search: "   " }), all(data), "a blank search filters nothing");
  assert.deepEqual(all(data, { search: ["fc1", "optim*"] }), ["profile", "Net", "fc1", "Optimizer.step#SGD.step"]);
});

test("the matched part of a name is what gets highlighted", () => {
  assert.deepEqual(matchRange(VOCAB, "conv", "layer1.conv2"), [7, 11]);
  assert.deepEqual(matchRange(VOCAB, "CONV", "Conv2d"), [0, 4]);
  assert.deepEqual(matchRange(VOCAB, "conv?", "conv2"), [0, 5], "a glob match is the whole name");
  assert.equal(matchRange(VOCAB, "conv?", "conv22"), null);
  assert.equal(matchRange(VOCAB, "path:conv", "conv2"), null, "a path search without the row's path marks no name");
  assert.deepEqual(matchRange(VOCAB, "path:layer1.0.co", "conv2", "ResNet.layer1.0.conv2"), [0, 2], "the name's part of a path match");
  assert.deepEqual(matchRange(VOCAB, "path:layer1", "conv2", "ResNet.layer1.0.conv2"), [0, 5], "a match above the name marks all of it");
  assert.deepEqual(matchRange(VOCAB, "path:layer?.*.conv2", "conv2", "ResNet.layer1.0.conv2"), [0, 5]);
  assert.equal(matchRange(VOCAB, "path:layer2", "conv2", "ResNet.layer1.0.conv2"), null);
  assert.equal(matchRange(VOCAB, "", "conv2"), null);
});

test("collapsed rows hide their children, and carets mark rows that have children", () => {
  const data = small();
  const view = visibleRows(data, { expanded: new Set() });
  assert.deepEqual(names(data, view.rows), ["profile", "Net", "Optimizer.step#SGD.step", "(backward, no module)"]);
  assert.equal(view.hasKids[1], 1, "Net has children though collapsed");
  assert.equal(view.hasKids[5], 0, "the optimizer's only child is an op, hidden");
  assert.deepEqual(names(data, visibleRows(data, { expanded: new Set(["Net"]) }).rows),
    ["profile", "Net", "fc2", "fc1", "Optimizer.step#SGD.step", "(backward, no module)"]);
  const withOps = visibleRows(data, { expanded: new Set(["Net"]), show_ops: true });
  assert.equal(withOps.hasKids[2], 1, "fc2 gets a caret once its ops are shown");
});

test("default expansion opens depth-1 rows, plus leaf layers at depth 2 when ops show", () => {
  const data = small();
  assert.deepEqual(defaultExpanded(data, false), ["Net", "Optimizer.step#SGD.step"]);
  assert.deepEqual(defaultExpanded(data, true), ["Net", "Net.fc2", "Optimizer.step#SGD.step"]);
  assert.equal(isLeafLayer(data, 2), true);
  assert.equal(isLeafLayer(data, 1), false);
  assert.deepEqual(allExpandable(data), ["Net", "Net.fc2", "Optimizer.step#SGD.step"]);
});

test("clicks edit the expanded list: toggle, open search matches, open leaf layers for ops", () => {
  const data = small();
  assert.deepEqual(toggleExpanded(["Net"], "Net.fc2"), ["Net", "Net.fc2"]);
  assert.deepEqual(toggleExpanded(["Net", "Net.fc2"], "Net"), ["Net.fc2"]);
  assert.deepEqual(expandMatches(data, { search: "addmm", show_ops: true }, []), ["Net", "Net.fc2"]);
  const same = ["Net"];
  assert.equal(expandMatches(data, { search: "fc1" }, same), same, "nothing new to open: same list");
  const rows = visibleRows(data, { expanded: new Set(["Net"]), show_ops: true }).rows;
  assert.deepEqual(expandLeafLayers(data, rows, ["Net"]), ["Net", "Net.fc2", "Optimizer.step#SGD.step"]);
});

test("sort keys accept torch-style aliases and fall back to cpu_us", () => {
  assert.equal(resolveSort(VOCAB, "self_cpu_time_total"), "self_cpu_us");
  assert.equal(resolveSort(VOCAB, ["count"]), "calls");
  assert.equal(resolveSort(VOCAB, "bogus"), "cpu_us");
  assert.equal(resolveSort(VOCAB, null), "cpu_us");
});

test("glob translation follows fnmatch: classes, negation, literal brackets, special characters", () => {
  const m = (pattern, text) => globToRegExp(pattern).test(text);
  assert.ok(m("a*", "abc") && !m("a*", "bac"));
  assert.ok(m("a?c", "abc") && !m("a?c", "ac"));
  assert.ok(m("[ab]x", "bx") && !m("[ab]x", "cx"));
  assert.ok(m("[!ab]x", "cx") && !m("[!ab]x", "ax"));
  assert.ok(m("[a-c]x", "bx") && !m("[a-c]x", "dx"));
  assert.ok(m("[]]", "]"));
  assert.ok(m("a[", "a[") && !m("a[", "ab"), "an unclosed [ is literal");
  assert.ok(m("a+b(c)$", "a+b(c)$"), "regex syntax in a glob is literal");
  assert.ok(m("*", "a\nb"), "* crosses line breaks like fnmatch");
  assert.ok(!m("[z-a]", "z") && !m("[z-a]", "a"), "a reversed range matches nothing");
  const data = small();
  const match = makeMatcher(data, "*c2");
  assert.deepEqual([...Array(data.n).keys()].filter(match), [2]);
  assert.equal(makeMatcher(data, ""), null);
});

test("a self column is headed by what it shows: the layer figure with ops hidden, its own with ops shown", async () => {
  const { columnsFor } = await import("../../js/src/columns.js");
  const data = small();
  const header = (showOps) => columnsFor(data, null, showOps).find((c) => c.key === "self_cpu_us");
  const layer = VOCAB.columns.find((c) => c.name === "layer_self_cpu_us");
  const own = VOCAB.columns.find((c) => c.name === "self_cpu_us");
  assert.equal(header(false).label, layer.label, "ops hidden: the values are layer_self_cpu_us, so is the name");
  assert.equal(header(true).label, own.label);
  assert.match(header(false).title, new RegExp(`${own.label} with the op rows shown`));
  assert.equal(header(false).key, "self_cpu_us", "(sorting and the values still go through the self column)");
});
