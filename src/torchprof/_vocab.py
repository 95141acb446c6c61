"""torchprof's vocabulary, written down once: node and event kinds, the event names it reads, the
column registry and the view-state keys.

Every other module (the tree, every view, docs/columns.md) and, through the payload, the
front end read these definitions; nothing spells a column list, a kind code or a state key again.
This module imports nothing of torchprof.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import IntEnum
from typing import Any, Literal


# -- kinds ------------------------------------------------------------------------------------------
class NodeKind(IntEnum):
    """What a row of the tree is. The integer is the code the payload sends to the front end."""

    MODULE = 0  #: an ``nn.Module`` call (a layer)
    REGION = 1  #: a ``record_function`` range: a user region, ``Optimizer.step#...``, ``ProfilerStep#3``
    OP = 2  #: an aten operator, an autograd node or a runtime call on the CPU
    KERNEL = 3  #: work on the device: a kernel, a memcpy, a memset

    @property
    def label(self) -> str:
        """The name in ``df.kind`` (``"module"``, ``"region"``, ``"op"``, ``"kernel"``)."""
        return self.name.lower()


#: ``df.kind`` values by code.
NODE_KIND_LABELS: tuple[str, ...] = tuple(k.label for k in NodeKind)
#: Kinds that are layers: rows kept when operator rows are hidden.
LAYER_KINDS: tuple[str, ...] = (NodeKind.MODULE.label, NodeKind.REGION.label)


class EventKind(IntEnum):
    """What one recorded event is, decided once from its trace category and name."""

    OP = 0  #: an operator or any other CPU range torch records (cpu_op)
    REGION = 1  #: a user or torch ``record_function`` range (user_annotation)
    MODULE = 2  #: a module range opened by torchprof's hooks (or torch's ``nn.Module:`` events)
    RUNTIME = 3  #: a device runtime/driver call on the CPU (cudaLaunchKernel, cudaMemcpy, ...)
    DEVICE = 4  #: time on the device: kernels, memcpy, memset
    MEMORY = 5  #: an allocation (+bytes) or free (-bytes) instant event
    IGNORED = 6  #: flows, metadata, profiler overhead
    PYFRAME = 7  #: a Python call (``with_stack``): not a node, but names the source line of what it runs
    #: a range the device profiler measured, not device work: CUPTI's range profiler replays each
    #: kernel to read hardware counters, and its ranges last that replay (a row, in no time total)
    DEVICE_RANGE = 8


#: The tree row kind each event kind becomes (runtime calls are shown as ops).
NODE_KIND_OF_EVENT: dict[int, NodeKind] = {
    EventKind.OP: NodeKind.OP,
    EventKind.REGION: NodeKind.REGION,
    EventKind.MODULE: NodeKind.MODULE,
    EventKind.RUNTIME: NodeKind.OP,
    EventKind.DEVICE: NodeKind.KERNEL,
    EventKind.DEVICE_RANGE: NodeKind.REGION,
}
#: CPU ranges: events that nest by time on their thread and own the events inside them.
HOST_RANGE_KINDS = frozenset({EventKind.OP, EventKind.REGION, EventKind.MODULE, EventKind.RUNTIME})
#: Events that carry a correlation to the device (runtime calls and device activities).
DEVICE_LINKED_KINDS = frozenset({EventKind.RUNTIME, EventKind.DEVICE})

#: Chrome-trace categories (``cat``) by the event kind they hold: every category kineto writes
#: (``libkineto/include/ActivityType.h``), for every accelerator, and the capitalised names of
#: kineto before 2022. Device time from any accelerator (CUDA, ROCm, XPU, MTIA, PrivateUse1
#: backends) is DEVICE, so the ``cuda_*`` columns hold device time whatever the device.
#: Categories not listed are ignored.
CATEGORY_KIND: dict[str, EventKind] = {
    # host ranges
    "cpu_op": EventKind.OP,
    "operator": EventKind.OP,
    "Operator": EventKind.OP,  # kineto before 2022
    "user_annotation": EventKind.REGION,
    # runtime and driver calls that launch device work, on the host thread
    "cuda_runtime": EventKind.RUNTIME,
    "cuda_driver": EventKind.RUNTIME,
    "Runtime": EventKind.RUNTIME,  # kineto before 2022
    "xpu_runtime": EventKind.RUNTIME,
    "xpu_driver": EventKind.RUNTIME,
    "mtia_runtime": EventKind.RUNTIME,
    "privateuse1_runtime": EventKind.RUNTIME,
    "privateuse1_driver": EventKind.RUNTIME,
    "hpu_op": EventKind.RUNTIME,  # "HPU host side runtime event"
    "glow_runtime": EventKind.RUNTIME,
    # work on the device (kernels of every backend are written as "kernel")
    "kernel": EventKind.DEVICE,
    "gpu_memcpy": EventKind.DEVICE,
    "gpu_memset": EventKind.DEVICE,
    "Kernel": EventKind.DEVICE,  # kineto before 2022
    "Memcpy": EventKind.DEVICE,
    "Memset": EventKind.DEVICE,
    "mtia_ccp_events": EventKind.DEVICE,  # MTIA's on-device kernels and collectives
    "cuda_profiler_range": EventKind.DEVICE_RANGE,  # kernels replayed by CUPTI's range profiler (since removed)
    # not work of their own: device-side copies of host ranges, waits, counters, host-side
    # collective markers that wrap ops already read
    "gpu_user_annotation": EventKind.IGNORED,
    "User": EventKind.IGNORED,  # kineto before 2022: a user annotation on a device stream
    "cuda_sync": EventKind.IGNORED,
    "cuda_event": EventKind.IGNORED,
    "xpu_sync": EventKind.IGNORED,
    "overhead": EventKind.IGNORED,
    "external_correlation": EventKind.IGNORED,
    "mtia_insight": EventKind.IGNORED,
    "mtia_counters": EventKind.IGNORED,
    "hardware_counters": EventKind.IGNORED,
    "xpu_scope_profiler": EventKind.IGNORED,
    "collective_comm": EventKind.IGNORED,
    "cpu_instant_event": EventKind.MEMORY,
}
#: Category of the Python calls ``with_stack`` records (and of torch's ``nn.Module:`` events).
PYTHON_CATEGORY = "python_function"
#: Category of kineto's span event: the profiled window (``ts``, ``dur``).
SPAN_CATEGORY = "Trace"
#: Category of instant events (memory allocations and frees are named :data:`MEMORY_EVENT`).
INSTANT_CATEGORY = "cpu_instant_event"


class DeviceWork(IntEnum):
    """What one device activity does, decided once per name by :data:`DEVICE_WORK_PATTERNS`."""

    COMPUTE = 0  #: a kernel that computes: any device work the patterns below do not match
    COMM = 1  #: a collective or point-to-point communication kernel
    MEMCPY = 2  #: a memcpy, a memset or a DMA transfer


#: Name patterns (regular expressions, ``re.match``; the first that matches wins) of
#: the device work that is not compute. They are Holistic Trace Analysis's (``hta/utils/utils.py``),
#: so the figures agree with HTA's, plus ``rccl`` names: NCCL's and RCCL's kernels (``ncclKernel_AllReduce_RING_LL_Sum_float``,
#: ``ncclDevKernel_SendRecv``), kineto's memcpy and memset activities (``Memcpy HtoD (Pageable ->
#: Device)``, ``Memset (Device)``) and MTIA's DMA transfers.
DEVICE_WORK_PATTERNS: tuple[tuple[DeviceWork, str], ...] = (
    (DeviceWork.COMM, r"^nccl.*Kernel|^rccl"),
    (DeviceWork.MEMCPY, r"^Memcpy|^Memset|^dma"),
)


class TraceArg:
    """Names of the chrome-trace event arguments torchprof reads, as kineto spells them."""

    SEQUENCE = "Sequence number"  #: autograd sequence number of an op
    FWD_THREAD = "Fwd thread id"  #: on backward ops: the thread that ran forward
    EXTERNAL_ID = "External id"  #: an op's correlation id; on device work, the launching op's
    EXTERNAL_ID_OLD = "external id"  #: the same on device and runtime events of kineto before 2022
    CORRELATION = "correlation"  #: joins a runtime call and the device work it launched
    BYTES = "Bytes"  #: memory events: bytes allocated (negative: freed)
    DEVICE_TYPE = "Device Type"  #: memory events: a c10::DeviceType
    TOTAL_ALLOCATED = "Total Allocated"  #: memory events: bytes allocated after the event
    ADDR = "Addr"  #: memory events: the block's address (pairs a free with its allocation)
    DEVICE_ID = "Device Id"  #: memory events: the device index (-1 for host memory)
    INPUT_DIMS = "Input Dims"
    CONCRETE_INPUTS = "Concrete Inputs"
    #: ops of a TorchScript model profiled ``with_modules``: ``TOP(Net)::forward.fc1(Linear)::forward.``
    MODULE_HIERARCHY = "Module Hierarchy"


#: Where memory events come from (chrome trace "Device Type"; c10::DeviceType values).
CPU_DEVICE_TYPES = frozenset({0, 7, 8})  # CPU, MKLDNN, IDEEP


# -- event names ---------------------------------------------------------------------------------------
#: Prefix of the ranges torchprof's module hooks open: ``nn.Module: <path> [<Type>]``.
MODULE_PREFIX = "nn.Module: "
#: How Lightning's ``PyTorchProfiler`` names a module call (``record_module_names``, on by default):
#: ``[pl][module]torch.nn.modules.linear.Linear: encoder.0``, the class by its import path and the
#: module by its name in the LightningModule.
LIGHTNING_MODULE_PREFIX = "[pl][module]"
#: Name prefix of the autograd engine's per-node backward range.
BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
#: The autograd node that accumulates a parameter's gradient (after ``BACKWARD_PREFIX`` in its
#: range's name); DDP launches a bucket's all-reduce from its hook.
ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"
#: Prefix of the ranges FSDP2 records (``FSDP::all_gather (3)``, ``FSDP::post_backward_reduce (0)``).
FSDP_PREFIX = "FSDP::"
#: Name prefix of aten operators.
ATEN_PREFIX = "aten::"
#: torch.profiler's iteration ranges (``ProfilerStep#12``).
STEP_PREFIX = "ProfilerStep#"
#: Columns of ``prof.step_times``, the wall time of every step a run marked (``prof.step()``, a
#: trainer's optimizer steps), recorded or not: a merged job's ``rank`` first, then the step's
#: number, its wall time in µs and whether the profile recorded it.
STEP_TIME_COLUMNS = ("rank", "step", "wall_us", "recorded")
#: The profiler's allocation/free instant event.
MEMORY_EVENT = "[memory]"
#: The profiler's out-of-memory instant event (not a node).
OOM_EVENT = "[OutOfMemory]"
#: torch.compile's ranges: a compiled frame (``Torch-Compiled Region: 0/0``, the compile id), the
#: autograd Function that runs its forward graph and its backward, and one call of an Inductor graph.
COMPILED_REGION_PREFIX = "Torch-Compiled Region: "
COMPILED_FORWARD = "CompiledFunction"
COMPILED_BACKWARD = "CompiledFunctionBackward"
COMPILED_GRAPH_PREFIX = "## Call CompiledFxGraph "
#: Ranges torch records around a call's dispatch to Python (a TorchDispatchMode, a tensor
#: subclass, fake tensors): the ops they run are their children; they do no arithmetic themselves.
DISPATCH_RANGES = frozenset({"PythonDispatchMode", "PythonSubclass"})
#: Compiler bookkeeping ranges around a compiled graph: no arithmetic, no layer.
COMPILED_BOOKKEEPING = frozenset({
    "TorchDynamo Cache Lookup", "AOTDispatcher Runtime Wrapper Prologue", "Pregraph bytecode", COMPILED_FORWARD,
    COMPILED_BACKWARD,
})  # fmt: skip
#: Compiler work recorded inside the block (a graph compiled there): Dynamo's and Inductor's
#: ranges - ``dynamo`` around a frame's compile, ``entire_backward_compile`` around a backward
#: graph's, ``compile_file`` on Inductor's compile worker threads, ``<phase> (dynamo_timed)``,
#: ``<phase>_data: ...`` markers. The outermost one and everything inside it land in one
#: "(compilation)" row where it ran: compile time, never op time, and no op of it is counted.
COMPILATION_RANGES = frozenset({
    "dynamo", "entire_frame_compile", "entire_backward_compile", "compile_file", "inductor_compile", "backend_compile",
    "compile_fx_inner", "code_gen", "create_aot_dispatcher_function",
})  # fmt: skip
COMPILATION_SUFFIX = " (dynamo_timed)"
COMPILATION_MARKER = "_data: "
COMPILATION = "(compilation)"
#: Key of the block torchprof adds to the chrome traces it writes (module types, parameter counts).
TRACE_META_KEY = "torchprof"
#: The row that holds backward work no layer's forward op created (AccumulateGrad, a loss
#: computed outside every module), so totals still add up.
UNATTRIBUTED_BACKWARD = "(backward, no module)"
#: The row under a module that holds its recomputation inside backward (activation checkpointing),
#: counted as that module's backward work.
RECOMPUTE = "(recompute)"
#: The row of device work launched before the profiled window opened: no launch call or op of
#: the window issued it (its correlation id is older than every launch recorded, or it started
#: before the first host event).
LAUNCHED_BEFORE = "(launched before profiling)"
#: Prefixes of the regions torch's optimizers record around ``step()`` and ``zero_grad()``
#: (``Optimizer.step#AdamW.step``, ``Optimizer.zero_grad#AdamW.zero_grad``).
OPTIMIZER_PREFIX = "Optimizer."
OPTIMIZER_STEP_PREFIX = "Optimizer.step#"
ZERO_GRAD_PREFIX = "Optimizer.zero_grad#"
#: The range torchprof opens around the closure an optimizer step was given (Lightning's, LBFGS's):
#: the loss, forward and backward it runs are its, the step's own update is outside it (not an
#: ``Optimizer.`` range: the closure's work is not the optimizer's).
OPTIMIZER_CLOSURE = "(optimizer closure)"
#: The phases of a run, by code (the memory timeline, the moment of a memory peak): inside a
#: module's forward, backward work, inside an ``Optimizer.`` region, anything else.
PHASES: tuple[str, ...] = ("forward", "backward", "optimizer", "other")
#: What the bytes alive at a memory peak are (``prof.memory_breakdown()``): torch's own categories
#: (``torch.profiler._memory_profiler.Category``), ``input`` folded into ``other``.
MEMORY_CATEGORIES: tuple[str, ...] = (
    "parameter", "gradient", "optimizer_state", "activation", "temporary", "autograd_detail", "other",
)  # fmt: skip
#: Where ``prof.memory_breakdown(by="layer")`` puts bytes allocated before the profiled window
#: that no known tensor explains (inputs, caches, tensors of earlier steps).
BEFORE_PROFILING = "(allocated before profiling)"
#: The row of device work inside the window whose launch names no op: a runtime call outside
#: every range, or a correlation id that matches nothing recorded.
DEVICE_WITHOUT_OP = "(device, no launching op)"
#: The row under the root that lists the ranges CUPTI's range profiler measured, one row per
#: kernel name with its count: each range lasts the profiler's replay of a kernel, not the
#: kernel's own run, so no time total holds them (the device's time is then unknown).
DEVICE_RANGES = "(CUPTI range profiler)"
#: The profiled window's span event (kineto's ``PyTorch Profiler (0)``; per-backend spans follow it).
PROFILER_SPAN_PREFIX = "PyTorch Profiler"


#: First characters that make a spreadsheet read a CSV cell as a formula (OWASP's list for CSV
#: injection: ``=``, ``+``, ``-``, ``@``, tab, carriage return). Every CSV writer, the widget's
#: included, writes a text cell starting with one behind a ``'``.
CSV_FORMULA_START = "=+-@\t\r"


# -- columns -----------------------------------------------------------------------------------------
def is_missing(value: object) -> bool:
    """A value that was not recorded: None (text) or NaN (numbers)."""
    return value is None or (isinstance(value, float) and math.isnan(value))



#: How a column's values are written (:attr:`Column.unit`).
Unit = Literal["time", "bytes", "count", "int", "fraction", "text", "bool"]
#: How a column's value over several nodes, steps or ranks is made (:attr:`Column.rollup`).
Rollup = Literal["total", "self", "count", "max", "none"]
#: What a column's values are stored as (:attr:`Column.dtype`).
Dtype = Literal["float", "int", "str", "bool"]
#: The colour family of a column's bar (:attr:`Column.family`).
Family = Literal["cpu", "cuda", "bwd", "mem"]


#: What a view writes for an unknown value in a column whose NaN means unknown (``Column.unknown``).
UNKNOWN_MARK = "?"


@dataclass(frozen=True)
class Column:
    """One column of the profile, as every view shows it."""

    name: str
    """The ``prof.df`` column name. Units are in the name: ``_us`` µs, ``_mem`` bytes."""
    label: str
    """The header in the terminal table, the static HTML, the widget and its CSV."""
    unit: Unit
    """How values are written: ``time`` (µs), ``bytes``, ``count`` (1000-based), ``int``, ``fraction`` (a
    share written as a percentage), ``text``, ``bool``."""
    about: str
    """One sentence for tooltips and docs/columns.md."""
    dtype: Dtype = "float"
    """``float`` (NaN when not recorded), ``int``, ``str`` (None when absent) or ``bool``."""
    rollup: Rollup = "none"
    """``total``: a node's value includes its children's; ``self``: it excludes them; ``count``:
    a per-node count that adds up across groups; ``max``: a high-water mark, whose value over
    several steps or ranks is the largest of theirs; ``none``: not additive (text, depth)."""
    family: Family | None = None
    """``cpu``, ``cuda``, ``bwd`` or ``mem``: colours the bar and groups related columns."""
    percent_of: str | None = None
    """The column whose root value is 100% for this column's percentages and bars."""
    layer_alt: str | None = None
    """With operator rows hidden, the column read instead (a layer's ops fold into its self time)."""
    sortable: bool = False
    threshold: bool = False
    """The min-percent threshold applies to it when it is the sort column (otherwise CPU total)."""
    needs: str | None = None
    """A view shows this column only where it shows that one too (forward beside backward)."""
    delta: bool | None = None
    """A change of a time between two runs (a comparison): the front end colours it, green below
    zero (faster), red above (slower)."""
    subtree: str | None = None
    """For a self column: the column of the same quantity over the node's whole subtree. A view
    that hides an op row folds that row's subtree value into its parent's self, so no number
    changes without a row appearing or disappearing beside it."""
    unknown: bool | None = None
    """NaN in it means unknown (the row holds work of unknown cost), not zero nor unrecorded: views
    write :data:`UNKNOWN_MARK` where the column is shown."""

    @property
    def numeric(self) -> bool:
        return self.dtype in ("float", "int")

    def spec(self) -> dict[str, Any]:
        """The column as the payload sends it to the front end."""
        return {k: v for k, v in asdict(self).items() if v is not None}


