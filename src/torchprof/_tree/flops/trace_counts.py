"""FLOP counts carried by an exported chrome trace.

A profile whose ops carry no shapes (one an older torchprof counted by replaying its modules)
cannot be counted from its trace's events again: ``export_chrome_trace`` writes each row's MACs and FLOPs
into torchprof's block (:func:`counts_block`), and ``load_trace`` puts them back on the rows of
the same paths (:func:`apply_counts`). The events are the same, so the trees are the same row for
row; a row the block does not name keeps what the trace's own shapes gave it (NaN without them).
"""

from __future__ import annotations

from typing import Any

from ..._vocab import is_missing
from ..tree import Tree


def counts_block(tree: Tree) -> dict[str, Any] | None:
    """``{"paths", "macs", "flops", "unsupported_ops"}`` of the rows with counted FLOPs; None for a
    tree without FLOPs."""
    if not tree.has_flops:
        return None
    cols = tree.columns
    rows = [i for i, f in enumerate(cols["flops"]) if not is_missing(f)]
    return {
        "paths": [cols["path"][i] for i in rows],
        "macs": [None if is_missing(cols["macs"][i]) else cols["macs"][i] for i in rows],
        "flops": [cols["flops"][i] for i in rows],
        "unsupported_ops": dict(tree.unsupported_ops),
    }


def apply_counts(tree: Tree, block: dict[str, Any]) -> int:
    """Put a :func:`counts_block` back on ``tree`` (rows matched by path) where the tree has no
    FLOPs of its own; returns how many rows got counts. Rows the block does not name stay NaN."""
    if tree.has_flops:
        return 0
    cols = tree.columns
    row_of = {p: i for i, p in enumerate(cols["path"])}
    nan = float("nan")
    macs = [nan] * len(tree)
    flops = [nan] * len(tree)
    done = 0
    for path, m, f in zip(block.get("paths", []), block.get("macs", []), block.get("flops", [])):
        row = row_of.get(path)
        if row is None or not isinstance(f, (int, float)):
            continue
        flops[row] = float(f)
        macs[row] = float(m) if isinstance(m, (int, float)) else nan
        done += 1
    if not done:
        return 0
    cols["macs"], cols["flops"] = macs, flops
    tree.has_flops = True
    tree.unsupported_ops = {str(k): int(v) for k, v in dict(block.get("unsupported_ops", {})).items()}
    return done
