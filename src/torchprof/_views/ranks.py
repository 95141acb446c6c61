"""pandas view of a distributed job's ranks: ``prof.by_rank()``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._tree.ranks import rank_rows
from .._tree.tree import Tree
from .._vocab import BY_RANK_COLUMNS

if TYPE_CHECKING:
    import pandas as pd


def by_rank(tree: Tree, rank: Any, wall_us: float | None) -> pd.DataFrame:
    """One row per rank and step (:data:`~torchprof._vocab.BY_RANK_COLUMNS`): the merged ranks'
    rows, or this one source's (``rank`` None where it did not record one)."""
    import pandas as pd

    rows = tree.by_rank or rank_rows(tree, rank, wall_us)
    return pd.DataFrame(rows, columns=list(BY_RANK_COLUMNS))