def _time(name: str, label: str, about: str, *, family: Family, percent_of: str, rollup: Rollup = "total",
          layer_alt: str | None = None, needs: str | None = None, subtree: str | None = None) -> Column:  # fmt: skip
    return Column(name, label, "time", about, rollup=rollup, family=family, percent_of=percent_of,
                  layer_alt=layer_alt, sortable=True, threshold=True, needs=needs, subtree=subtree)  # fmt: skip


#: The figures a profile of several ranks (``load_trace`` of a distributed job's traces) gives the
#: range of: each row's value is the mean over the ranks, ``<col>_min``/``<col>_max`` its extremes
#: and ``<col>_max_rank`` the rank that holds the maximum (the straggler).
RANK_METRICS: tuple[str, ...] = ("cpu_us", "cuda_us", "bwd_cpu_us", "bwd_cuda_us")
#: The figures whose rank spread (slowest rank minus fastest) the tables show.
RANK_SPREAD_METRICS: tuple[str, ...] = ("cpu_us", "cuda_us")
_RANK_LABELS: dict[str, tuple[str, Family]] = {"cpu_us": ("CPU", "cpu"), "cuda_us": ("CUDA", "cuda"), "bwd_cpu_us": ("CPU bwd", "bwd"),
                "bwd_cuda_us": ("CUDA bwd", "bwd")}  # fmt: skip


