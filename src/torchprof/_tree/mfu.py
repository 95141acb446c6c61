"""Model FLOPs utilisation: the FLOP/s each row achieved, as a share of the device's peak
(:mod:`~torchprof._tree.devices`).

A row's MFU is its FLOPs divided by its time and by the peak. The time is its device time
(``cuda_us``: its kernels, forward and backward) where the profile has device time, else its CPU
time (``cpu_us``; meaningful against a ``peak_flops=`` given for the CPU). It is NaN where the
peak is unknown, where the row's FLOPs are unknown, and where it took no time.
"""

from __future__ import annotations

from typing import Any

from .._vocab import is_missing
from .devices import Peak
from .tree import Tree

NAN = float("nan")


def time_column(has_device_time: bool) -> str:
    """The time MFU divides by: ``cuda_us`` with device time, else ``cpu_us``."""
    return "cuda_us" if has_device_time else "cpu_us"


def mfu_values(flops: list[Any], time_us: list[Any], peak: float) -> list[float]:
    """``flops / (time_us / 1e6) / peak`` per row; NaN where any part is unknown or the time is 0."""
    if is_missing(peak) or not peak > 0:
        return [NAN] * len(flops)
    out = []
    for f, t in zip(flops, time_us):
        if is_missing(f) or is_missing(t) or not t > 0:
            out.append(NAN)
        else:
            out.append(float(f) / (float(t) / 1e6) / peak)
    return out


def has_device_time(columns: dict[str, list[Any]], has_cuda: bool) -> bool:
    """The profile has device time to measure MFU against (a root with kernels)."""
    total = columns["cuda_us"][0] if columns["cuda_us"] else NAN
    return has_cuda and not is_missing(total) and total > 0


def tree_mfu(columns: dict[str, list[Any]], has_cuda: bool, peak: float) -> list[float]:
    """The ``mfu`` column of a finished tree's columns."""
    return mfu_values(columns["flops"], columns[time_column(has_device_time(columns, has_cuda))], peak)


def set_mfu(tree: Tree, peak: Peak) -> None:
    """Measure ``tree``'s ``mfu`` column against ``peak`` (after its FLOPs or times changed: counts
    put back from a trace, ranks merged)."""
    tree.columns["mfu"] = tree_mfu(tree.columns, tree.has_cuda, peak.flops_per_s)
    tree.peak_flops = peak.to_json()
