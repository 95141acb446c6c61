// The JS view rules against Python's, on trees and states Python wrote down: the same rows in
// the same order for every state, the same number strings, the same glob answers, and the
// binary payload decoding to the same table as the JSON one.
//
// The fixture is tests/js/fixtures/crosscheck.json (committed; tests/test_widget.py checks it is
// current and runs this file on a freshly generated copy via TORCHPROF_CROSSCHECK).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import {
  decodePayload, loadPayload, visibleRows, defaultExpanded, makeMatcher, formatTime, formatBytes,
  formatCount, formatPercent,
} from "../../js/widget.js";

const path = process.env.TORCHPROF_CROSSCHECK || new URL("./fixtures/crosscheck.json", import.meta.url);
const fixture = JSON.parse(readFileSync(path, "utf-8"));

for (const tree of fixture.trees) {
  test(`${tree.name}: every state shows the rows Python's visible_rows shows`, () => {
    const data = decodePayload(tree.payload);
    assert.deepEqual(data.path, tree.paths);
    assert.deepEqual(data.name, tree.names);
    assert.ok(tree.cases.length > 100);
    for (const c of tree.cases) {
      const state = { ...c.state, expanded: c.state.expanded === null ? null : new Set(c.state.expanded) };
      const got = visibleRows(data, state).rows.map((i) => data.path[i]);
      assert.deepEqual(got, c.rows.map((i) => tree.paths[i]), JSON.stringify(c.state));
    }
  });

  test(`${tree.name}: the default expansion is Python's`, () => {
    const data = decodePayload(tree.payload);
    assert.deepEqual(defaultExpanded(data, false), tree.default_expanded[0]);
    assert.deepEqual(defaultExpanded(data, true), tree.default_expanded[1]);
  });

  test(`${tree.name}: the binary payload decodes to the same table as the JSON one`, async () => {
    const fromJson = decodePayload(tree.payload);
    const bytes = new Uint8Array(Buffer.from(tree.packed_base64, "base64"));
    const fromBytes = await loadPayload(new DataView(bytes.buffer));
    for (const key of ["n", "path", "name", "text", "type", "shapes", "summary", "steps"]) {
      assert.deepEqual(fromBytes[key], fromJson[key], key);
    }
    for (const key of ["parent", "kind", "backward", "depth"]) assert.deepEqual([...fromBytes[key]], [...fromJson[key]], key);
    for (const [col, values] of Object.entries(fromJson.num)) {
      assert.deepEqual([...fromBytes.num[col]], [...values], col);
      assert.equal(fromBytes.allNaN[col], fromJson.allNaN[col], col);
    }
    // Python's own column values, NaN as null.
    for (const [col, values] of Object.entries(tree.numbers)) {
      assert.deepEqual([...fromBytes.num[col]].map((v) => (Number.isNaN(v) ? null : v)), values, col);
    }
  });
}

test("numbers are formatted exactly as _format.py formats them", () => {
  const fns = { time_us: formatTime, nbytes: formatBytes, count: formatCount };
  for (const [fn, value, expected] of fixture.format) {
    assert.equal(fns[fn](value === null ? NaN : value), expected, `${fn}(${value})`);
  }
  for (const [part, whole, expected] of fixture.percent) {
    assert.equal(formatPercent(part === null ? NaN : part, whole), expected, `percent(${part}, ${whole})`);
  }
});

test("search patterns match exactly what _view's matcher matches", () => {
  for (const [pattern, text, expected] of fixture.search) {
    const match = makeMatcher(pattern);
    assert.equal(match === null ? true : match(text.toLowerCase()), expected, `${JSON.stringify(pattern)} on ${JSON.stringify(text)}`);
  }
});
