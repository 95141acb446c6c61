"""Plain records: what capture and trace loading hand to the tree builder.

Both sources (a live ``torch.profiler`` run and a chrome-trace file) are reduced to the same
column-wise :class:`EventColumns`, so the tree never knows where its events came from and a trace
exported by torchprof and read back yields the same profile.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._vocab import MODULE_PREFIX, STEP_TIME_COLUMNS


def is_user_frame(name: str) -> bool:
    """A Python frame in the user's code, not in torch or another installed package."""
    return not (
        name.startswith(("torch/", "torchprof/", "<", MODULE_PREFIX, "threading.py", "runpy.py"))
        or "site-packages/" in name
        or "/torch/" in name
        or "/torchprof/" in name
        or "/lib/python3" in name
    )


_UNWRITABLE = re.compile("[\x00\ud800-\udfff]")


def safe_text(text: str) -> str:
    """``text`` with what cannot reach torch's profiler or a JSON file as it is (a NUL, which ends a
    C string; a lone surrogate, which is not UTF-8) written as a visible escape (``\\x00``,
    ``\\ud800``). A module named so would otherwise break the user's forward or show a cut name."""
    if not _UNWRITABLE.search(text):
        return text
    return _UNWRITABLE.sub(lambda m: "\\x00" if m.group() == "\x00" else f"\\u{ord(m.group()):04x}", text)


def module_range_name(path: str, type_name: str) -> str:
    """The record_function name torchprof uses for one module call."""
    return f"{MODULE_PREFIX}{path} [{type_name}]"


def parse_module_range(name: str) -> tuple[str, str] | None:
    """``(path, type)`` of a torchprof module range, or None for any other name.

    torch's own python tracer emits ``nn.Module: Conv2d_0`` (no ``[Type]``); those are handled by
    the trace loader, which only uses them when a trace has no torchprof ranges.
    """
    if not name.startswith(MODULE_PREFIX) or not name.endswith("]"):
        return None
    start = len(MODULE_PREFIX)
    cut = name.rfind(" [", start, len(name) - 1)
    if cut <= start:
        return None
    return name[start:cut], name[cut + 2 : -1]  # one copy of the path, however deep it is


@dataclass
class ModuleInfo:
    """What the hooks learnt about one module path (not in the trace events themselves)."""

    type: str
    params: int
    """Parameters of the module and its children, each tensor counted once."""
    param_bytes: int
    root: bool | None = None
    """The module was called with no running module that contains it (a root of the profile);
    None when the source did not say (traces from older torchprof)."""
    replica: bool = False
    """A copy made by ``nn.DataParallel`` for another device: its parameters are the original's."""
    input_shapes: list | None = None
    """Sizes of the arguments of the path's first call (with shapes recorded), for module ranges
    that carry none: torch records a range's inputs only on the thread that started it, not in
    its every-thread mode."""
    transformed: bool = False
    """A root called inside a ``torch.func`` transform (``vmap``, ``grad``): torch records its
    ops once per example, with the example's sizes, not the batch's."""

    def to_json(self) -> list[Any]:
        """``[type, params, param_bytes, root, replica]``: how traces and saved profiles store it."""
        return [self.type, self.params, self.param_bytes, self.root, self.replica]

    @classmethod
    def from_json(cls, value: Any) -> ModuleInfo:
        """What :meth:`to_json` wrote (the first three fields alone from older files); raises
        ``TypeError``/``ValueError``/``IndexError`` on anything else."""
        root = value[3] if len(value) > 3 else None
        return cls(type=str(value[0]), params=int(value[1]), param_bytes=int(value[2]),
                   root=None if root is None else bool(root), replica=bool(value[4]) if len(value) > 4 else False)  # fmt: skip


@dataclass
class CompiledNode:
    """One node of a compiled graph after Inductor's post-grad passes: an aten op on known shapes."""

    op: str
    """The profiler's spelling of the op (``aten::addmm``)."""
    shapes: list[Any]
    """Per argument, as ``EventColumns.inputs`` gives them: a tensor's sizes, a list of sizes, ``[]``."""
    concrete: list[Any]
    """Per argument, its value when it is not a tensor (strides, flags), else None."""
    modules: list[tuple[str, str]]
    """``nn_module_stack`` outermost first: ``(Dynamo's name for the module, class name)``, e.g.
    ``("L['self'].block1.conv", "Conv2d")``; empty for nodes no module produced."""
    source: str = ""
    """The op the node was decomposed from (``aten::_native_batch_norm_legit_functional``), or
    the node's own op; with ``seq`` it names one op call of the eager program."""
    seq: int = -1
    """The autograd sequence number of that op call (a backward node carries its forward op's)."""
    bwd: bool | None = None
    """The node is backward work (AOTAutograd's partitioner tag), wherever Inductor runs it: the
    gradient ``mm`` of a forward ``mm`` is an eager op call of its own, a forward node recomputed
    in the backward graph is not. None in maps written before torchprof recorded it."""
    origin: str = ""
    """The node of Dynamo's graph (one call of the eager program) the node came from, by FX's
    provenance (``from_node``): what says which nodes are one call where no sequence number does
    (no autograd: inference). Empty where unknown."""


