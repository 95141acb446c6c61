"""What the tree builder gathers, apart from the passes that gather it: the state that
:class:`~torchprof._tree.builder.TreeBuilder` fills and that the passes after placement read
(:mod:`~torchprof._tree.comm` and :mod:`~torchprof._tree.moves` move communication onto its
layers, :mod:`~torchprof._tree.finish` makes the finished tree). Those import this module, and
the builder imports them: the imports run one way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

from .._records import CompiledGraph, KnownTensor, ModuleInfo
from .._vocab import EventKind
from .compiled import CompiledRegions
from .device_time import WORKS
from .flops import FlopCount
from .memory import MemoryLedger
from .nodes import Nodes

if TYPE_CHECKING:
    from .devices import Peak

REGION = int(EventKind.REGION)


class _PlacedStep(TypedDict):
    step: int | str
    """``N``: a number, or the text after ``ProfilerStep#`` where that is not one."""
    start_ns: int
    wall_us: float
    node: int
    """The step's node."""


class StepSpan(_PlacedStep, total=False):
    """One ``ProfilerStep#N`` range as the builder placed it (what ``Tree.steps`` is made from),
    with what the cycle's activity pass adds."""

    gpu_busy_ns: int
    """The union of device intervals inside the step (:func:`~torchprof._tree.activity.cycle_activity`)."""
    comm_ns: int
    """The union of communication intervals inside the step (likewise)."""


@dataclass
class CommState:
    """What the pass needs besides the events, and what it leaves for the finished tree."""

    ddp: list[dict[str, Any]] = field(default_factory=list)
    """Each DDP module's gradient buckets (:func:`~torchprof._capture.distributed.ddp_buckets`)."""
    exposed: dict[int, int] = field(default_factory=dict)
    """Per node: ns of its outermost communication ranges during which no model op ran."""
    unsplit: int = 0
    """DDP all-reduces whose bucket could not be told (they stay where torch recorded them)."""


class BuildState:
    """Everything a :class:`~torchprof._tree.builder.TreeBuilder` gathers, fold after fold."""

    def __init__(
        self,
        label: str = "profile",
        modules: dict[str, ModuleInfo] | None = None,
        flops: bool = True,
        shapes: bool = True,
        memory: bool = False,
        cuda: bool = False,
        compiled: dict[str, CompiledGraph] | None = None,
    ) -> None:
        self.nodes = Nodes()
        self.root: int = self.nodes.add(-1, REGION, label, None, False, "")
        self.modules = modules if modules is not None else {}
        self.want_flops = flops
        self.want_shapes = shapes
        self.memory = memory
        self.cuda = cuda
        self.steps: list[StepSpan] = []
        """The ``ProfilerStep#N`` ranges placed so far, in the order met."""
        self.peak = [0, 0]  # running peak of bytes allocated during the run, per (cpu, cuda)
        # Kept bytes, peaks, the timeline and what the peak is made of (see torchprof._tree.memory).
        self.ledger = MemoryLedger(self.nodes)
        self.tensors: list[KnownTensor] = []  # parameters, gradients, optimizer state the capture saw
        self.event_count = 0
        self.device_busy_ns = 0  # union of device intervals, summed over cycles
        self.device_window_ns = 0  # first device start to last device end, summed over cycles
        # Device time by what it did (see TreeBuilder._add_device_time): per node that holds device work, its
        # [compute, comm, memcpy, comm overlapped by compute, idle it ended] ns; for the run, the
        # union of each kind's intervals and the comm/compute overlap, summed over cycles.
        self.device_split: dict[int, list[int]] = {}
        self.device_union_ns = [0] * (WORKS + 1)
        self.comm_ns = 0  # time collective communication was in flight, summed over cycles
        # Device work outside the profiled window, which no figure counts: [activities wholly
        # outside, activities partly outside, ns outside].
        self.outside_window = [0, 0, 0]
        self.host_outside_window = [0, 0, 0]  # the same for host ranges (TreeBuilder._clip_host_ranges)
        self.device_ranges = 0  # CUPTI range-profiler ranges read (see TreeBuilder._add_device_ranges)
        # Ranges that outlived their parent, per node: [ranges, ns past the parent's end] (that
        # time is in no total: see nesting.nest).
        self.overrun: dict[int, list[int]] = {}
        # DDP's buckets (set by the source before its cycles are added) and host comm's exposed time.
        self.comm = CommState()
        # Per distinct event name: (node key, module path or None, module type, starts backward,
        # compiled role, has a FLOP formula).
        self._name_info: dict[str, tuple[str, str | None, str | None, bool, int, bool]] = {}
        # The latest forward node of each module path, and the module node each "(recompute)"
        # node belongs to: a module that runs again inside backward is a recomputation.
        self._forward_node: dict[str, int] = {}
        self._recompute_of: dict[int, int] = {}
        # (node a module ran in, its key) -> the node its row goes under (see TreeBuilder._module_parent).
        self._module_parents: dict[tuple[int, str], int] = {}
        #: (module node, module path) -> the nearest module at or above that node whose path holds
        #: the path (-1: none), so nested calls of one path walk up O(1) each, not O(depth).
        self._owners: dict[tuple[int, str], int] = {}
        # Compiled regions: which graph ran, and the FLOPs and ops of unknown cost inside them.
        self.compiled = CompiledRegions(compiled if compiled is not None else {}, self.modules)
        # The FLOP count (the ops placed, compiled kernels), which the finished tree's columns read.
        self.flop_count = FlopCount(graphs=self.compiled.graphs, modules=self.modules)
        self.compilation_nodes: set[int] = set()  # "(compilation)" rows: compile time, no ops
        # Per thread (the source's thread id): [CPU ns of its outermost ranges, of them compiling];
        # and the time any thread ran a range (their union, summed over cycles).
        self.threads: dict[Any, list[int]] = {}
        self.cpu_union_ns = 0
        self.peak_flops: Peak | None = None  # what the mfu column is measured against (set by whoever builds)
