"""One view of a distributed job: the trees of its ranks merged into one (``load_trace`` of several
per-rank traces), figures per rank, with the range over the ranks and the slowest rank per row."""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import compress
from typing import Any, cast

from .._vocab import COLUMN, COLUMNS, LARGEST, RANK_COLUMNS, RANK_METRICS, RANK_SPREAD_METRICS, is_missing
from .tree import Columns, RankRow, StepTotals, Tree
from .union import Union, preorder, summed, unite

NAN = float("nan")
#: Columns of a node that come from the first rank that has it, not from a figure over ranks.
_FIRST = frozenset(c.name for c in COLUMNS if not c.numeric) | {"params", "exec_order"}
_STRUCTURE = frozenset({"path", "name", "kind", "depth", "parent"})


def rank_rows(tree: Tree, rank: Any, wall_us: float | None) -> list[RankRow]:
    """One rank's rows of ``prof.by_rank()``: one per ``ProfilerStep`` (its wall time, CPU total,
    device busy time and communication inside it; idle = wall - busy), or, without steps, one
    for the whole run (idle = the device window - busy, as ``prof.summary``)."""
    if tree.steps:
        return [
            {"rank": rank, "step": s["step"], "wall_us": s["wall_us"], "cpu_us": s["cpu_us"],
             "gpu_busy_us": s.get("gpu_busy_us", NAN), "comm_us": s.get("comm_us", NAN),
             "idle_us": s["wall_us"] - s.get("gpu_busy_us", NAN)}
            for s in tree.steps
        ]  # fmt: skip
    return [{"rank": rank, "step": None, "wall_us": NAN if wall_us is None else wall_us, "cpu_us": tree.columns["cpu_us"][0],
             "gpu_busy_us": tree.gpu_busy_us, "comm_us": tree.comm_us,
             "idle_us": tree.gpu_window_us - tree.gpu_busy_us}]  # fmt: skip


def merge_ranks(trees: Sequence[Tree], ranks: Sequence[Any], walls: Sequence[float | None], label: str) -> Tree:
    """The ranks' trees as one tree: the union of their nodes (matched as two runs are,
    :func:`~torchprof._tree.union.unite`, steps kept apart: the ranks of one job step together).

    Every figure is the mean over the ranks, a rank without the node counting 0, so a parent's
    mean is still the sum of its children's (calls are rounded half up to whole calls, at least 1
    where any rank ran the node). For the times of
    :data:`~torchprof._vocab.RANK_METRICS` the rows also get the smallest and largest value over
    the ranks, the rank that has the largest (none where every rank has 0) and the spread.
    Steps are averaged per step number; peaks (per row and per run) are the largest of any rank,
    and memory over time is the highest-peaking rank's. Text, types, parameter counts and the
    execution order come from the first rank that has the node. Cost: O(rows) per rank for each
    numeric column, plus O(nodes) per rank for the ranges.
    """
    count = len(trees)
    union = unite(trees, fold_steps=False)
    n = len(union)
    columns: dict[str, list[Any]] = {}
    figures = [c for c in COLUMNS if c.numeric and c.name not in _FIRST and c.name not in RANK_COLUMNS and c.name != "depth"]
    for spec in figures:
        # Recorded where any row has it: a run's total can be unknown (NaN) while its layers are known.
        recorded = [any(not is_missing(v) for v in t.columns[spec.name]) for t in trees]
        if not any(recorded):
            columns[spec.name] = [NAN] * n
            continue
        if spec.name in LARGEST:
            columns[spec.name] = _largest_per_node(union, trees, spec.name)
            continue
        total = [0.0] * n
        seen = [False] * n
        for source, tree in enumerate(trees):
            values = tree.columns[spec.name]
            node_of = union.node_of[source]
            # v == v: not NaN (inline: this loop runs once per column, rank and row)
            for u in compress(node_of, [v is not None and v == v for v in values]):
                seen[u] = True
            for u, v in enumerate(summed(union, source, values, spec.rollup == "total")):
                if v:
                    total[u] += v
        mean = [t / count if s else NAN for t, s in zip(total, seen)]
        if spec.name == "calls":
            # Whole calls, half up, and at least one where any rank ran the node.
            mean = [max(1, math.floor(v + 0.5)) if s and t > 0 else 0 for v, s, t in zip(mean, seen, total)]
        columns[spec.name] = mean
    columns.update(_ranges(union, trees, ranks))
    order, depth = preorder(union.parent, columns["cpu_us"])
    out = {name: [values[u] for u in order] for name, values in columns.items()}
    for name in _FIRST - _STRUCTURE:
        out[name] = [trees[union.first[u][0]].columns[name][union.first[u][1]] for u in order]
    out["name"] = [union.name[u] for u in order]
    out["kind"] = [union.kind[u] for u in order]
    out["depth"] = [depth[u] for u in order]
    out["name"][0] = label
    row_of = {u: row for row, u in enumerate(order)}
    parent_index = [row_of[union.parent[u]] if union.parent[u] >= 0 else -1 for u in order]
    by_rank = [row for tree, rank, wall in zip(trees, ranks, walls) for row in rank_rows(tree, rank, wall)]
    stored = {c.name: out[c.name] for c in COLUMNS if c.name not in Columns.LAZY}
    return Tree(
        columns=Columns(stored, union.paths(order, label), parent_index, [c.name for c in COLUMNS]),
        parent_index=parent_index,
        unsupported_ops=_summed_dicts(t.unsupported_ops for t in trees),
        steps=_mean_steps(trees),
        peak_cpu_mem=_largest(t.peak_cpu_mem for t in trees),
        peak_cuda_mem=_largest(t.peak_cuda_mem for t in trees),
        has_cuda=any(t.has_cuda for t in trees),
        has_memory=any(t.has_memory for t in trees),
        has_flops=any(t.has_flops for t in trees),
        event_count=sum(t.event_count for t in trees),
        gpu_busy_us=_mean(t.gpu_busy_us for t in trees),
        gpu_window_us=_mean(t.gpu_window_us for t in trees),
        comm_us=_mean(t.comm_us for t in trees),
        gpu_time_us={key: _mean(t.gpu_time_us.get(key, NAN) for t in trees)
                     for key in dict.fromkeys(k for t in trees for k in t.gpu_time_us)},
        memory=_highest_memory(union, trees, ranks, row_of),
        ranks=list(ranks),
        by_rank=by_rank,
    )