def _rank_columns() -> tuple[Column, ...]:
    """``<col>_min``, ``<col>_max``, ``<col>_max_rank`` per :data:`RANK_METRICS` and
    ``<col>_spread`` per :data:`RANK_SPREAD_METRICS`: NaN in a profile of one rank."""
    out: list[Column] = []
    one = "; NaN for a profile of one rank"
    for name in RANK_METRICS:
        label, family = _RANK_LABELS[name]
        base = "cpu_us" if "cpu" in name else "cuda_us"
        out.append(Column(f"{name}_min", f"{label} min", "time", f"Several ranks: the smallest `{name}` of any rank (a rank without the row counts 0){one}.",
                          family=family, percent_of=base, sortable=True))
        out.append(Column(f"{name}_max", f"{label} max", "time", f"Several ranks: the largest `{name}` of any rank{one}.",
                          family=family, percent_of=base, sortable=True))
        out.append(Column(f"{name}_max_rank", f"{label} slowest rank", "int", f"Several ranks: the rank with the largest `{name}` (the straggler on this row){one}.",
                          sortable=True, needs=f"{name}_spread" if name in RANK_SPREAD_METRICS else None))
    for name in RANK_SPREAD_METRICS:
        label, family = _RANK_LABELS[name]
        out.append(Column(f"{name}_spread", f"{label} rank spread", "time",
                          f"Several ranks: `{name}_max - {name}_min`, how far the slowest rank is behind the fastest on this row{one}.",
                          family=family, percent_of=name, sortable=True))
    return tuple(out)


