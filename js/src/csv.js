// @ts-check
// "Export CSV": the rows of the part of the run viewed with the DataFrame's columns, exactly what
// `w.view_df.to_csv(index=False)` holds (src/torchprof/_views/frame.py).

/** @import { Data, Vocab } from "./types.js" */

/**
 * One CSV field, quoted when it holds a comma, a quote or a line break (RFC 4180).
 * @param {any} text
 */
export function csvField(text) {
  const s = String(text);
  return /[",\r\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
}

/**
 * A text cell as a spreadsheet cannot run it: behind a `'` when it starts like a formula (the
 * vocabulary's csv_formula_start: = + - @ tab CR, OWASP's advice), exactly _views/frame.py
 * csv_text. Numbers are never passed here: -1.5 stays a number.
 * @param {Vocab} vocab @param {string} text
 */
export function csvText(vocab, text) {
  return text.length > 0 && vocab.csv_formula_start.includes(text[0]) ? "'" + text : text;
}

/** @param {Data} data @param {string} col @param {number} i @returns {string} */
function csvValue(data, col, i) {
  const R = data.roles;
  if (col in data.text) return data.text[col][i] ?? "";
  if (col in data.num) return Number.isNaN(data.num[col][i]) ? "" : String(data.num[col][i]);
  if (col === R.path) return data.path[i];
  if (col === R.name) return data.name[i];
  if (col === R.kind) return data.vocab.kinds[data.kind[i]];
  if (col === R.parent) return data.parent[i] >= 0 ? data.path[data.parent[i]] : "";
  if (col === R.depth) return String(data.depth[i]);
  if (col === R.backward) return data.backward[i] ? "True" : "False";
  return "";
}

/**
 * The CSV file's name: the profile's label, with the model's when the profiled block holds one
 * root module (`cell-model.csv` for `%%torchprof`, `profile-ResNet.csv`), and the step viewed.
 * @param {Data} data @param {string} step
 */
export function exportFileName(data, step) {
  const label = String(data.summary.name ?? data.name[0] ?? "profile");
  const moduleCode = data.moduleCode;
  const tops = [];
  for (let c = data.childStart[0]; c < data.childStart[1]; c++) if (data.kind[data.childIndex[c]] === moduleCode) tops.push(data.childIndex[c]);
  let base = label;
  if (data.kind[0] !== moduleCode && tops.length === 1 && data.name[tops[0]] !== label) base += "-" + data.name[tops[0]];
  if (step) base += step === data.vocab.all_steps ? "-all-steps" : "-step" + step;
  return base.replace(/[^\w.-]+/g, "_") + ".csv";
}

/**
 * The given rows as CSV with the DataFrame's columns (what `w.view_df.to_csv(index=False)` holds).
 * @param {Data} data @param {number[]} rows
 */
export function toCSV(data, rows) {
  const cols = data.vocab.columns.map((c) => c.name);
  const text = new Set(data.vocab.columns.filter((c) => c.dtype === "str").map((c) => c.name));
  const cell = (/** @type {string} */ c, /** @type {number} */ i) => {
    const v = csvValue(data, c, i);
    return csvField(text.has(c) ? csvText(data.vocab, v) : v);
  };
  const lines = [cols.map(csvField).join(",")];
  for (const i of rows) lines.push(cols.map((c) => cell(c, i)).join(","));
  return lines.join("\n") + "\n";
}
