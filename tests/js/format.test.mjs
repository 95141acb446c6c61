// Number formatting (the same strings as _format.py) and CSV export.
import { test } from "node:test";
import assert from "node:assert/strict";
import { csvField, csvText, toCSV } from "../../js/src/csv.js";
import { pyFixed, formatTime, formatBytes, formatCount, formatPercent, formatRate } from "../../js/src/format.js";
import { decode, small, VOCAB } from "./helpers.mjs";

test("fixed-point rounding matches Python's (ties to even on the exact binary value)", () => {
  assert.equal(pyFixed(0.125, 2), "0.12"); // exact tie: even; toFixed would say 0.13
  assert.equal(pyFixed(0.375, 2), "0.38");
  assert.equal(pyFixed(2.5, 0), "2");
  assert.equal(pyFixed(3.5, 0), "4");
  assert.equal(pyFixed(-2.5, 0), "-2");
  assert.equal(pyFixed(1.005, 2), "1.00"); // 1.005 is 1.00499999... in binary: not a tie
  assert.equal(pyFixed(-0.001, 2), "-0.00");
  assert.equal(pyFixed(-0, 1), "-0.0");
  assert.equal(pyFixed(99.96, 1), "100.0");
});

test("times read as µs, ms and s with three significant figures", () => {
  assert.equal(formatTime(812), "812µs");
  assert.equal(formatTime(12.34), "12.3µs");
  assert.equal(formatTime(1.5), "1.50µs");
  assert.equal(formatTime(1234), "1.23ms");
  assert.equal(formatTime(4_560_000), "4.56s");
  assert.equal(formatTime(NaN), "-");
  assert.equal(formatTime(null), "-");
});

test("bytes are 1024-based, counts 1000-based", () => {
  assert.equal(formatBytes(512), "512 B");
  assert.equal(formatBytes(1536), "1.50 KB");
  assert.equal(formatBytes(2 * 1024 ** 3), "2.00 GB");
  assert.equal(formatBytes(-3 * 1024 ** 2), "-3.00 MB");
  assert.equal(formatCount(950), "950");
  assert.equal(formatCount(1820), "1.82k");
  assert.equal(formatCount(3.64e9), "3.64G");
  assert.equal(formatCount(11_689_512), "11.7M");
  assert.equal(formatRate(1.23e10), "12.3GFLOP/s");
});

test("percent of the root: whole numbers from 10%, one decimal below, empty without a base", () => {
  assert.equal(formatPercent(50, 200), "25%");
  assert.equal(formatPercent(9, 200), "4.5%");
  assert.equal(formatPercent(0, 200), "0%");
  assert.equal(formatPercent(5, 0), "");
  assert.equal(formatPercent(NaN, 10), "");
});

test("CSV fields are quoted only when they hold a comma, a quote or a line break", () => {
  assert.equal(csvField("aten::addmm"), "aten::addmm");
  assert.equal(csvField("a,b"), '"a,b"');
  assert.equal(csvField('say "hi"'), '"say ""hi"""');
  assert.equal(csvField("two\nlines"), '"two\nlines"');
  assert.equal(csvField("cr\r"), '"cr\r"');
  assert.equal(csvField("<img src=x>"), "<img src=x>");
});

test("the CSV export holds the given rows with the DataFrame's columns", () => {
  const data = small();
  const csv = toCSV(data, [0, 1, 4]);
  const [header, ...lines] = csv.trimEnd().split("\n");
  assert.equal(header, VOCAB.columns.map((c) => c.name).join(","));
  assert.equal(lines.length, 3);
  const names = header.split(",");
  const row = Object.fromEntries(lines[2].split(",").map((v, k) => [names[k], v]));
  assert.deepEqual(
    { path: row.path, name: row.name, kind: row.kind, type: row.type, parent: row.parent, depth: row.depth, calls: row.calls,
      cpu_us: row.cpu_us, cuda_us: row.cuda_us, params: row.params, flops: row.flops, is_backward: row.is_backward },
    { path: "Net.fc1", name: "fc1", kind: "module", type: "Linear", parent: "Net", depth: "2", calls: "2",
      cpu_us: "50", cuda_us: "", params: "200", flops: "800", is_backward: "False" });
  const root = Object.fromEntries(lines[0].split(",").map((v, k) => [names[k], v]));
  assert.deepEqual([root.path, root.kind, root.type, root.module, root.parent, root.depth, root.calls], ["profile", "region", "", "", "", "0", "1"]);
});

test("CSV text cells that start like a formula are written behind a quote; numbers stay numbers", () => {
  const data = decode([
    { path: "profile", name: "profile", kind: "region", parent: -1, cpu_us: 10, calls: 1 },
    { path: "=HYPERLINK(\"http://x\")", name: "=HYPERLINK(\"http://x\")", kind: "region", parent: 0, cpu_us: -1.5, calls: 1 },
    { path: "=HYPERLINK(\"http://x\")/@SUM(A1)", name: "@SUM(A1)", kind: "op", parent: 1, cpu_us: 2, calls: 1, type: "+cmd" },
    { path: "-2+3", name: "-2+3", kind: "region", parent: 0, cpu_us: 3, calls: 1, shapes: "\tx" },
    { path: "\rr", name: "\rr", kind: "region", parent: 0, cpu_us: 1, calls: 1, type: "a=b" },
  ]);
  const [header, ...lines] = toCSV(data, [1, 2, 3]).trimEnd().split("\n");
  const names = header.split(",");
  const col = (line, c) => line.split(/,(?=(?:[^"]*"[^"]*")*[^"]*$)/)[names.indexOf(c)];
  assert.equal(col(lines[0], "path"), "\"'=HYPERLINK(\"\"http://x\"\")\"");
  assert.equal(col(lines[0], "cpu_us"), "-1.5"); // a number, not a formula
  assert.equal(col(lines[1], "name"), "'@SUM(A1)");
  assert.equal(col(lines[1], "type"), "'+cmd");
  assert.equal(col(lines[1], "parent"), "\"'=HYPERLINK(\"\"http://x\"\")\"");
  assert.equal(col(lines[2], "name"), "'-2+3");
  assert.equal(col(lines[2], "input_shapes"), "'\tx");
  assert.equal(csvText(VOCAB, "\rr"), "'\rr");
  assert.equal(csvText(VOCAB, "a=b"), "a=b"); // only the first character matters
  assert.equal(csvText(VOCAB, ""), "");
});
