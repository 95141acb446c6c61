// @ts-check
// Numbers as every view writes them, exactly src/torchprof/_views/format.py (a pytest cross-check
// compares the two on the same values).

/** @param {any} v */
export function missing(v) {
  return v === null || v === undefined || Number.isNaN(v);
}

/**
 * Python's f"{x:.{digits}f}": exact decimal rounding of the double, ties to even. JS toFixed
 * rounds exact ties away from zero (0.125 -> "0.13"; Python gives "0.12").
 * @param {number} x @param {number} digits
 */
export function pyFixed(x, digits) {
  const sign = x < 0 || Object.is(x, -0) ? "-" : "";
  const a = Math.abs(x);
  let s = a.toFixed(digits);
  const exact = a.toFixed(Math.min(100, digits + 30));
  const dot = exact.indexOf(".");
  const rest = exact.slice(dot + 1 + digits);
  if (/^50*$/.test(rest)) {
    const truncated = exact.slice(0, digits ? dot + 1 + digits : dot);
    if (Number(truncated.at(-1)) % 2 === 0) s = truncated;
  }
  return sign + s;
}

/** @param {number} v */
function sig(v) {
  const a = Math.abs(v);
  if (a >= 100) return pyFixed(v, 0);
  if (a >= 10) return pyFixed(v, 1);
  return pyFixed(v, 2);
}

/** A duration in µs: "812µs", "1.23ms", "4.56s"; "-" when missing. */
export function formatTime(v) {
  if (missing(v)) return "-";
  const a = Math.abs(v);
  if (a >= 1e6) return sig(v / 1e6) + "s";
  if (a >= 1e3) return sig(v / 1e3) + "ms";
  return sig(v) + "µs";
}

/** Bytes, 1024-based like torch's tables: "512 B", "1.50 KB", "2.00 GB". */
export function formatBytes(v) {
  if (missing(v)) return "-";
  const a = Math.abs(v);
  for (const [unit, scale] of /** @type {[string, number][]} */ ([["GB", 1024 ** 3], ["MB", 1024 ** 2], ["KB", 1024]])) {
    if (a >= scale) return `${sig(v / scale)} ${unit}`;
  }
  return `${pyFixed(v, 0)} B`;
}

/** A count, 1000-based: "950", "1.82k", "3.64G". */
export function formatCount(v) {
  if (missing(v)) return "-";
  const a = Math.abs(v);
  for (const [unit, scale] of /** @type {[string, number][]} */ ([["T", 1e12], ["G", 1e9], ["M", 1e6], ["k", 1e3]])) {
    if (a >= scale) return sig(v / scale) + unit;
  }
  return pyFixed(v, 0);
}

export function formatRate(v) {
  return missing(v) ? "-" : formatCount(v) + "FLOP/s";
}

/** "45%", "4.5%", "" when either side is missing or the whole is 0. */
export function formatPercent(part, whole) {
  if (missing(part) || missing(whole) || !whole) return "";
  const pct = (100 * part) / whole;
  return (Math.abs(pct) >= 10 || pct === 0 ? pyFixed(pct, 0) : pyFixed(pct, 1)) + "%";
}

/**
 * The percent a table cell shows beside its value: formatPercent, but nothing for a share that
 * rounds to zero ("0.0%" in every other cell said nothing but cluttered the table).
 * @param {number} part @param {number} whole
 */
export function cellPercent(part, whole) {
  const text = formatPercent(part, whole);
  return /^-?0(\.0)?%$/.test(text) ? "" : text;
}

/**
 * A share as a percentage (_views/format.py fraction): three significant figures, two below
 * 0.01% ("0.0031%", "0.000040%"), "<0.000001%" below that, never an exponent.
 * @param {number} v
 */
export function formatFraction(v) {
  if (missing(v)) return "-";
  const pct = 100 * v;
  if (pct === 0 || Math.abs(pct) >= 0.01) return sig(pct) + "%";
  const digits = 1 - Math.floor(Math.log10(Math.abs(pct)));
  if (digits > 6) return (pct > 0 ? "<" : ">-") + "0.000001%";
  return pyFixed(pct, digits) + "%";
}

/**
 * A number as every view writes it, by the column's unit (_views/format.py value_text).
 * @param {string} unit @param {number} v
 */
export function formatValue(unit, v) {
  if (unit === "time") return formatTime(v);
  if (unit === "bytes") return formatBytes(v);
  if (unit === "count") return formatCount(v);
  if (unit === "fraction") return formatFraction(v);
  return missing(v) ? "-" : String(v);
}
