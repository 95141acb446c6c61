// The JS view rules against Python's, on trees and states Python wrote down: the same rows in
// the same order for every state, the same values shown (self folding), the same number strings,
// the same search answers, the same natural order, steps and by-type groups, and the binary
// payload decoding to the same table as the JSON one.
//
// The fixture is tests/js/fixtures/crosscheck.json (committed; tests/test_widget.py checks it is
// current and runs this file on a freshly generated copy via TORCHPROF_CROSSCHECK).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { formatTime, formatBytes, formatCount, formatFraction, formatPercent } from "../../js/src/format.js";
import { decodePayload, loadPayload } from "../../js/src/payload.js";
import { visibleRows, shownValues, naturalKey, compareNatural } from "../../js/src/rows.js";
import { textTest, pathTest } from "../../js/src/search.js";
import { defaultExpanded, stepRows } from "../../js/src/tree.js";
import { flameMetrics } from "../../js/src/views/flame.js";
import { byType } from "../../js/src/views/top.js";

const path = process.env.TORCHPROF_CROSSCHECK || new URL("./fixtures/crosscheck.json", import.meta.url);
const fixture = JSON.parse(readFileSync(path, "utf-8"));
const nullable = (values) => Array.from(values, (v) => (Number.isNaN(v) ? null : v));

for (const tree of fixture.trees) {
  test(`${tree.name}: every state shows the rows and values Python's visible_rows and shown_values show`, () => {
    const data = decodePayload(tree.payload);
    assert.deepEqual(data.path, tree.paths);
    assert.deepEqual(data.name, tree.names);
    assert.ok(tree.cases.length > 100);
    for (const c of tree.cases) {
      const state = { ...c.state, expanded: c.state.expanded === null ? null : new Set(c.state.expanded) };
      const view = visibleRows(data, state);
      assert.deepEqual(view.rows.map((i) => data.path[i]), c.rows.map((i) => tree.paths[i]), JSON.stringify(c.state));
      for (const [col, values] of Object.entries(c.values)) {
        const shown = shownValues(data, col, view.shown);
        assert.deepEqual(nullable(view.rows.map((i) => shown[i])), values, `${col} ${JSON.stringify(c.state)}`);
      }
    }
  });

  test(`${tree.name}: the default expansion is Python's`, () => {
    const data = decodePayload(tree.payload);
    assert.deepEqual(defaultExpanded(data, false), tree.default_expanded[0]);
    assert.deepEqual(defaultExpanded(data, true), tree.default_expanded[1]);
  });

  test(`${tree.name}: steps in the order they ran, module types summed as prof.by_type() sums them, Flame metrics Python accepts`, () => {
    const data = decodePayload(tree.payload);
    for (const m of flameMetrics(data)) assert.ok(fixture.metrics.includes(m.key), m.key);
    assert.deepEqual(stepRows(data), tree.step_rows);
    const got = byType(data).map((g) => ({ type: g.type, modules: g.modules,
      ...Object.fromEntries(["self_cpu_us", "layer_self_cpu_us", "cpu_us", "calls"].map((c) => [c, Number.isNaN(g.sums[c]) ? null : g.sums[c]])) }));
    assert.deepEqual(got, tree.by_type);
  });

  test(`${tree.name}: the binary payload decodes to the same table as the JSON one`, async () => {
    const fromJson = decodePayload(tree.payload);
    const bytes = new Uint8Array(Buffer.from(tree.packed_base64, "base64"));
    const fromBytes = await loadPayload(new DataView(bytes.buffer));
    const tables = [[fromBytes, fromJson]];
    if (fromJson.folded) tables.push([fromBytes.folded.table, fromJson.folded.table]);
    for (const [a, b] of tables) {
      for (const key of ["n", "path", "name", "text", "type", "shapes", "summary", "steps"]) assert.deepEqual(a[key], b[key], key);
      for (const key of ["parent", "kind", "backward", "depth", "end"]) assert.deepEqual([...a[key]], [...b[key]], key);
      for (const [col, values] of Object.entries(b.num)) {
        assert.deepEqual([...a.num[col]], [...values], col);
        assert.equal(a.allNaN[col], b.allNaN[col], col);
      }
    }
    if (fromJson.folded) {
      for (const key of ["low", "high"]) {
        for (const [col, values] of Object.entries(fromJson.folded[key])) assert.deepEqual([...fromBytes.folded[key][col]], [...values], `${key} ${col}`);
      }
      assert.deepEqual(fromBytes.folded.runs, fromJson.folded.runs);
    }
    // Python's own column values, NaN as null.
    for (const [col, values] of Object.entries(tree.numbers)) assert.deepEqual(nullable(fromBytes.num[col]), values, col);
  });
}

test("the folded steps a payload carries are the tree Python folds (across_steps)", () => {
  const stepped = fixture.trees.find((t) => t.name === "steps");
  const folded = fixture.trees.find((t) => t.name === "steps folded");
  const data = decodePayload(stepped.payload);
  assert.equal(data.folded.count, 3);
  assert.deepEqual(data.folded.table.path, folded.paths);
  for (const [col, values] of Object.entries(folded.numbers)) assert.deepEqual(nullable(data.folded.table.num[col]), values, col);
});

test("numbers are formatted exactly as _format.py formats them", () => {
  const fns = { time_us: formatTime, nbytes: formatBytes, count: formatCount, fraction: formatFraction };
  for (const [fn, value, expected] of fixture.format) {
    assert.equal(fns[fn](value === null ? NaN : value), expected, `${fn}(${value})`);
  }
  for (const [part, whole, expected] of fixture.percent) {
    assert.equal(formatPercent(part === null ? NaN : part, whole), expected, `percent(${part}, ${whole})`);
  }
});

test("name and path patterns match exactly what rows.py text_test and path_test match", () => {
  for (const [pattern, text, onName, onPath] of fixture.search) {
    const [p, t] = [pattern.toLowerCase(), text.toLowerCase()];
    assert.equal(textTest(p)(t), onName, `name ${JSON.stringify(pattern)} on ${JSON.stringify(text)}`);
    assert.equal(pathTest(p)(t), onPath, `path ${JSON.stringify(pattern)} on ${JSON.stringify(text)}`);
  }
});

test("natural order is rows.py natural_key's", () => {
  const { texts, order } = fixture.natural;
  const got = texts.map((_, i) => i).sort((a, b) => compareNatural(naturalKey(texts[a]), naturalKey(texts[b])));
  assert.deepEqual(got.map((i) => texts[i]), order.map((i) => texts[i]));
});
