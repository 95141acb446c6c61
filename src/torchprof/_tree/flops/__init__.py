"""The FLOP path: MACs and FLOPs per row, counted from the ops the profiler recorded.

- :mod:`.count`: the entry point, :class:`~torchprof._tree.flops.count.FlopCount` (recorded op
  events in, FLOPs per row out; what is unknown, and where);
- :mod:`.formulas`: each op's cost from its recorded shapes and arguments;
- :mod:`.kinds`: which ops cost nothing, by truth or by convention, and which no formula can count;
- :mod:`.compiled`: the kernels of compiled graphs, counted as eager counts the ops they came from.

docs/flops.md states the conventions for users.
"""

from .count import FlopCount
from .formulas import FORMULAS
from .kinds import is_free

__all__ = ["FORMULAS", "FlopCount", "is_free"]