#: Every column of ``prof.df``, in order, with what it means.
COLUMNS: tuple[Column, ...] = (
    Column("path", "Path", "text", "Unique key of the row: a module's `named_modules()` path under its root's label (`ResNet.layer1.0.conv1`), anything else `<parent path>/<name>`.", dtype="str", sortable=True),
    Column("name", "Node", "text", "The node's own name: a module's attribute name, a region's label, an op's or kernel's name.", dtype="str", sortable=True),
    Column("kind", "Kind", "text", "`module`, `region` (a `record_function` range such as `Optimizer.step#AdamW.step` or `ProfilerStep#3`), `op` (an aten operator or a runtime call) or `kernel` (device work).", dtype="str", sortable=True),
    Column("type", "Type", "text", "The module class.", dtype="str", sortable=True),
    Column("module", "Module", "text", "For module rows, the module's `named_modules()` path under its root's label, the same in every step and context (`path` may add a region prefix such as `ProfilerStep#3/`); None for other rows.", dtype="str", sortable=True),
    Column("parent", "Parent", "text", "Path of the parent row.", dtype="str"),
    Column("depth", "Depth", "int", "Depth in the tree (the root is 0).", dtype="int", sortable=True),
    Column("exec_order", "Order", "int", "Execution order: nodes are numbered as they first ran (a `Sequential`'s children in call order, a layer's forward work before its backward); sorting siblings by it shows the model's own order.", dtype="int", sortable=True),
    Column("calls", "Calls", "int", "How many times the node ran (a module called 3 times is one row with 3 calls).", dtype="int", rollup="count", sortable=True),
    Column("calls_per_step", "Calls/step", "count", "Calls per recorded `ProfilerStep` (with a schedule and `prof.step()`): under a `ProfilerStep#N` row its calls in that step, above them its calls divided by the steps; NaN without steps.", rollup="none", sortable=True),
    _time("self_cpu_us", "Self CPU", "CPU time of the node itself, without any child row (ops included), so self times add up to the total. The views show it under this name with op rows shown; with them hidden they show `layer_self_cpu_us` (Own CPU: ops folded in).", family="cpu", percent_of="cpu_us", rollup="self", layer_alt="layer_self_cpu_us", subtree="cpu_us"),
    _time("cpu_us", "CPU total", "CPU time of the node and everything under it, forward and backward, in µs.", family="cpu", percent_of="cpu_us"),
    _time("fwd_cpu_us", "CPU fwd", "The forward part of CPU total: work inside a module's forward (recomputation by activation checkpointing is backward).", family="cpu", percent_of="cpu_us", needs="bwd_cpu_us"),
    _time("other_cpu_us", "CPU other", "The part of CPU total that is neither forward nor backward: the optimizer, a loss computed outside modules, data loading, collectives outside modules. `fwd + bwd + other == total` on every row.", family="cpu", percent_of="cpu_us", needs="bwd_cpu_us"),
    _time("comm_cpu_us", "CPU comm", "The communication part of CPU total: host ranges of collectives (the c10d op that launches one, a CPU backend's worker range such as `gloo:all_reduce` while the data is in flight) and everything inside them. DDP's all-reduce is split over the layers its bucket carries, by the bytes of their gradients; FSDP's collectives sit on their layer.", family="cpu", percent_of="cpu_us"),
    _time("comm_exposed_cpu_us", "CPU comm exposed", "The part of CPU comm during which no op of the model (forward inside a layer, or backward) ran on any thread: communication the training waited for; the rest ran beside compute.", family="cpu", percent_of="cpu_us"),
    _time("self_cuda_us", "Self CUDA", "Device time (kernels, memcpys, memsets, on any accelerator) of the node itself, without its child rows.", family="cuda", percent_of="cuda_us", rollup="self", layer_alt="layer_self_cuda_us", subtree="cuda_us"),
    _time("cuda_us", "CUDA total", "Device time of the node and everything under it, each kernel attributed to the op that launched it: CUDA, ROCm, XPU, MTIA or any other accelerator torch.profiler records (the `cuda_` names follow torch's). Summed over streams, so it can exceed the wall time (`prof.summary` has the busy time); NaN when the profile has no device.", family="cuda", percent_of="cuda_us"),
    _time("bwd_self_cpu_us", "Bwd self CPU", "The backward part of Self CPU.", family="bwd", percent_of="cpu_us", rollup="self", layer_alt="layer_bwd_self_cpu_us", subtree="bwd_cpu_us"),
    _time("bwd_cpu_us", "CPU bwd", "The backward part of CPU total: autograd work attributed to the layer whose forward op created it (linked by sequence number).", family="bwd", percent_of="cpu_us"),
    _time("bwd_self_cuda_us", "Bwd self CUDA", "The backward part of Self CUDA.", family="bwd", percent_of="cuda_us", rollup="self", layer_alt="layer_bwd_self_cuda_us", subtree="bwd_cuda_us"),
    _time("bwd_cuda_us", "CUDA bwd", "The backward part of CUDA total.", family="bwd", percent_of="cuda_us"),
    _time("fwd_cuda_us", "CUDA fwd", "The forward part of CUDA total (kernels launched by a module's forward).", family="cuda", percent_of="cuda_us", needs="bwd_cuda_us"),
    _time("other_cuda_us", "CUDA other", "The part of CUDA total that is neither forward nor backward.", family="cuda", percent_of="cuda_us", needs="bwd_cuda_us"),
    _time("compute_cuda_us", "CUDA compute", "The compute part of CUDA total: every kernel that is neither communication nor a memcpy/memset. `compute + comm + memcpy == cuda_us` on every row.", family="cuda", percent_of="cuda_us", needs="comm_cuda_us"),
    _time("comm_cuda_us", "CUDA comm", "The communication part of CUDA total: collective and point-to-point kernels (NCCL, RCCL), each counted in full, also while it waits for the other ranks.", family="cuda", percent_of="cuda_us"),
    _time("comm_overlap_cuda_us", "Comm overlapped", "The part of CUDA comm during which a compute kernel ran on the same device (any stream): communication hidden behind compute.", family="cuda", percent_of="cuda_us"),
    _time("comm_exposed_cuda_us", "Comm exposed", "CUDA comm minus its overlapped part: time this row's communication ran with no compute beside it on its device.", family="cuda", percent_of="cuda_us"),
    _time("memcpy_cuda_us", "CUDA memcpy", "The memcpy/memset part of CUDA total: copies between host and device or between devices, fills, DMA transfers.", family="cuda", percent_of="cuda_us"),
    _time("idle_cuda_us", "CUDA idle", "Device idle time that ended with this node's work: every gap of the device window in which no stream of any device ran anything goes to the kernel that ended it (the device waited for that launch), so rows add up and the root's is `prof.summary['gpu_idle_us']`. Percentages are of the run's idle time.", family="cuda", percent_of="idle_cuda_us"),
    Column("self_cpu_mem", "Self CPU net", "bytes", "Net host bytes of the node itself: allocated minus freed inside it (with `memory=True`). Not what it holds: a layer whose forward tensors are freed in backward nets near zero; see `act_cpu_mem` and `peak_cpu_mem`.", rollup="self", family="mem", sortable=True, threshold=True),
    Column("cpu_mem", "CPU net", "bytes", "Net host bytes of the node and everything under it: allocated minus freed (with `memory=True`); NaN otherwise. Not what it holds: a training step's forward allocations are freed in its backward, so this is near zero for the layers behind a peak.", rollup="total", family="mem", sortable=True, threshold=True),
    Column("self_cuda_mem", "Self CUDA net", "bytes", "Net device bytes of the node itself: allocated minus freed inside it (with `memory=True`); see `act_cuda_mem` and `peak_cuda_mem`.", rollup="self", family="mem", sortable=True, threshold=True),
    Column("cuda_mem", "CUDA net", "bytes", "Net device bytes of the node and everything under it: allocated minus freed (with `memory=True`).", rollup="total", family="mem", sortable=True, threshold=True),
    Column("act_cpu_mem", "CPU kept", "bytes", "Host bytes a layer's forward allocated that are still alive when that forward ends: what it keeps for backward (its output included), summed over its calls. A parent counts what its children allocated once, when still alive at its own end; rows above layers add up their layers; NaN for ops, backward rows and sources without allocation addresses.", rollup="total", family="mem", sortable=True, threshold=True),
    Column("peak_cpu_mem", "CPU peak", "bytes", "The highest host bytes allocated in the whole process (the allocator's total, not only this node's) at any moment while the node ran, forward or backward.", family="mem", sortable=True, rollup="max"),
    Column("act_cuda_mem", "CUDA kept", "bytes", "Device bytes a layer's forward allocated that are still alive when that forward ends (as `act_cpu_mem`, on any accelerator).", rollup="total", family="mem", sortable=True, threshold=True),
    Column("peak_cuda_mem", "CUDA peak", "bytes", "The highest device bytes allocated (the allocator's total of any one device) at any moment while the node ran, forward or backward.", family="mem", sortable=True, rollup="max"),
    Column("params", "Params", "count", "Parameters of a module and its children, each tensor counted once.", rollup="total", sortable=True),
    Column("macs", "MACs", "count", "Multiply-accumulates, forward and backward, counted from the shapes recorded for each op that ran (only matmul, convolution, attention and weighted sums have MACs); unknown (?) where the row holds an op of unknown cost that may multiply-add.", rollup="total", sortable=True, threshold=True, unknown=True),
    Column("flops", "FLOPs", "count", "Floating-point operations, forward and backward, counted from the shapes recorded for each op that ran: `2 * macs` plus elementwise, normalisation, softmax and pooling work (ops that only move, order or select data count 0); unknown (?) where the row holds an op of unknown cost (`prof.unsupported_ops`).", rollup="total", sortable=True, threshold=True, unknown=True),
    Column("mfu", "MFU", "fraction", "Model FLOPs utilisation: FLOPs divided by the row's device time (CPU time without a device) and by the device's peak dense FLOP/s for the run's data type (`prof.summary['peak_flops']`; `peak_flops=` sets it); NaN where the peak or the FLOPs are unknown.", sortable=True),
    Column("input_shapes", "Input shapes", "text", "Input shapes of the first call (with `shapes=True`: an op's, a module call's).", dtype="str"),
    Column("source", "Source", "text", "With `stack=True`: the line of your code the first call ran from (`train.py(42): forward`).", dtype="str"),
    _time("layer_self_cpu_us", "Own CPU", "A layer's own CPU time: its Self CPU with its ops folded in (what the layer itself costs), the figure the views show, under this name, when op rows are hidden.", family="cpu", percent_of="cpu_us", rollup="self"),
    _time("layer_self_cuda_us", "Own CUDA", "A layer's own device time: its Self CUDA with its ops and kernels folded in (the views' figure with op rows hidden).", family="cuda", percent_of="cuda_us", rollup="self"),
    _time("layer_bwd_self_cpu_us", "Bwd own CPU", "The backward part of Own CPU.", family="bwd", percent_of="cpu_us", rollup="self"),
    _time("layer_bwd_self_cuda_us", "Bwd own CUDA", "The backward part of Own CUDA.", family="bwd", percent_of="cuda_us", rollup="self"),
    Column("is_backward", "Backward", "bool", "The row is backward work.", dtype="bool"),
    *_rank_columns(),
)
#: The columns only a profile of several ranks fills (NaN otherwise).
RANK_COLUMNS: tuple[str, ...] = tuple(c.name for c in _rank_columns())

