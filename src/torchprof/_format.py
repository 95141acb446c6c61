"""Human-readable numbers, shared by the terminal table and the static HTML."""

from __future__ import annotations

import math


def _sig(value: float) -> str:
    """Three significant figures without trailing noise: 1.23, 12.3, 123."""
    a = abs(value)
    if a >= 100:
        return f"{value:.0f}"
    if a >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def is_missing(value: object) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def time_us(value: float | None) -> str:
    """A duration given in microseconds: ``812µs``, ``1.23ms``, ``4.56s``."""
    if is_missing(value):
        return "-"
    a = abs(value)
    if a >= 1e6:
        return _sig(value / 1e6) + "s"
    if a >= 1e3:
        return _sig(value / 1e3) + "ms"
    return _sig(value) + "µs"


def nbytes(value: float | None) -> str:
    """A byte count (1024-based, as torch's tables): ``512 B``, ``1.50 KB``, ``2.00 GB``."""
    if is_missing(value):
        return "-"
    a = abs(value)
    for unit, scale in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if a >= scale:
            return f"{_sig(value / scale)} {unit}"
    return f"{value:.0f} B"


def count(value: float | None) -> str:
    """A count (1000-based): ``950``, ``1.82k``, ``3.64G``."""
    if is_missing(value):
        return "-"
    a = abs(value)
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if a >= scale:
            return _sig(value / scale) + unit
    return f"{value:.0f}"


def rate(value: float | None) -> str:
    """FLOP/s: ``12.3 GFLOP/s``."""
    if is_missing(value):
        return "-"
    return count(value) + "FLOP/s"


def percent(part: float | None, whole: float | None) -> str:
    if is_missing(part) or is_missing(whole) or not whole:
        return ""
    pct = 100.0 * part / whole
    if abs(pct) >= 10 or pct == 0:
        return f"{pct:.0f}%"
    return f"{pct:.1f}%"
