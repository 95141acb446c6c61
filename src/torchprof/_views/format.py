"""Human-readable numbers and the summary wording, shared by every view (``js/widget.js`` mirrors
the number formats exactly; a cross-check test holds them together)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from .._tree.summary import Summary
from .._vocab import UNKNOWN_MARK, is_missing

# C0 controls, DEL and C1 controls: ESC and CSI start terminal escape sequences (colours, cursor
# moves, window titles, hyperlinks), BEL rings, CR and backspace overwrite what was printed.
# Bidirectional controls (U+061C, U+200E/F, U+202A-E, U+2066-9) reorder the text after them, so
# a name could show as another ("Trojan Source"); U+2028/U+2029 break lines; lone surrogates
# cannot be written out at all.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    code = ord(ch)
    return _NAMED_ESCAPES.get(ch) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: str) -> str:
    """``text`` safe to print on a terminal: every control character (C0, DEL, C1), bidirectional
    control, line or paragraph separator and lone surrogate written as a visible escape
    (``\\x1b``, ``\\n``, ``\\u202e``), so names from an untrusted trace cannot colour, move,
    retitle or clear the terminal, reorder what follows them, nor fake lines of the table."""
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text


def _sig(value: float) -> str:
    """Three significant figures without trailing noise: 1.23, 12.3, 123."""
    a = abs(value)
    if a >= 100:
        return f"{value:.0f}"
    if a >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def time_us(value: float) -> str:
    """A duration given in microseconds: ``812µs``, ``1.23ms``, ``4.56s``."""
    if is_missing(value):
        return "-"
    a = abs(value)
    if a >= 1e6:
        return _sig(value / 1e6) + "s"
    if a >= 1e3:
        return _sig(value / 1e3) + "ms"
    return _sig(value) + "µs"


def nbytes(value: float) -> str:
    """A byte count (1024-based, as torch's tables): ``512 B``, ``1.50 KB``, ``2.00 GB``."""
    if is_missing(value):
        return "-"
    a = abs(value)
    for unit, scale in (("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if a >= scale:
            return f"{_sig(value / scale)} {unit}"
    return f"{value:.0f} B"


def count(value: float) -> str:
    """A count (1000-based): ``950``, ``1.82k``, ``3.64G``."""
    if is_missing(value):
        return "-"
    a = abs(value)
    for unit, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if a >= scale:
            return _sig(value / scale) + unit
    return f"{value:.0f}"


def rate(value: float) -> str:
    """FLOP/s: ``12.3 GFLOP/s``."""
    if is_missing(value):
        return "-"
    return count(value) + "FLOP/s"


def percent(part: float, whole: float) -> str:
    if is_missing(part) or is_missing(whole) or not whole:
        return ""
    pct = 100.0 * part / whole
    if abs(pct) >= 10 or pct == 0:
        return f"{pct:.0f}%"
    return f"{pct:.1f}%"


def fraction(value: float) -> str:
    """A share written as a percentage, three significant figures: ``31.2%``, ``4.05%``, ``0.12%``;
    two below 0.01% (``0.0031%``, ``0.000040%``), so a small share never reads as zero, and
    ``<0.000001%`` below that (never an exponent)."""
    if is_missing(value):
        return "-"
    pct = 100.0 * value
    if pct == 0 or abs(pct) >= 0.01:
        return _sig(pct) + "%"
    digits = 1 - math.floor(math.log10(abs(pct)))
    if digits > 6:
        return ("<" if pct > 0 else ">-") + "0.000001%"
    return f"{pct:.{digits}f}%"


_BY_UNIT: dict[str, Callable[[float], str]] = {"time": time_us, "bytes": nbytes, "count": count, "int": lambda v: str(int(v)),
                                               "fraction": fraction}  # fmt: skip


def value_text(unit: str, value: float) -> str:
    """A number as every view writes it (``812µs``, ``1.50 KB``, ``3.64G``, ``7``); ``-`` when missing."""
    if is_missing(value):
        return "-"
    return _BY_UNIT[unit](value)


def summary_items(s: Summary) -> list[tuple[str, str, str]]:
    """The run's headline figures as ``(label, value, explanation)``, in one wording for every view
    (the terminal's summary line, the static HTML, the widget). Missing figures are left out; the
    forward/backward/other split only where there are modules (else "other" would repeat the total)."""
    items: list[tuple[str, str, str]] = []
    nan = float("nan")

    def get(key: str) -> Any:
        return s.get(key, nan)

    def add(label: str, value: Any, text: str, about: str) -> None:
        if not is_missing(value):
            items.append((label, text, about))

    cpu, fwd, bwd, other = get("cpu_us"), get("forward_cpu_us"), get("backward_cpu_us"), get("other_cpu_us")
    add("wall", get("wall_us"), time_us(get("wall_us")), "Wall-clock time of the profiled block")
    threads = s.get("threads", 1)
    if isinstance(threads, int) and threads > 1 and s.get("threads_at_once"):
        add("CPU", cpu, f"{time_us(cpu)} over {threads} threads",
            f"CPU time covered by the tree's root, summed over {threads} threads (prof.by_thread() gives each)")  # fmt: skip
    else:
        add("CPU", cpu, time_us(cpu), "CPU time covered by the tree's root")
    compiling = get("compile_cpu_us")
    if not is_missing(compiling) and compiling > 0:
        add("compiling", compiling, f"{time_us(compiling)} ({percent(compiling, cpu)})",
            "CPU time torch.compile spent compiling inside the block, in the (compilation) rows: not op time")  # fmt: skip
    if fwd > 0:
        add("forward", fwd, f"{time_us(fwd)} ({percent(fwd, cpu)})", "CPU time in module forward passes")
    if bwd > 0:
        add("backward", bwd, f"{time_us(bwd)} ({percent(bwd, cpu)})", "CPU time of backward work")
    if fwd > 0 and not is_missing(other) and cpu and abs(other) >= 0.0005 * cpu:
        add("other", other, f"{time_us(other)} ({percent(other, cpu)})", "CPU time outside modules and backward (optimizer, loss, data)")
    add("CUDA", get("cuda_us"), time_us(get("cuda_us")), "Device time: kernels, memcpys and memsets, summed over streams (can exceed wall)")
    busy, window = get("gpu_busy_us"), get("gpu_window_us")
    add("GPU busy", busy, f"{time_us(busy)} ({percent(busy, window)} of {time_us(window)})",
        "Time any device stream was running work, of the window from the first device start to the last device end; the rest is idle")  # fmt: skip
    compute, comm, memcpy = get("gpu_compute_us"), get("gpu_comm_us"), get("gpu_memcpy_us")
    add("compute", compute, f"{time_us(compute)} ({percent(compute, window)})",
        "Time compute kernels ran on the device, of the device window (the rest is communication or copies alone, or idle)")  # fmt: skip
    if comm > 0:
        overlap = get("gpu_comm_overlap_us")
        add("comm", comm, f"{time_us(comm)} ({percent(overlap, comm)} overlapped)",
            "Time communication kernels (NCCL) ran on the device; the share of it during which compute ran beside them on the same device")  # fmt: skip
    if memcpy > 0:
        add("memcpy", memcpy, time_us(memcpy), "Time memcpys and memsets ran on the device")
    add("params", get("params"), count(get("params")), "Parameters of the profiled modules")
    unknown = s.get("unknown_flop_ops")
    if unknown and is_missing(get("flops")):
        calls = sum(unknown.values())
        items.append(("FLOPs", UNKNOWN_MARK, f"Unknown: the run holds {calls} call{'s' if calls != 1 else ''} of ops of unknown cost "
                                             f"({_op_list(unknown)}; prof.unsupported_ops lists them)"))  # fmt: skip
    add("FLOPs", get("flops"), count(get("flops")), f"{count(get('macs'))} MACs")
    add("achieved", get("flops_per_s"), rate(get("flops_per_s")), "FLOPs divided by wall time")
    add("peak CPU mem", get("peak_cpu_mem"), nbytes(get("peak_cpu_mem")), "Peak host memory allocated during the run")
    add("peak CUDA mem", get("peak_cuda_mem"), nbytes(get("peak_cuda_mem")), "Peak device memory allocated during the run")
    for device, at in (s.get("peak_at") or {}).items():
        where = at.get("layer") or at.get("path")
        items.append((f"{device} peak in", f"{where} ({at.get('phase')})",
                      f"The layer running when {device} memory peaked ({nbytes(at.get('bytes', nan))}); deepest node: {at.get('path')}"))  # fmt: skip
    overrun, top = get("overrun_us"), s.get("overrun_top")
    if overrun > 0 and top:
        more = f" and {top['rows'] - 1} other row{'s' if top['rows'] > 2 else ''}" if top["rows"] > 1 else ""
        items.append(("outlived parent", f"{time_us(overrun)} ({top['name']}{more})",
                      "Ranges that ran past the end of the range they ran in (async collectives): each counts up to its "
                      "parent's end, and this time past it is in no total"))  # fmt: skip
    if s.get("interrupted"):
        items.append(("stopped by", str(s["interrupted"]), "The profiled code raised or was interrupted: the profile ends there"))
    for text in s.get("warnings") or ():
        items.append(("note", str(text), "What the figures leave out or could not know, and why"))
    return items


def unknown_flops_note(unknown: dict[str, int]) -> str:
    """The ops of unknown cost that make rows' FLOPs unknown (most calls first, as listed): the one
    text every view writes, and ``summary["warnings"]`` holds (a view writes each text once)."""
    calls = sum(unknown.values())
    shown = _op_list(unknown)
    return (f"FLOPs are unknown ({UNKNOWN_MARK}) in the rows that hold {calls} call{'s' if calls != 1 else ''} of ops of unknown "
            f"cost ({shown}): no formula, or a cost that depends on the values; every other row keeps its count, and "
            "prof.unsupported_ops lists them")


def _op_list(unknown: dict[str, int], shown: int = 4) -> str:
    """The first ops of a list of ops of unknown cost (most calls first, as listed), and how many more."""
    names = list(unknown)
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def summary_line(s: Summary, notes: bool = True, width: int | None = None) -> str:
    """``wall 1.20s · CPU 1.10s · forward 420ms (38%) · ...``: :func:`summary_items` on one line,
    or lines of at most ``width`` characters broken between items. Without ``notes``, the
    summary's notes (``summary["warnings"]``) are left to the view that writes them under it."""
    parts = [printable(f"{label} {value}") for label, value, _ in summary_items(s) if notes or label != "note"]
    if not width:
        return " · ".join(parts)
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " · " + part
        else:
            lines.append(part)
    return "\n".join(lines)


#: The longest path a headline writes in full; a longer one loses its middle.
HEADLINE_PATH = 80


def _clip(text: str, limit: int = HEADLINE_PATH) -> str:
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return text[:head] + "…" + text[len(text) - (limit - 1 - head) :]


def headline(s: Summary) -> str:
    """``Costliest layer: ResNet.layer4.1.conv2 (Conv2d) 9.3% · costliest type: Conv2d 69% (20 modules) ·
    MFU 31% of NVIDIA H100 SXM bf16``: shares of the run's CPU total (device total with a device)."""
    parts = []
    device = s.get("hot_metric") == "cuda_us"
    of = "device time" if device else "CPU time"
    layer = s.get("bottleneck")
    if isinstance(layer, dict):
        kind = f" ({layer['type']})" if layer.get("type") else ""
        parts.append(f"costliest layer: {_clip(str(layer.get('layer') or layer['path']))}{kind} "
                     f"{percent(layer.get('share', float('nan')), 1.0) or '0%'} of {of}")  # fmt: skip
    costly = s.get("costliest_type")
    if isinstance(costly, dict):
        parts.append(f"costliest type: {costly['type']} {percent(costly.get('share', float('nan')), 1.0) or '0%'} "
                     f"({costly.get('modules')} module{'s' if costly.get('modules') != 1 else ''})")  # fmt: skip
    mfu = s.get("mfu", float("nan"))
    peak: dict[str, Any] = s["peak_flops"] if isinstance(s.get("peak_flops"), dict) else {}
    if not is_missing(mfu):
        against = " ".join(str(x) for x in (peak.get("device"), peak.get("dtype")) if x) or rate(peak.get("flops_per_s", float("nan")))
        parts.append(f"MFU {fraction(mfu)} of {against}")
    if not parts:
        return "nothing ran long enough to name a bottleneck"
    text = " · ".join(parts)
    return printable(text[0].upper() + text[1:])
