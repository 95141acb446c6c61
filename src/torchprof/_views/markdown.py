"""A summary to paste into an issue or a chat (``prof.to_markdown()``, ``python -m torchprof --md``).

Always the same sections in the same order, each present even when it has nothing to say (then it
says so), so two runs of the same code give the same text apart from the figures: the headline,
the run in one line, the costliest layers, the insights, MFU, the memory peak's make-up, the
steps and what the figures leave out. At most :data:`MAX_BYTES` bytes of UTF-8: past that, fewer layers, then fewer insights,
then shorter messages.
"""

from __future__ import annotations

from typing import Any

from .._tree.hotpath import Ranked, fold_steps, hot_path, ranked_layers, self_column
from .._tree.summary import Summary
from .._tree.tree import Tree
from .._vocab import MEMORY_CATEGORIES, is_missing
from . import format as fmt
from .insights import Finding

#: The most bytes the summary takes (a GitHub comment or a chat message shows it whole).
MAX_BYTES = 4096
#: The costliest layers listed (fewer when the text would be too long).
TOP_LAYERS = 8
#: Insights listed (fewer when the text would be too long).
TOP_INSIGHTS = 5
#: Longest path written in full; longer ones lose their middle.
PATH_CHARS = 56


def _cell(text: str) -> str:
    """Text for a Markdown table cell: no pipes or newlines, no control characters."""
    return fmt.printable(text).replace("|", "\\|").replace("\n", " ")


def _clip(text: str, limit: int = PATH_CHARS) -> str:
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return text[:head] + "…" + text[len(text) - (limit - 1 - head) :]


def _pct(share: float) -> str:
    return fmt.percent(share, 1.0) or "0%"


def top_layers(tree: Tree, count: int) -> list[Ranked]:
    """The layers with the largest own time (ops folded in; device time with a device; one
    layer's rows of every step added up), largest first: the Top view's ranking."""
    if not len(tree):
        return []
    own = tree.columns[self_column(hot_path(tree).metric)]
    return [r for r in ranked_layers(tree, 0, len(tree), own, named=count) if r.own_us > 0][:count]