def _largest_per_node(union: Union, trees: Sequence[Tree], name: str) -> list[float]:
    """A high-water mark per node: the largest of any rank's rows of it (NaN where none has one)."""
    out = [NAN] * len(union)
    for source, tree in enumerate(trees):
        for u, v in zip(union.node_of[source], tree.columns[name]):
            if not is_missing(v) and not v <= out[u]:
                out[u] = v
    return out


def _highest_memory(union: Union, trees: Sequence[Tree], ranks: Sequence[Any], row_of: dict[int, int]) -> dict[str, Any]:
    """Memory over time of the rank that peaked highest (on any device), its rows moved to the
    merged tree's and its rank named (``memory["rank"]``): one rank's line, not a mean of lines
    that rose and fell at different moments."""
    best, top = -1, float("-inf")
    for source, tree in enumerate(trees):
        for peak in tree.memory.get("devices", {}).values():
            if peak["peak"] > top:
                best, top = source, peak["peak"]
    if best < 0:
        return {}
    node_of = union.node_of[best]

    def moved(row: Any) -> Any:
        return None if row is None else row_of[node_of[row]]

    memory = trees[best].memory
    devices = {name: {**peak, "row": moved(peak["row"]), "layer_row": moved(peak.get("layer_row"))}
               for name, peak in memory.get("devices", {}).items()}  # fmt: skip
    timeline = {name: {**line, "row": [moved(r) for r in line["row"]]} for name, line in memory.get("timeline", {}).items()}
    return {**memory, "devices": devices, "timeline": timeline, "rank": ranks[best]}


def _ranges(union: Union, trees: Sequence[Tree], ranks: Sequence[Any]) -> dict[str, list[Any]]:
    """``<col>_min``, ``<col>_max``, ``<col>_max_rank`` and ``<col>_spread`` per node, from each
    rank's value (0 where it lacks the node); NaN where no rank recorded the figure."""
    n = len(union)
    out: dict[str, list[Any]] = {}
    for name in RANK_METRICS:
        if not any(len(t) and not is_missing(t.columns[name][0]) for t in trees):
            for suffix in ("min", "max", "max_rank"):
                out[f"{name}_{suffix}"] = [NAN] * n
            continue
        low = [float("inf")] * n
        high = [float("-inf")] * n
        slowest: list[Any] = [NAN] * n
        total = COLUMN[name].rollup == "total"
        for source, (tree, rank) in enumerate(zip(trees, ranks)):
            values = summed(union, source, tree.columns[name], total)
            for u, v in enumerate(values):
                if v < low[u]:
                    low[u] = v
                if v > high[u]:
                    high[u] = v
                    slowest[u] = rank
        out[f"{name}_min"] = low
        out[f"{name}_max"] = high
        # Where every rank has 0 no rank is slower than another.
        out[f"{name}_max_rank"] = [r if h > 0 else NAN for r, h in zip(slowest, high)]
    for name in RANK_SPREAD_METRICS:
        out[f"{name}_spread"] = [h - lo for h, lo in zip(out[f"{name}_max"], out[f"{name}_min"])]
    return out


def _mean(values: Any) -> float:
    got = [v for v in values if not is_missing(v)]
    return sum(got) / len(got) if got else NAN


def _largest(values: Any) -> float:
    got = [v for v in values if not is_missing(v)]
    return max(got) if got else NAN


def _summed_dicts(dicts: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def _mean_steps(trees: Sequence[Tree]) -> list[StepTotals]:
    """Each step number's figures, the mean over the ranks that recorded that step."""
    by_step: dict[int | str, list[StepTotals]] = {}
    for tree in trees:
        for s in tree.steps:
            by_step.setdefault(s["step"], []).append(s)
    out = []
    for step, records in by_step.items():
        keys = [k for k in records[0] if k != "step"]
        # The first rank's figures, each the mean over the ranks: the keys of a StepTotals.
        out.append(cast(StepTotals, {"step": step, **{k: _mean(r.get(k, NAN) for r in records) for k in keys}}))
    return out