@dataclass
class CompiledKernel:
    """One kernel of a compiled graph, as the profiler records its run."""

    name: str
    """The event name: ``cpp_fused_relu_0`` (CPU; the event adds a ``graph_<n>_`` prefix),
    ``triton_poi_fused_relu_0`` (GPU) or the aten op of an extern kernel (``aten::addmm``)."""
    extern: bool
    """An aten op Inductor calls as is (matmul, convolution): matched to events in call order."""
    nodes: list[str]
    """The graph nodes it computes (for an extern kernel, the node that is the op itself)."""


@dataclass
class CompiledGraph:
    """What Inductor says about one compiled graph (the forward or the backward of a frame)."""

    compile_id: str
    """Dynamo's compile id as in ``Torch-Compiled Region: <id>`` (``0/0``)."""
    backward: bool
    nodes: dict[str, CompiledNode] = field(default_factory=dict)
    kernels: list[CompiledKernel] = field(default_factory=list)

    @property
    def key(self) -> str:
        return graph_key(self.compile_id, self.backward)

    def to_json(self) -> dict[str, Any]:
        return {"compile_id": self.compile_id, "backward": self.backward,
                "nodes": {k: [n.op, n.shapes, n.concrete, [list(m) for m in n.modules], n.source, n.seq, n.bwd, n.origin]
                          for k, n in self.nodes.items()},
                "kernels": [[k.name, k.extern, k.nodes] for k in self.kernels]}  # fmt: skip

    @classmethod
    def from_json(cls, value: Any) -> CompiledGraph:
        """What :meth:`to_json` wrote; raises ``TypeError``/``ValueError``/``KeyError`` otherwise."""
        nodes = {str(k): CompiledNode(str(n[0]), list(n[1]), list(n[2]), [(str(a), str(b)) for a, b in n[3]],
                                      str(n[4]) if len(n) > 4 else "", int(n[5]) if len(n) > 5 else -1,
                                      None if len(n) <= 6 or n[6] is None else bool(n[6]), str(n[7]) if len(n) > 7 else "")
                 for k, n in dict(value["nodes"]).items()}  # fmt: skip
        kernels = [CompiledKernel(str(k[0]), bool(k[1]), [str(x) for x in k[2]]) for k in value["kernels"]]
        return cls(str(value["compile_id"]), bool(value["backward"]), nodes, kernels)


def graph_key(compile_id: str, backward: bool) -> str:
    """How compiled graphs are looked up: ``0/0 forward``, ``0/0 backward``."""
    return f"{compile_id} {'backward' if backward else 'forward'}"