#: The columns the tables show (terminal, static HTML, widget), in order, where the profile has
#: data for them (not all missing, not all zero).
VIEW_COLUMNS: tuple[str, ...] = (
    "self_cpu_us", "cpu_us", "fwd_cpu_us", "bwd_cpu_us", "other_cpu_us", "cpu_us_spread", "cpu_us_max_rank",
    "comm_cpu_us", "comm_exposed_cpu_us", "self_cuda_us", "cuda_us", "fwd_cuda_us", "bwd_cuda_us", "other_cuda_us", "cuda_us_spread", "cuda_us_max_rank",
    "compute_cuda_us", "comm_cuda_us", "comm_overlap_cuda_us", "comm_exposed_cuda_us", "memcpy_cuda_us", "idle_cuda_us",
    "act_cpu_mem", "peak_cpu_mem", "act_cuda_mem", "peak_cuda_mem", "flops", "mfu", "params", "calls",
)  # fmt: skip
#: The view columns a terminal table drops first, in this order, when it must fit a width (the
#: sort column is never dropped; view columns not listed go last, from the end of VIEW_COLUMNS). Only
#: view columns: a test keeps it so.
NARROW_DROP_ORDER: tuple[str, ...] = (
    "comm_exposed_cpu_us", "idle_cuda_us", "comm_overlap_cuda_us", "memcpy_cuda_us", "other_cuda_us", "other_cpu_us", "params", "mfu",
    "flops",
    "fwd_cuda_us", "fwd_cpu_us", "calls", "cuda_us_max_rank", "cpu_us_max_rank", "comm_exposed_cuda_us",
    "compute_cuda_us", "cuda_us_spread", "bwd_cuda_us", "act_cuda_mem", "act_cpu_mem",
    "comm_cuda_us", "comm_cpu_us", "cpu_us_spread", "self_cuda_us",
)  # fmt: skip

