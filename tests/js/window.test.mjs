// The virtual window: which rows exist in the DOM for a scroll position.
import { test } from "node:test";
import assert from "node:assert/strict";
import { virtualWindow } from "../../js/src/views/table.js";

test("at the top the window is the viewport plus the overscan below it", () => {
  assert.deepEqual(virtualWindow(0, 480, 24, 50_000, 40), { start: 0, end: 61, offset: 0, height: 1_200_000 });
});

test("in the middle the overscan is on both sides and the offset puts rows in place", () => {
  const w = virtualWindow(24 * 1000 + 10, 480, 24, 50_000, 40);
  assert.equal(w.start, 960);
  assert.equal(w.end, 1061);
  assert.equal(w.offset, 960 * 24);
});

test("at the bottom the window ends at the last row; the row count never exceeds a few hundred", () => {
  const total = 50_000;
  const bottom = virtualWindow(total * 24 - 480, 480, 24, total, 40);
  assert.equal(bottom.end, total);
  for (let top = 0; top <= total * 24; top += 7_919) {
    const w = virtualWindow(top, 480, 24, total, 40);
    assert.ok(w.end - w.start <= 21 + 1 + 80, `window of ${w.end - w.start} rows at ${top}`);
    assert.ok(w.start >= 0 && w.end <= total && w.start <= w.end);
  }
});

test("a scroll position past the end (the list just shrank) clamps to the last page", () => {
  const w = virtualWindow(1_000_000, 480, 24, 30, 40);
  assert.deepEqual([w.start, w.end], [0, 30]);
  const few = virtualWindow(5_000, 480, 24, 100, 10);
  assert.equal(few.end, 100);
  assert.ok(few.start < 100 - 20);
});

test("an empty list or a zero-height viewport gives a small, valid window", () => {
  assert.deepEqual(virtualWindow(0, 480, 24, 0, 40), { start: 0, end: 0, offset: 0, height: 0 });
  const w = virtualWindow(0, 0, 24, 1000, 40);
  assert.deepEqual([w.start, w.end], [0, 41]);
});
