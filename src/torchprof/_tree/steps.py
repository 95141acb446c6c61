"""What each step's time went to: data loading, forward, backward, optimizer, communication and the
rest, the device's idle time, and which steps were slow.

A step is a ``ProfilerStep#N`` row (a ``schedule=`` run's iteration); the whole run is split the
same way (:func:`split_row` of the root). A row's CPU time is split without overlap, so the
parts add up to its ``cpu_us``:

- ``forward_us``, ``backward_us``: its ``fwd_cpu_us`` and ``bwd_cpu_us`` (module forwards, and the
  backward work placed on layers);
- of the rest (``other_cpu_us``: outside every module's forward and backward), the time in
  data-loading ranges (``data_us``: names holding ``DataLoader``/``dataloader``, such as torch's
  ``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__``), in ``Optimizer.`` regions
  (``optimizer_us``: ``step`` and ``zero_grad``) and in collective ranges (``comm_us``:
  :data:`~torchprof._vocab.COMM_RANGE_PREFIXES`), each counted at the outermost such row;
- ``other_us``: what remains (a loss outside modules, Python between ops, waiting).

``idle_us`` is the device's idle time in the step (its wall time minus the time any device stream
was busy), NaN without a device. A step is ``slow`` when its wall time is more than
:data:`SLOW_FACTOR` times the median step's (with at least :data:`MIN_STEPS` steps).
"""

from __future__ import annotations

from statistics import median
from typing import Any, TypedDict

from .._vocab import COMM_RANGE_PREFIXES, OPTIMIZER_PREFIX, STEP_PARTS, STEP_PREFIX, NodeKind, is_missing
from .aggregate import step_rows
from .tree import Tree

#: A step slower than this many times the median step is marked slow.
SLOW_FACTOR = 1.25
#: Fewer steps than this mark none slow (a median of two says little).
MIN_STEPS = 3
#: The parts of a row's CPU time, in the order views stack them (they add up to ``cpu_us``).
PARTS = STEP_PARTS

_MODULE = NodeKind.MODULE.label


class StepSplit(TypedDict):
    """One step of :func:`step_splits`: its number and wall time, its CPU time split into
    :data:`PARTS` (they add up to its ``cpu_us``), the device's idle time in it and whether it was
    slow."""

    step: Any
    """The step number (``ProfilerStep#N``'s N; the name's tail where the step was not recorded)."""
    wall_us: float
    data_us: float
    forward_us: float
    backward_us: float
    optimizer_us: float
    comm_us: float
    other_us: float
    idle_us: float
    slow: bool


class StepSpread(TypedDict, total=False):
    """How much the steps' wall times vary (``prof.summary['step_spread']``); empty without steps."""

    median_us: float
    min_us: float
    max_us: float
    spread: float
    """``(max - min) / median``."""
    slow: list[Any]
    """The slow steps' numbers."""


def is_data_loading(name: str) -> bool:
    """A range that loads data: torch's ``enumerate(DataLoader)#...__next__``, Lightning's
    ``..._dataloader_next``, any name holding ``dataloader`` (any case)."""
    return "dataloader" in name.lower()


def _kind_of(name: str) -> str | None:
    if is_data_loading(name):
        return "data_us"
    if name.startswith(OPTIMIZER_PREFIX):
        return "optimizer_us"
    if name.startswith(COMM_RANGE_PREFIXES):
        return "comm_us"
    return None