#: Columns a terminal table drops together (forward without backward reads as if backward were
#: free): dropping one drops the others, except the sort column.
NARROW_DROP_TOGETHER: tuple[tuple[str, ...], ...] = (("fwd_cpu_us", "bwd_cpu_us"), ("fwd_cuda_us", "bwd_cuda_us"))

#: Columns by name.
COLUMN: dict[str, Column] = {c.name: c for c in COLUMNS}
#: The columns the views' rules single out, by the part they play. The front end reads them from
#: the payload (``vocab.roles``) and never spells a column name: ``path`` .. ``backward`` come
#: from the tree's shape (parents, flags, path tails), ``type``, ``shapes`` and ``source`` name a
#: row in its tooltip, ``order`` is the order nodes first ran in (the execution-order sort and the
#: Flame's left-to-right order), ``calls`` shows whenever there are rows, and a FLOPs cell's
#: tooltip gives its ``macs``.
COLUMN_ROLES: dict[str, str] = {
    "path": "path", "name": "name", "kind": "kind", "parent": "parent", "depth": "depth", "backward": "is_backward",
    "type": "type", "shapes": "input_shapes", "source": "source", "order": "exec_order", "calls": "calls",
    "flops": "flops", "macs": "macs",
}  # fmt: skip
#: The roles whose columns the payload does not carry: the tree's shape gives them.
SHAPE_ROLES: tuple[str, ...] = ("path", "name", "kind", "parent", "depth", "backward")
#: ``prof.df`` column names in order.
COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
#: Numeric columns stored as floats (NaN = not recorded).
FLOAT_COLUMNS: tuple[str, ...] = tuple(c.name for c in COLUMNS if c.dtype == "float")
#: Columns a view can order siblings by.
SORTABLE: tuple[str, ...] = tuple(c.name for c in COLUMNS if c.sortable)
#: Columns that sum across groups of nodes (``by_type``): self values always, totals only for
#: the outermost node of a group (its children are in it already).
ADDITIVE: tuple[str, ...] = tuple(c.name for c in COLUMNS if c.rollup in ("total", "self", "count"))
#: Columns whose value over several steps or ranks is the largest (high-water marks).
LARGEST: tuple[str, ...] = tuple(c.name for c in COLUMNS if c.rollup == "max")


# -- comparing two runs ------------------------------------------------------------------------------
#: The figures ``torchprof.compare`` puts side by side, each as ``<col>_base``, ``<col>_new`` and
#: ``<col>_delta`` (new - base).
COMPARE_METRICS: tuple[str, ...] = (
    "cpu_us", "self_cpu_us", "cuda_us", "self_cuda_us", "bwd_cpu_us", "bwd_cuda_us", "flops", "calls",
)  # fmt: skip
COMPARE_SIDES: tuple[str, ...] = ("base", "new", "delta")


class Status:
    """``cmp.df.status``: where a row of a comparison was found."""

    BOTH = "both"  #: in both runs
    ADDED = "added"  #: only in the new run
    REMOVED = "removed"  #: only in the base run


#: The row a comparison makes of every ``ProfilerStep#N`` range at one place of a run's tree: two
#: runs rarely record the same step numbers, and their layers are compared over all steps.
STEP_FOLDED = STEP_PREFIX + "*"


def _compare_side(spec: Column, suffix: str, label: str, of: str, *, about: str, delta: bool | None = None) -> Column:
    """One of ``<col>_base``, ``<col>_new``, ``<col>_delta``. Per-step calls can be fractions;
    only the row's size (``cpu_us`` of :data:`COMPARE_VIEW_EXTRA`) is compared with min_pct."""
    return Column(f"{spec.name}_{suffix}", label, "count" if spec.unit == "int" else spec.unit, about, dtype="float",
                  family=spec.family, percent_of=f"{spec.percent_of}_{of}" if spec.percent_of else None, sortable=True,
                  delta=delta, rollup=spec.rollup if suffix != "delta" else "none")  # fmt: skip