@dataclass
class EventColumns:
    """One profiling cycle's events, column-wise: index ``i`` is one event in every list.

    Times are integer nanoseconds on the profiler's clock. ``tid`` groups CPU events by thread;
    for device events it is the stream. ``link`` joins device and runtime events to the operator
    that was innermost when they were issued (kineto's linked correlation / "External id");
    ``corr`` joins a device event to its runtime call (the CUPTI correlation id).
    """

    name: list[str] = field(default_factory=list)
    kind: list[int] = field(default_factory=list)
    tid: list[Any] = field(default_factory=list)
    start: list[int] = field(default_factory=list)
    end: list[int] = field(default_factory=list)
    seq: list[int] | None = field(default_factory=list)
    """Autograd sequence number, -1 when none. None when only ``seq_of`` can tell (lazily)."""
    seq_of: Callable[[int], int] | None = None
    fwd_tid: list[int] = field(default_factory=list)
    """0 for forward ops; for backward ops the (profiler) id of the thread that ran forward."""
    fwd_tid_of: Callable[[int], int] | None = None
    """Lazily, for a backward op whose ``fwd_tid`` is 0: the thread that ran its forward op, as one
    of this source's ``tid`` values (the live capture, where only a slow lookup tells)."""
    ext_id: list[int] = field(default_factory=list)
    """The event's own correlation id (CPU ops) - what ``link`` of device events points at."""
    link: list[int] = field(default_factory=list)
    corr: list[int] = field(default_factory=list)
    nbytes: list[int] = field(default_factory=list)
    """Memory events: bytes allocated (positive) or freed (negative)."""
    on_cuda: list[bool] = field(default_factory=list)
    """Memory events: True for device memory, False for host memory."""
    mem_total: list[int] = field(default_factory=list)
    """Memory events: bytes allocated on that device right after the event (for the peak)."""
    mem_addr: list[int] = field(default_factory=list)
    """Memory events: the block's address, which pairs a free with its allocation (0: unknown).
    Empty when the source records none; may be shorter than the events (indices past it: 0)."""
    mem_device: list[int] = field(default_factory=list)
    """Memory events: the device index, -1 for host memory (empty: device 0 for device memory)."""
    parent: list[int] | None = None
    """Index of each event's enclosing range, when the source already knows the nesting. Then
    the events are in pre-order with roots by start time and need no sorting."""
    span: tuple[int, int] | None = None
    """The profiled window ``(start, end)`` in ns where the source records one (kineto's span
    event in a trace file): device work outside it is not counted in the GPU busy time."""
    frame: list[str | None] | None = None
    """With Python stacks recorded: the innermost user-code frame (``file.py(12): fn``) each
    event ran under; None without stacks."""
    inputs: Callable[[int], tuple[list, list] | None] = lambda i: None
    """``(shapes, concrete values)`` of event ``i``'s arguments, read lazily (it is the slow part):
    a tensor gives its sizes and ``None``, anything else ``[]`` and its value."""
    full_concrete: Callable[[int], list | None] | None = None
    """Slow but complete concrete values of event ``i`` (int lists included), for the rare op
    whose FLOPs need them and whose module does not say (a functional convolution)."""

    def __len__(self) -> int:
        return len(self.name)


@dataclass(frozen=True)
class KnownTensor:
    """A tensor whose role the allocation events cannot tell, seen by the capture at one moment:
    a parameter, a parameter's gradient or an optimizer state tensor."""

    category: str
    """``parameter``, ``gradient`` or ``optimizer_state`` (:data:`~torchprof._vocab.MEMORY_CATEGORIES`)."""
    device: int
    """-1 for host memory, else the device index (as ``EventColumns.mem_device``)."""
    addr: int
    """The address of its storage: the address of the allocation that holds it."""
    nbytes: int
    seen_ns: int | None
    """When it was seen, on the profiler's clock (an optimizer step's end); None: when the
    profiler stopped."""
    module: str | None = None
    """The module path owning the parameter it belongs to, where known."""


@dataclass
class Recording:
    """Everything one source (a live run, a trace file) tells besides the tree's events."""

    cycles: list[EventColumns] = field(default_factory=list)
    """Events not yet folded into a tree (a trace file's one cycle); emptied once folded."""
    modules: dict[str, ModuleInfo] = field(default_factory=dict)
    """Keyed by module path as it appears in the module range names."""
    wall_us: float | None = None
    """Wall time of the profiled block (the trace span when loading a file)."""
    label: str = "profile"
    meta: dict[str, Any] = field(default_factory=dict)
    """Facts about the source (device names, distributed rank, file name, options recorded)."""
    compiled: dict[str, CompiledGraph] = field(default_factory=dict)
    """Compiled graphs by :func:`graph_key`: which layer each of their kernels computes."""
    tensors: list[KnownTensor] = field(default_factory=list)
    """Parameters, gradients and optimizer state the capture saw (for ``memory_breakdown``)."""
    step_times: dict[str, list[Any]] = field(default_factory=dict)
    """Every step the run marked, recorded or not, column-wise by
    :data:`~torchprof._vocab.STEP_TIME_COLUMNS` (``rank`` only in a merged job); empty when no
    step was marked."""


def checked_step_times(value: Any) -> dict[str, list[Any]]:
    """Saved or exported ``Recording.step_times``: an object of equally long lists, integer
    steps and ranks, times in µs, true/false flags; ValueError naming what is wrong."""
    if not isinstance(value, dict) or not set(value) <= set(STEP_TIME_COLUMNS):
        raise ValueError(f"step times must be an object of the columns {list(STEP_TIME_COLUMNS)}")
    if not value:
        return {}
    lengths = {len(v) if isinstance(v, list) else -1 for v in value.values()}
    if len(lengths) != 1 or -1 in lengths or not {"step", "wall_us", "recorded"} <= set(value):
        raise ValueError("step times need step, wall_us and recorded lists of one length")
    kinds = {"rank": (int,), "step": (int,), "wall_us": (int, float), "recorded": (bool,)}
    for name, values in value.items():
        if not all(type(v) in kinds[name] for v in values):
            raise ValueError(f"step times: {name!r} holds a value that is not {kinds[name][0].__name__}")
    return {name: list(values) for name, values in value.items()}