def split_row(tree: Tree, row: int) -> dict[str, float]:
    """The parts of ``row``'s CPU time (:data:`PARTS`, see the module's docstring). O(subtree)."""
    cols = tree.columns
    kinds, names, depth, other = cols["kind"], cols["name"], cols["depth"], cols["other_cpu_us"]
    n = len(tree)
    out = dict.fromkeys(PARTS, 0.0)
    out["forward_us"] = _num(cols["fwd_cpu_us"][row])
    out["backward_us"] = _num(cols["bwd_cpu_us"][row])
    # Outermost data, optimizer and communication rows outside modules: their "other" time.
    skip_below = -1  # rows deeper than this are inside a counted row or a module: skipped
    end = row + 1
    while end < n and depth[end] > depth[row]:
        end += 1
    part_of: dict[str, str | None] = {}  # per distinct name: names repeat across steps and calls
    for i in range(row + 1, end):
        if skip_below >= 0 and depth[i] > skip_below:
            continue
        skip_below = -1
        if kinds[i] == _MODULE:
            skip_below = depth[i]  # a module's rows are its forward and backward
            continue
        name = names[i]
        part = part_of[name] if name in part_of else part_of.setdefault(name, _kind_of(name))
        if part is not None:
            out[part] += _num(other[i])
            skip_below = depth[i]
    rest = _num(other[row]) - out["data_us"] - out["optimizer_us"] - out["comm_us"]
    out["other_us"] = max(0.0, rest)
    return out


def _num(v: Any) -> float:
    return 0.0 if v is None or v != v else float(v)


def step_splits(tree: Tree) -> list[StepSplit]:
    """Per recorded step, in the order they ran: ``step``, ``wall_us``, the :data:`PARTS`,
    ``idle_us`` and ``slow``. Empty without steps."""
    rows = step_rows(tree)
    names = tree.columns["name"]
    by_number = {str(s["step"]): s for s in tree.steps}
    out: list[StepSplit] = []
    for row in rows:
        number = names[row][len(STEP_PREFIX) :]
        recorded = by_number.get(number, {})
        wall = recorded.get("wall_us", float("nan"))
        busy = recorded.get("gpu_busy_us", float("nan"))
        idle = wall - busy if tree.has_cuda and not is_missing(busy) and not is_missing(wall) else float("nan")
        parts = split_row(tree, row)
        out.append(StepSplit(step=recorded.get("step", number), wall_us=wall, data_us=parts["data_us"], forward_us=parts["forward_us"],
                             backward_us=parts["backward_us"], optimizer_us=parts["optimizer_us"], comm_us=parts["comm_us"],
                             other_us=parts["other_us"], idle_us=max(0.0, idle) if not is_missing(idle) else idle, slow=False))  # fmt: skip
    _mark_slow(out)
    return out


def _mark_slow(steps: list[StepSplit] | list[dict[str, Any]]) -> None:
    """Set each step's ``slow``: its wall time over :data:`SLOW_FACTOR` times the median's, with
    at least :data:`MIN_STEPS` timed steps."""
    walls = [s["wall_us"] for s in steps if not is_missing(s["wall_us"])]
    if len(walls) >= MIN_STEPS:
        typical = median(walls)
        for s in steps:
            s["slow"] = not is_missing(s["wall_us"]) and s["wall_us"] > SLOW_FACTOR * typical


def marked_steps(step_times: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """The steps a run without a schedule marked (``prof.step()``: recorded, but one tree, no
    ``ProfilerStep`` rows), from ``Recording.step_times``: ``step``, ``wall_us`` and ``slow``, as
    :func:`step_splits` gives them for step rows, so the two count steps one way. Empty in a
    merged job (each rank marked its own)."""
    if not step_times or "rank" in step_times:
        return []
    out = [{"step": step, "wall_us": float(wall), "slow": False}
           for step, wall, recorded in zip(step_times["step"], step_times["wall_us"], step_times["recorded"]) if recorded]  # fmt: skip
    _mark_slow(out)
    return out


def spread(splits: list[StepSplit] | list[dict[str, Any]]) -> StepSpread:
    """How much the steps' wall times vary: ``median_us``, ``min_us``, ``max_us``, ``spread``
    ((max - min) / median) and ``slow`` (the slow steps' numbers); empty without steps."""
    walls = [s["wall_us"] for s in splits if not is_missing(s["wall_us"])]
    if not walls:
        return {}
    mid = median(walls)
    return {"median_us": mid, "min_us": min(walls), "max_us": max(walls),
            "spread": (max(walls) - min(walls)) / mid if mid else float("nan"),
            "slow": [s["step"] for s in splits if s["slow"]]}  # fmt: skip