def _compare_columns() -> tuple[Column, ...]:
    out = [COLUMN["path"], COLUMN["name"], COLUMN["kind"], COLUMN["type"], COLUMN["depth"],
           Column("status", "Status", "text", "`both`, `added` (only in the new run) or `removed` (only in the base run).",
                  dtype="str", sortable=True)]  # fmt: skip
    for name in COMPARE_METRICS:
        spec = COLUMN[name]
        for side in ("base", "new"):
            out.append(_compare_side(spec, side, f"{spec.label} {side}", side,
                                     about=f"`{name}` in the {side} run (0 where the row is not in it, NaN where that run did not record it)."))  # fmt: skip
        out.append(_compare_side(spec, "delta", f"Δ {spec.label}", "base", about=f"`{name}_new - {name}_base`; its percentage is of the base run's total.",
                                 delta=True if spec.unit == "time" else None))  # fmt: skip
    return tuple(out)


#: Every column of ``cmp.df``, in order, with what it means.
COMPARE_COLUMNS: tuple[Column, ...] = _compare_columns()
#: Columns a comparison's views carry besides ``cmp.df``'s: the row's size (what ``min_pct``
#: compares; named ``cpu_us`` as in a profile), the absolute deltas they sort by, and what the
#: widget's row titles read.
COMPARE_VIEW_EXTRA: tuple[Column, ...] = (
    Column("cpu_us", "Size", "time", "The larger of the row's CPU totals in the two runs: what min_pct compares.",
           family="cpu", percent_of="cpu_us", sortable=True, threshold=True),
    Column("abs_cpu_us_delta", "|Δ CPU total|", "time", "The size of the CPU total's change, either way.", family="cpu",
           sortable=True),
    Column("abs_cuda_us_delta", "|Δ CUDA total|", "time", "The size of the CUDA total's change, either way.",
           family="cuda", sortable=True),
    COLUMN["input_shapes"], COLUMN["source"], COLUMN["is_backward"],
)  # fmt: skip
#: What a comparison's Flame view can size its bars by (each run's totals), the new run's CPU
#: total first.
COMPARE_FLAME_METRICS: tuple[str, ...] = ("cpu_us_new", "cpu_us_base", "cuda_us_new", "cuda_us_base")
#: The widget views a comparison offers: the Top view ranks self times, which it has not, and it
#: has no memory timeline.
COMPARE_VIEWS: tuple[str, ...] = ("table", "flame")
#: The columns a comparison's terminal table drops first, in this order, to fit a width (the sort
#: column and the CPU total's change are never dropped).
COMPARE_NARROW_DROP_ORDER: tuple[str, ...] = (
    "calls_base", "calls_new", "flops_delta", "bwd_cuda_us_delta", "bwd_cpu_us_delta", "cuda_us_base", "cpu_us_base",
    "cuda_us_new", "cpu_us_new",
)  # fmt: skip
#: The columns a comparison's tables show (where they hold data), in order.
COMPARE_VIEW_COLUMNS: tuple[str, ...] = (
    "cpu_us_base", "cpu_us_new", "cpu_us_delta", "bwd_cpu_us_delta", "cuda_us_base", "cuda_us_new", "cuda_us_delta",
    "bwd_cuda_us_delta", "flops_delta", "calls_base", "calls_new",
)  # fmt: skip


# -- distributed jobs --------------------------------------------------------------------------------
#: ``prof.by_rank()``: one row per rank and step. Times in µs: the step's wall time, its CPU total,
#: the time any device stream was busy inside it, the time collective communication was in flight
#: inside it, and the device's idle time (wall - busy; NaN without a device).
BY_RANK_COLUMNS: tuple[str, ...] = ("rank", "step", "wall_us", "cpu_us", "gpu_busy_us", "comm_us", "idle_us")
#: Host ranges that are collective communication: what c10d's process groups record
#: (``gloo:all_reduce``, ``nccl:all_to_all``; the worker thread's range is the time the data is in
#: flight on a CPU backend), the c10d ops and kineto's ``record_param_comms``.
COMM_RANGE_PREFIXES: tuple[str, ...] = ("gloo:", "nccl:", "mpi:", "ucc:", "xccl:", "c10d::", "record_param_comms")

# -- answers: insights, steps, the hot path ---------------------------------------------------------
#: ``prof.insights()``: one finding per row, ranked by the time at stake (``_views/insights.py``):
#: the rule, the time the finding is about (µs; NaN for memory findings), its share of the run
#: (or of the memory peak), the rows it points to, what was seen and what to try.
INSIGHT_COLUMNS: tuple[str, ...] = ("rule", "at_stake_us", "share", "paths", "message", "advice")
#: The parts a step's (or the run's) CPU time is split into, in the order a stacked bar draws
#: them; they add up to its ``cpu_us`` (``_tree/steps.py``).
STEP_PARTS: tuple[str, ...] = ("data_us", "forward_us", "backward_us", "optimizer_us", "comm_us", "other_us")
#: What ``prof.steps`` has per step besides its time split: the device's idle time in it and
#: whether it was slow.
STEP_EXTRA: tuple[str, ...] = ("idle_us", "slow")

#: Accepted spellings of sort keys from torch's tables and the 2020 torchprof.
SORT_ALIASES: dict[str, str] = {
    "cpu_time": "cpu_us", "cpu_time_total": "cpu_us", "self_cpu_time": "self_cpu_us",
    "self_cpu_time_total": "self_cpu_us", "cuda_time": "cuda_us", "cuda_time_total": "cuda_us",
    "self_cuda_time": "self_cuda_us", "self_cuda_time_total": "self_cuda_us", "count": "calls",
    "cpu_memory_usage": "cpu_mem", "self_cpu_memory_usage": "self_cpu_mem",
    "cuda_memory_usage": "cuda_mem", "self_cuda_memory_usage": "self_cuda_mem",
}  # fmt: skip


# -- view state -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StateKey:
    """One key of the view state (widget traits, report options, ``prof.widget(**state)``)."""

    name: str
    type: str
    """``float``, ``text``, ``bool`` or ``paths`` (a list of row paths)."""
    default: Any
    about: str


#: The views the widget switches between, in the order of its view switcher ("table" first: the
#: default). A view is one entry here and one module in js/src/views/, listed in js/src/views/index.js.
VIEWS: tuple[str, ...] = ("table", "insights", "flame", "top", "steps", "memory")
#: How the Flame view colours its bars: by forward/backward/other share, or by module type.
FLAME_COLOURS: tuple[str, ...] = ("phase", "type")
#: How a comparison's Flame view colours its bars: by the change of the sized time (green faster,
#: red slower, deeper for a bigger change), or by module type.
COMPARE_FLAME_COLOURS: tuple[str, ...] = ("delta", "type")
#: The ``step`` state value that shows every step folded into one tree (mean, min and max per node).
ALL_STEPS = "all"

#: The view's defaults, which every signature taking ``min_pct=`` or ``sort_by=`` reads (STATE holds them).
DEFAULT_MIN_PCT: float = 1.0
DEFAULT_SORT = "cpu_us"
#: Characters a terminal table fits in by default (``width=None``: no limit).
DEFAULT_WIDTH = 120