def _layers_table(tree: Tree, ranked: list[Ranked], summary: Summary) -> list[str]:
    cols = tree.columns
    device = summary.get("hot_metric") == "cuda_us"
    total = cols["cuda_us" if device else "cpu_us"]
    base = total[0]
    kind = "device" if device else "CPU"
    steps = any(r.rows > 1 for r in ranked)
    lines = [f"| layer | type | own {kind}{' (all steps)' if steps else ''} | total {kind} | FLOPs | MFU |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for r in ranked:
        i = r.row
        t = cols["type"][i] if cols["kind"][i] == "module" and isinstance(cols["type"][i], str) else ""
        # The figures of one row (one step's) beside the layer's own time over every step.
        lines.append(
            f"| `{_cell(_clip(r.key))}` | {_cell(t)} | {fmt.time_us(r.own_us)} ({_pct(r.own_us / base if base else 0)}) "
            f"| {fmt.time_us(total[i])} | {fmt.count(cols['flops'][i])} | {fmt.fraction(cols['mfu'][i])} |"
        )
    return lines


def _insight_lines(findings: list[Finding], limit: int, message_chars: int | None) -> list[str]:
    if not findings:
        return ["No rule fired: nothing stands out (see the rules in torchprof._views.insights)."]
    lines = []
    for n, f in enumerate(findings[:limit], 1):
        stake = f", {fmt.time_us(f.at_stake_us)}" if not is_missing(f.at_stake_us) else ""
        message, advice = f.message, f.advice
        if message_chars is not None:
            message, advice = _clip(message, message_chars), _clip(advice, message_chars)
        lines.append(f"{n}. **{f.rule}** ({_pct(f.share)}{stake}): {fmt.printable(message)}. *Try:* {fmt.printable(advice)}.")
    if len(findings) > limit:
        lines.append(f"{len(findings) - limit} more in prof.insights().")
    return lines


def _run_line(s: Summary) -> str:
    """The run in one line, the same items whatever the timings (only what was recorded decides:
    device time, memory): wall, CPU and its split, device time and busy share, FLOPs, FLOP/s,
    peak memory."""
    nan = float("nan")
    cpu = s.get("cpu_us", nan)
    parts = [f"wall {fmt.time_us(s.get('wall_us', nan))}",
             f"CPU {fmt.time_us(cpu)} (forward {_pct(s.get('forward_cpu_us', 0) / cpu if cpu else 0)}, backward "
             f"{_pct(s.get('backward_cpu_us', 0) / cpu if cpu else 0)}, other {_pct(s.get('other_cpu_us', 0) / cpu if cpu else 0)})"]  # fmt: skip
    if not is_missing(s.get("cuda_us", nan)):
        busy, window = s.get("gpu_busy_us", nan), s.get("gpu_window_us", nan)
        parts.append(f"device {fmt.time_us(s['cuda_us'])} (busy {fmt.percent(busy, window) or '-'} of its window)")
    parts += [f"FLOPs {fmt.count(s.get('flops', nan))}", f"achieved {fmt.rate(s.get('flops_per_s', nan))}"]
    for peak, name in ((s.get("peak_cpu_mem", nan), "peak host memory"), (s.get("peak_cuda_mem", nan), "peak device memory")):
        if not is_missing(peak):
            parts.append(f"{name} {fmt.nbytes(peak)}")
    return fmt.printable(" · ".join(parts))


def _mfu_line(summary: Summary) -> str:
    peak: dict[str, Any] = summary["peak_flops"] if isinstance(summary.get("peak_flops"), dict) else {}
    mfu = summary.get("mfu", float("nan"))
    if is_missing(mfu):
        known_peak = isinstance(peak.get("flops_per_s"), (int, float))
        why = "the FLOPs are unknown (prof.unsupported_ops lists the ops of unknown cost)" if known_peak else (peak.get("source") or "no peak FLOP/s known")
        return f"**MFU:** unknown: {fmt.printable(str(why))}."
    against = " ".join(str(x) for x in (peak.get("device"), peak.get("dtype")) if x) or "the given peak"
    wall = summary.get("mfu_wall", float("nan"))
    return (f"**MFU:** {fmt.fraction(mfu)} of {against} ({fmt.rate(peak.get('flops_per_s', float('nan')))}) over "
            f"{'device' if summary.get('hot_metric') == 'cuda_us' else 'CPU'} time; {fmt.fraction(wall)} over wall time "
            f"({fmt.rate(summary.get('flops_per_s', float('nan')))} achieved).")  # fmt: skip


def _memory_lines(tree: Tree, summary: Summary) -> list[str]:
    devices = tree.memory.get("devices", {}) if tree.has_memory and tree.memory else {}
    if not devices:
        return ["**Memory:** not recorded (profile with memory=True)."]
    name = next((d for d in devices if d != "cpu"), next(iter(devices)))
    peak = devices[name]
    layer = peak.get("layer_row")
    where = tree.paths[layer if layer is not None else peak["row"]]
    head = (f"**Memory:** {name} peak {fmt.nbytes(peak['peak'])} in `{_cell(_clip(str(where)))}` ({peak.get('phase')})")
    parts = peak.get("breakdown")
    if not parts:
        return [head + "; what it is made of is unknown (the source recorded no allocation addresses)."]
    sums = dict.fromkeys(MEMORY_CATEGORIES, 0)
    layers: dict[str, int] = {}
    for category, owner, nbytes, inside in parts:
        if inside:
            sums[category] += nbytes
            if owner is not None:
                key = fold_steps(owner)  # one layer, whichever step allocated what it holds
                layers[key] = layers.get(key, 0) + nbytes
    total = peak["peak"] or 1.0
    # Categories under 0.05% of the peak (a few bytes from before profiling) would read "0.0%".
    made = " · ".join(f"{c.replace('_', ' ')} {_pct(sums[c] / total)}" for c in MEMORY_CATEGORIES if sums[c] >= 0.0005 * total)
    top = sorted(layers.items(), key=lambda kv: -kv[1])[:3]
    holders = ", ".join(f"`{_cell(_clip(p, 40))}` {fmt.nbytes(b)}" for p, b in top)
    return [f"{head}: {made or 'nothing alive'}." + (f" Held most by {holders}." if holders else "")]


def _steps_line(tree: Tree, summary: Summary) -> str:
    spread = summary.get("step_spread")
    if not isinstance(spread, dict) or not spread:
        return "**Steps:** none marked (prof.step() once per iteration marks them)."
    slow = spread.get("slow") or []
    slow_text = f"slow: {', '.join(map(str, slow))}" if slow else "none slow"
    count = summary.get("steps")
    one_tree = "" if tree.steps else " (marked by prof.step(); one tree for all: a schedule= gives each step its rows)"
    return (f"**Steps:** {count} step{'s' if count != 1 else ''}{one_tree}, median {fmt.time_us(spread['median_us'])}, from "
            f"{fmt.time_us(spread['min_us'])} to {fmt.time_us(spread['max_us'])}; {slow_text}.")  # fmt: skip


def to_markdown(tree: Tree, summary: Summary, findings: list[Finding], label: str) -> str:
    """The profile as at most :data:`MAX_BYTES` bytes of Markdown (see the module's docstring)."""
    attempts = [(TOP_LAYERS, TOP_INSIGHTS, None), (5, TOP_INSIGHTS, None), (5, 3, 240), (3, 3, 160), (3, 2, 100), (2, 1, 80)]
    text = ""
    for layers, insights, chars in attempts:
        text = _render(tree, summary, findings, label, layers, insights, chars)
        if len(text.encode("utf-8")) <= MAX_BYTES:
            return text
    data = text.encode("utf-8")[: MAX_BYTES - 4]
    return data.decode("utf-8", errors="ignore").rstrip() + "\n…\n"


def _render(tree: Tree, summary: Summary, findings: list[Finding], label: str, layers: int, insights: int,
            message_chars: int | None) -> str:  # fmt: skip
    lines = [f"### torchprof: {_cell(label)}", "", f"**{fmt.printable(str(summary.get('headline', '')))}**", "",
             _run_line(summary), ""]  # fmt: skip
    ranked = top_layers(tree, layers)
    if ranked:
        per_step = ", over every step; total, FLOPs and MFU of its costliest step" if any(r.rows > 1 for r in ranked) else ""
        lines += [f"**Costliest layers** (own time with ops folded in{per_step}):", "", *_layers_table(tree, ranked, summary), ""]
    else:
        lines += ["**Costliest layers:** none (no layer took time).", ""]
    lines += ["**Insights:**", "", *_insight_lines(findings, insights, message_chars), ""]
    lines += [_mfu_line(summary), "", *_memory_lines(tree, summary), "", _steps_line(tree, summary), ""]
    lines += _warning_lines(summary, message_chars)
    return "\n".join(lines)


def _warning_lines(summary: Summary, chars: int | None) -> list[str]:
    """What the figures leave out (the ops of unknown cost that make the FLOPs unknown, and
    ``summary["warnings"]``: a root whose FLOPs are unknown and why, module calls the profile
    lacks), each clipped to ``chars`` where the text must shrink."""
    texts = [fmt.printable(str(text)) for text in summary.get("warnings") or ()]
    unknown = summary.get("unknown_flop_ops")
    if unknown:
        note = fmt.unknown_flops_note(unknown)
        texts = [note, *(text for text in texts if text != note)]
    if not texts:
        return ["**Not counted:** nothing the profiler knows of.", ""]
    clipped = [t if chars is None or len(t) <= chars else t[: chars - 1] + "…" for t in texts]
    return ["**Not counted:**", "", *(f"- {t}" for t in clipped), ""]