STATE: tuple[StateKey, ...] = (
    StateKey("min_pct", "float", DEFAULT_MIN_PCT, "hide rows below this percent of the viewed root's CPU total"),
    StateKey("sort_by", "text", DEFAULT_SORT, "the df column that orders siblings (exec_order: the order they ran)"),
    StateKey("ascending", "bool", False, "sort ascending instead of descending"),
    StateKey("show_ops", "bool", False, "show aten ops and kernels under their layers"),
    StateKey("search", "text", "", "substring or glob of names (path:... for paths); matches and their ancestors show"),
    StateKey("expanded", "paths", None, "paths of expanded rows (None: the default expansion)"),
    StateKey("view", "text", "table", "the view shown: table, insights, flame, top, steps (profiles with steps), or memory (profiles with memory=True)"),
    StateKey("step", "text", "", "the part of the run viewed: '' the whole run, 'all' every step folded into one tree, or a step number"),
    StateKey("selected", "text", "", "path of the selected row (shared by the table and the Flame view)"),
    StateKey("metric", "text", "cpu_us", "the column the Flame view sizes its bars by and the Top view ranks by"),
    StateKey("flame_colour", "text", "phase", "Flame colours: phase (forward/backward/other) or type"),
    StateKey("zoom", "text", "", "path of the node the Flame view is zoomed into ('' the viewed root)"),
)
STATE_KEYS: tuple[str, ...] = tuple(k.name for k in STATE)


# -- options of the command line and the notebook magic ---------------------------------------------
#: The entry points an option can belong to: ``python -m torchprof``, its ``demo`` command (which
#: takes the view options again after the model name) and ``%%torchprof``.
EntryPoint = Literal["cli", "demo", "magic"]
_EVERYWHERE: frozenset[EntryPoint] = frozenset({"cli", "demo", "magic"})
_COMMAND_LINE: frozenset[EntryPoint] = frozenset({"cli", "demo"})


@dataclass(frozen=True)
class Option:
    """One option, with its one help text; ``_options.py`` builds argparse for the command line and
    ``magic_arguments`` for the magic from :data:`OPTIONS`, so both say and default the same."""

    flags: tuple[str, ...]
    help: str
    """argparse's help: ``%(default)s`` is the default, ``%%`` a percent sign."""
    value: Literal["flag", "off", "text", "int", "float"] = "text"
    """``flag``: given or not (False by default); ``off``: ``--no-X`` setting ``X`` to False (True by
    default); otherwise the type of the value that follows."""
    metavar: str | tuple[str, ...] | None = None
    default: Any = None
    dest: str | None = None
    nargs: int | None = None
    where: frozenset[EntryPoint] = _EVERYWHERE
    """The entry points that have it; an option of only one of them says so here."""


OPTIONS: tuple[Option, ...] = (
    # what is recorded: the Profiler's options
    Option(("--cuda",), "record GPU kernels (default: when CUDA is available; an error without a GPU)", "flag"),
    Option(("--memory",), "record memory allocated per layer", "flag"),
    Option(("--shapes",), "show each node's input shapes (the ops' are recorded whenever FLOPs are counted)", "flag"),
    Option(("--stack",), "record Python source locations (slower)", "flag"),
    Option(("--no-flops",), "do not count FLOPs and MACs (records no op shapes: the cheapest capture)", "off", dest="flops"),
    Option(("--peak-flops",), "what MFU is measured against: FLOP/s (1.2e14) or a data type of the device (bf16, fp32, tf32, "
           "fp16, fp8); default: the device recognised at the run's data type", metavar="F"),
    Option(("--model",), "attribute only this module (a variable, or a dotted attribute such as net.encoder); paths are rooted at it",
           metavar="NAME", where=frozenset({"magic"})),
    # how the view opens
    Option(("--min-pct",), "hide rows below P%% of the total (default %(default)s)", "float", metavar="P", default=DEFAULT_MIN_PCT),
    Option(("--sort",), "order siblings by this column (default %(default)s; self_cpu_us, bwd_cpu_us, flops, exec_order, ...)",
           metavar="COL", default=DEFAULT_SORT),
    Option(("--ops",), "also show the aten ops (and kernels) inside each layer", "flag"),
    Option(("--depth",), "show the tree N levels deep (the widget opens that far)", "int", metavar="N"),
    Option(("--width",), f"fit the table in N characters (default: the terminal's width, else {DEFAULT_WIDTH}; 0: no limit)", "int",
           metavar="N", where=_COMMAND_LINE),
    Option(("--text",), "print the terminal table instead of showing the widget", "flag", where=frozenset({"magic"})),
    # files written beside
    Option(("--html",), "also write a self-contained interactive HTML report", metavar="FILE"),
    Option(("--csv",), "also write the table (prof.df) as CSV", metavar="FILE"),
    Option(("--trace",), "also write a chrome trace (Perfetto, chrome://tracing, torchprof.load_trace)", metavar="FILE"),
    Option(("--md",), "also write a summary to paste into an issue or a chat (Markdown, at most 4 KB); '-' prints only that "
           "summary on stdout", metavar="FILE", where=_COMMAND_LINE),
    # how the code runs
    Option(("-o", "--out"), "also bind the profile to this variable (it is always bound to _torchprof)", metavar="VAR",
           where=frozenset({"magic"})),
    Option(("--warmup",), "run the cell N times unprofiled first (default %(default)s)", "int", metavar="N", default=0,
           where=frozenset({"magic"})),
    Option(("--repeat",), "profile N runs of the cell; calls add up (default %(default)s)", "int", metavar="N", default=1,
           where=frozenset({"magic"})),
    Option(("-m",), "run a library module as a script (like python -m)", metavar="module", dest="module", where=frozenset({"cli"})),
    Option(("--out",), "under torchrun: the folder each rank writes its trace to (default ./torchprof-<run id>); rank 0 prints the "
           "merged job", metavar="DIR", where=frozenset({"cli"})),
    Option(("--compare",), "compare two runs (chrome traces or saved profiles) instead of running a script", metavar=("BASE", "NEW"),
           nargs=2, where=frozenset({"cli"})),
    # torchprof demo [MODEL]
    Option(("--batch",), "batch size (default %(default)s)", "int", metavar="N", default=8, where=frozenset({"demo"})),
    Option(("--size",), "image height and width (default: what the model expects, 224 for most)", "int", metavar="S", where=frozenset({"demo"})),
    Option(("--list",), "list the model names and exit", "flag", where=frozenset({"demo"})),
)  # fmt: skip
