"""What to fix first: rules that read a finished profile and say what they found, with figures, and
what to try (``prof.insights()``).

Each rule looks for one known way a training or inference step loses time or memory and fires
only past a documented threshold, so a clean model gives no finding. A finding says how much
time it is about (``at_stake_us``: the time of the work it names, so an upper bound on what fixing
it saves; NaN for memory findings), that time's ``share`` of the run, the rows it points to, what
was seen and what to try. Findings are ranked by time at stake, memory findings after.

The rules and their thresholds (shares are of the run's CPU total for host time, of its wall
time for device time, of the memory peak for memory):

- ``data_loading``: data-loading ranges (:func:`~torchprof._tree.steps.is_data_loading`) take
  at least :data:`DATA_SHARE` of the run.
- ``host_sync``: with a device, the host waits for it inside layers (``.item()``, ``.cpu()``,
  ``.tolist()``, ``nonzero``, ``cudaStreamSynchronize``, device-to-host copies:
  :data:`SYNC_OPS`) for at least :data:`SYNC_SHARE` of the run; per layer with counts.
- ``gpu_idle``: the device is idle for at least :data:`IDLE_SHARE` of its window; split into
  waiting for input (idle ended by work launched from data loading or by a host-to-device copy)
  and host-bound (the rest: the host did not launch work fast enough).
- ``exposed_communication``: communication with no compute beside it for at least
  :data:`COMM_SHARE` of the device window (of the CPU total on a host backend such as gloo).
- ``optimizer_not_foreach``: an optimizer step running one op per parameter (no ``_foreach_`` or
  ``_fused_`` op) of a class that has a foreach or fused implementation, whose per-op cost
  (:data:`DISPATCH_US` per op call, at most the steps' time) is at least :data:`OPTIMIZER_SHARE`
  of the run.
- ``optimizer_step``: the optimizer steps (``Optimizer.step#`` regions) take at least
  :data:`OPTIMIZER_STEP_SHARE` of the run (where ``optimizer_not_foreach`` does not already say
  why).
- ``torch_compile``: graphs compiled inside the profiled block (a recompilation, or a cold
  compile), or a module whose forward runs as several compiled graphs (a graph break); Dynamo's
  counters as the capture read them, and the compiled regions of the tree.
- ``activations``: activations are at least :data:`ACTIVATION_SHARE` of a memory peak that is at
  least :data:`MEMORY_CONCERN` of the device's memory; the blocks that keep the most are where
  activation checkpointing saves most.
- ``low_mfu``: leaf layers with MACs (matmul, convolution, attention) taking at least
  :data:`LOW_MFU_TIME_SHARE` of the run and doing at least :data:`LOW_MFU_FLOP_SHARE` of its
  FLOPs, at less than :data:`LOW_MFU_RATIO` of the model's own FLOP/s; at stake is the time they
  take beyond what the model's rate would need.
- ``memory_limit``: the memory peak is at least :data:`MEMORY_LIMIT_SHARE` of the device's
  memory (the host's for a CPU run).
- ``python_overhead``: time in no op and no layer (between the block's top-level ranges, and
  the steps' own time) is at least :data:`OVERHEAD_SHARE` of the run and at least
  :data:`OVERHEAD_MIN_US`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._tree.devices import device_memory
from .._tree.hotpath import layer_key
from .._tree.steps import is_data_loading, split_row
from .._tree.summary import Summary
from .._tree.tree import Tree
from .._vocab import (
    COMPILED_REGION_PREFIX,
    INSIGHT_COLUMNS,
    LAYER_KINDS,
    OPTIMIZER_STEP_PREFIX,
    STEP_PREFIX,
    NodeKind,
    is_missing,
)
from . import format as fmt

if TYPE_CHECKING:
    import pandas as pd

DATA_SHARE = 0.20
SYNC_SHARE = 0.02
IDLE_SHARE = 0.25
COMM_SHARE = 0.10
OPTIMIZER_SHARE = 0.05
#: The optimizer steps' own share of the run past which they are a finding whatever they run.
OPTIMIZER_STEP_SHARE = 0.15
#: What one op call of a per-parameter optimizer costs besides its math (Python dispatch, a kernel
#: launch), which a foreach or fused optimizer saves: the optimizer rule's time at stake per call.
DISPATCH_US = 10.0
#: The optimizer rule needs at least this many per-parameter op calls in one step.
OPTIMIZER_MIN_OPS = 8
ACTIVATION_SHARE = 0.50
MEMORY_CONCERN = 0.50
LOW_MFU_TIME_SHARE = 0.05
LOW_MFU_RATIO = 0.15
#: ... and doing at least this share of the model's FLOPs (a tiny layer is slow from overhead, not its math).
LOW_MFU_FLOP_SHARE = 0.02
MEMORY_LIMIT_SHARE = 0.85
OVERHEAD_SHARE = 0.20
#: ... and at least this long: a block of a few milliseconds spends that between any ranges.
OVERHEAD_MIN_US = 5_000.0
#: Findings list at most this many rows (layers, regions) each.
MAX_PATHS = 5

#: Ops and runtime calls that make the host wait for the device.
SYNC_OPS = frozenset({
    "aten::item", "aten::_local_scalar_dense", "aten::nonzero", "aten::nonzero_static", "aten::tolist",
    "aten::masked_select", "aten::unique", "aten::_unique2",
    "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy",
    "hipStreamSynchronize", "hipDeviceSynchronize", "hipEventSynchronize", "hipMemcpy",
})  # fmt: skip
#: Optimizers with a foreach or fused implementation in torch (``torch/optim``).
FOREACH_OPTIMIZERS = frozenset({"SGD", "Adam", "AdamW", "Adamax", "Adadelta", "Adagrad", "ASGD", "NAdam", "RAdam",
                                "RMSprop", "Rprop"})  # fmt: skip
FUSED_OPTIMIZERS = frozenset({"SGD", "Adam", "AdamW", "Adagrad"})
#: Ranges of Dynamo's and Inductor's compilation (``dynamo_timed``), counted at the outermost.
COMPILE_RANGES = ("dynamo", "entire_frame_compile", "_compile.compile_inner", "inductor_compile", "compile_fx_inner",
                  "OutputGraph.call_user_compiler")  # fmt: skip

_MODULE = NodeKind.MODULE.label
_REGION = NodeKind.REGION.label
_KERNEL = NodeKind.KERNEL.label
_COMPILED_ID = re.compile(r"(\d+)/(\d+)")
NAN = float("nan")


@dataclass(frozen=True)
class Finding:
    """One thing to fix, as a row of ``prof.insights()``."""

    rule: str
    at_stake_us: float
    """The time of the work the finding names (an upper bound on what fixing it saves); NaN for
    memory findings."""
    share: float
    """That time's share of the run (CPU total for host time, wall time for device time), or,
    for a memory finding, the share of the memory peak or of the device's memory it is about."""
    paths: list[str] = field(default_factory=list)
    message: str = ""
    advice: str = ""


@dataclass
class Context:
    """What the rules read: the tree, the summary, the recording's facts, and a few sums."""

    tree: Tree
    summary: Summary
    meta: dict[str, Any]
    memory_limit: float | None = None
    """The device's memory in bytes (the host's for a CPU run), where known."""

    def __post_init__(self) -> None:
        cols = self.tree.columns
        self.cpu_total = _num(cols["cpu_us"][0]) if len(self.tree) else 0.0
        wall = self.summary.get("wall_us", NAN)
        self.wall = _num(wall) if not is_missing(wall) and wall > 0 else self.cpu_total
        self.layer_of = _nearest_layer(self.tree)

    # A share is NaN where its base is 0 (a profile of nothing): rules compare it as
    # ``not share >= THRESHOLD``, so NaN never passes a threshold.
    def cpu_share(self, us: float) -> float:
        return us / self.cpu_total if self.cpu_total > 0 else NAN

    def wall_share(self, us: float) -> float:
        return us / self.wall if self.wall > 0 else NAN


def _pct(share: float) -> str:
    """A share as a percentage (``41%``, ``4.1%``)."""
    return fmt.percent(share, 1.0) or "0%"


def _num(v: Any) -> float:
    return 0.0 if is_missing(v) else float(v)


def _nearest_layer(tree: Tree) -> list[int]:
    """For each row, the nearest row at or above it that is a layer: a module or a user region
    (not a ``ProfilerStep#``, not torchprof's own ``(...)`` rows); -1 for none."""
    cols = tree.columns
    kinds, names, parent = cols["kind"], cols["name"], tree.parent_index
    out = [-1] * len(tree)
    for i in range(1, len(tree)):
        layer = kinds[i] == _MODULE or (kinds[i] == _REGION and not names[i].startswith((STEP_PREFIX, "(")))
        out[i] = i if layer else out[parent[i]]
    return out


def _outermost(tree: Tree, test: Callable[[int], bool], root: int = 0) -> list[int]:
    """Rows passing ``test`` with no ancestor passing it (pre-order: one pass)."""
    depth = tree.columns["depth"]
    out: list[int] = []
    below = -1
    for i in range(root + 1, len(tree)):
        if below >= 0 and depth[i] > below:
            continue
        below = -1
        if test(i):
            out.append(i)
            below = depth[i]
    return out


def _label(tree: Tree, row: int) -> str:
    """A row as a finding names it: its path (without a ``ProfilerStep#N/``), with its module type."""
    cols = tree.columns
    t = cols["type"][row]
    path = layer_key(tree, row)
    return f"{path} ({t})" if cols["kind"][row] == _MODULE and isinstance(t, str) else path


def _distinct(tree: Tree, rows: list[int]) -> list[int]:
    """``rows`` with one row per layer across steps (the first of each ``ProfilerStep#N/`` copy)."""
    seen: set[str] = set()
    out = []
    for r in rows:
        key = layer_key(tree, r)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


# -- the rules ----------------------------------------------------------------------------------------
def data_loading(c: Context) -> Finding | None:
    cols = c.tree.columns
    names = cols["name"]
    rows = _outermost(c.tree, lambda i: cols["kind"][i] in LAYER_KINDS and is_data_loading(names[i]))
    data = split_row(c.tree, 0)["data_us"]
    if not rows or not c.cpu_share(data) >= DATA_SHARE:
        return None
    calls = sum(int(cols["calls"][i]) for i in rows)
    workers = any("MultiProcessing" in names[i] for i in rows)
    first = names[rows[0]]
    advice = ("Give the loader more workers or a deeper prefetch (DataLoader(num_workers=..., prefetch_factor=..., "
              "persistent_workers=True)); make the dataset's __getitem__ and collate cheaper, or precompute them"
              if workers else
              "Load in parallel with the step: DataLoader(num_workers=4 or more, pin_memory=True, persistent_workers=True); "
              "with num_workers=0 the dataset's __getitem__ and collate run inside every step; precompute or cache costly "
              "transforms")  # fmt: skip
    return Finding("data_loading", data, c.cpu_share(data), [c.tree.paths[i] for i in rows[:MAX_PATHS]],
                   f"Data loading takes {_pct(c.cpu_share(data))} of the run ({fmt.time_us(data)} in {calls} call"
                   f"{'s' if calls != 1 else ''} of {first})", advice)  # fmt: skip


def host_sync(c: Context) -> Finding | None:
    tree = c.tree
    if not tree.has_cuda:
        return None  # on the CPU, .item() and nonzero wait for nothing
    cols = tree.columns
    names, kinds = cols["name"], cols["kind"]
    copies_back = _rows_with_kernel(tree, lambda name: name.startswith("Memcpy DtoH"))
    rows = _outermost(tree, lambda i: kinds[i] not in LAYER_KINDS and (names[i] in SYNC_OPS or i in copies_back))
    per_layer: dict[str, list[Any]] = {}  # one entry per layer over every step: [µs, calls by op, first row]
    for i in rows:
        layer = c.layer_of[i]
        if layer < 0:
            continue
        entry = per_layer.setdefault(layer_key(tree, layer), [0.0, {}, layer])
        entry[0] += _num(cols["cpu_us"][i])
        entry[1][names[i]] = entry[1].get(names[i], 0) + int(cols["calls"][i])
    waited = sum(v[0] for v in per_layer.values())
    if not per_layer or not c.wall_share(waited) >= SYNC_SHARE:
        return None
    ranked = sorted(per_layer.values(), key=lambda v: -v[0])
    parts = []
    for us, calls, layer in ranked[:3]:
        what = ", ".join(f"{n} x{k}" for n, k in sorted(calls.items(), key=lambda kv: -kv[1]))
        parts.append(f"{_label(tree, layer)}: {what}, {fmt.time_us(us)}")
    more = f" and {len(ranked) - 3} more" if len(ranked) > 3 else ""
    return Finding("host_sync", waited, c.wall_share(waited), [c.tree.paths[v[2]] for v in ranked[:MAX_PATHS]],
                   f"The host waits for the device inside {len(ranked)} layer{'s' if len(ranked) != 1 else ''} "
                   f"({fmt.time_us(waited)}, {_pct(c.wall_share(waited))} of the run): {'; '.join(parts)}{more}",
                   "Keep values on the device inside forward and backward: no .item(), .cpu(), .tolist() or printing of "
                   "tensors, no data-dependent shapes (nonzero, boolean masks); log metrics every N steps. "
                   "torch.cuda.set_sync_debug_mode('warn') points at each call")  # fmt: skip


def _rows_with_kernel(tree: Tree, test: Callable[[str], bool]) -> set[int]:
    """Op rows that launched a kernel whose name passes ``test`` (the kernel's parent)."""
    cols = tree.columns
    out = set()
    for i in range(1, len(tree)):
        if cols["kind"][i] == _KERNEL and test(cols["name"][i]):
            p = tree.parent_index[i]
            # The launch is a runtime call under the op: name the op that asked for the copy.
            while p > 0 and cols["name"][p].startswith(("cuda", "hip")) and cols["kind"][p] == NodeKind.OP.label:
                p = tree.parent_index[p]
            out.add(p)
    return out


def gpu_idle(c: Context) -> Finding | None:
    s = c.summary
    idle, window = s.get("gpu_idle_us", NAN), s.get("gpu_window_us", NAN)
    if is_missing(idle) or is_missing(window) or window <= 0 or idle / window < IDLE_SHARE:
        return None
    tree = c.tree
    cols = tree.columns
    names, idle_col = cols["name"], cols["idle_cuda_us"]
    data_rows = _outermost(tree, lambda i: cols["kind"][i] in LAYER_KINDS and is_data_loading(names[i]))
    waiting = sum(_num(idle_col[i]) for i in data_rows)
    for i in range(1, len(tree)):
        if cols["kind"][i] == _KERNEL and names[i].startswith("Memcpy HtoD") and not any(_inside(tree, i, r) for r in data_rows):
            waiting += _num(idle_col[i])
    waiting = min(waiting, idle)
    host_bound = idle - waiting
    kernels = [i for i in range(1, len(tree)) if cols["kind"][i] == _KERNEL]
    launched = sum(int(cols["calls"][i]) for i in kernels)
    busy = sum(_num(cols["self_cuda_us"][i]) for i in kernels)
    mean = busy / launched if launched else NAN
    worst = sorted((i for i in range(1, len(tree)) if c.layer_of[i] == i), key=lambda i: -_num(idle_col[i]))
    # The layers whose launches ended the most idle time: the deepest ones holding a share of it.
    leaves = _distinct(tree, [i for i in worst if _num(idle_col[i]) > 0.05 * idle and not any(
        c.layer_of[j] == j and _num(idle_col[j]) > 0.05 * idle for j in _children(tree, i))])[:MAX_PATHS]
    message = (f"The GPU is idle {_pct(idle / window)} of its window ({fmt.time_us(idle)} of {fmt.time_us(window)}): "
               f"{fmt.time_us(host_bound)} host-bound ({launched} kernel launches averaging {fmt.time_us(mean)}: the host does not "
               f"issue work fast enough), {fmt.time_us(waiting)} waiting for input")  # fmt: skip
    if host_bound >= waiting:
        advice = ("Give the GPU more work per launch: a larger batch, torch.compile (fuses small ops; "
                  "mode='reduce-overhead' replays CUDA graphs), fewer small ops and syncs in the step")  # fmt: skip
    else:
        advice = ("Feed the GPU ahead of time: DataLoader(num_workers=..., pin_memory=True) and "
                  ".to(device, non_blocking=True); prefetch the next batch on a side stream")  # fmt: skip
    return Finding("gpu_idle", idle, c.wall_share(idle), [c.tree.paths[i] for i in leaves], message, advice)


def _inside(tree: Tree, row: int, ancestor: int) -> bool:
    depth = tree.columns["depth"]
    if row <= ancestor:
        return False
    end = ancestor + 1
    while end < len(tree) and depth[end] > depth[ancestor]:
        end += 1
    return row < end


def _children(tree: Tree, row: int) -> list[int]:
    depth = tree.columns["depth"]
    out = []
    i = row + 1
    while i < len(tree) and depth[i] > depth[row]:
        if depth[i] == depth[row] + 1:
            out.append(i)
        i += 1
    return out


def exposed_communication(c: Context) -> Finding | None:
    tree = c.tree
    cols = tree.columns
    s = c.summary
    window = s.get("gpu_window_us", NAN)
    exposed = _num(cols["comm_exposed_cuda_us"][0]) if tree.has_cuda else 0.0
    if exposed > 0 and not is_missing(window) and window > 0:
        if exposed / window < COMM_SHARE:
            return None
        comm = _num(cols["comm_cuda_us"][0])
        rows = sorted((i for i in range(1, len(tree)) if c.layer_of[i] == i), key=lambda i: -_num(cols["comm_exposed_cuda_us"][i]))
        top = _distinct(tree, [i for i in rows if _num(cols["comm_exposed_cuda_us"][i]) > 0])[:MAX_PATHS]
        return Finding("exposed_communication", exposed, exposed / window, [c.tree.paths[i] for i in top],
                       f"Communication runs with no compute beside it for {fmt.time_us(exposed)} ({_pct(exposed / window)} of "
                       f"the device window; {_pct(1 - exposed / comm) if comm else '0%'} of {fmt.time_us(comm)} communication "
                       "overlaps compute)",
                       "Overlap it with compute: DDP's bucket_cap_mb and gradient_as_bucket_view=True, FSDP's forward_prefetch "
                       "and backward_prefetch, fewer and larger collectives; compare the ranks (prof.by_rank()) for a straggler "
                       "that makes the others wait")  # fmt: skip
    host = split_row(tree, 0)["comm_us"]
    if tree.has_cuda or not c.cpu_share(host) >= COMM_SHARE:
        return None
    names = cols["name"]
    rows = _outermost(tree, lambda i: names[i].startswith(("gloo:", "nccl:", "mpi:", "ucc:", "xccl:", "c10d::", "record_param_comms")))
    rows.sort(key=lambda i: -_num(cols["cpu_us"][i]))
    return Finding("exposed_communication", host, c.cpu_share(host), [c.tree.paths[i] for i in _distinct(tree, rows)[:MAX_PATHS]],
                   f"The host waits in collectives outside every layer for {fmt.time_us(host)} ({_pct(c.cpu_share(host))} of the "
                   "run)",
                   "Overlap communication with compute (DDP buckets, FSDP prefetch), send fewer and larger messages, and "
                   "compare the ranks (prof.by_rank()): a slow rank makes every other one wait")  # fmt: skip


def optimizer_not_foreach(c: Context) -> Finding | None:
    tree = c.tree
    cols = tree.columns
    names, kinds, depth = cols["name"], cols["kind"], cols["depth"]
    found: list[tuple[int, str, int]] = []
    for i in range(1, len(tree)):
        if kinds[i] != _REGION or not names[i].startswith(OPTIMIZER_STEP_PREFIX):
            continue
        cls = names[i][len(OPTIMIZER_STEP_PREFIX) :].split(".", 1)[0]
        if cls not in FOREACH_OPTIMIZERS:
            continue
        end = i + 1
        ops = 0
        vectorised = False
        while end < len(tree) and depth[end] > depth[i]:
            name = names[end]
            if "_foreach_" in name or "_fused_" in name:
                vectorised = True
            if depth[end] == depth[i] + 1 and kinds[end] == NodeKind.OP.label:
                ops += int(cols["calls"][end])
            end += 1
        if not vectorised and ops >= OPTIMIZER_MIN_OPS:
            found.append((i, cls, ops))
    spent = sum(_num(cols["cpu_us"][i]) for i, _, _ in found)
    calls = sum(ops for _, _, ops in found)
    # What foreach saves is the per-op cost of each parameter's ops (dispatch, launch), not their
    # math: at most the steps' own time. An estimate from the op count, so a step that merely ran
    # slowly (a busy machine) is not taken for one with many ops.
    stake = min(spent, calls * DISPATCH_US)
    if not found or not c.cpu_share(stake) >= OPTIMIZER_SHARE:
        return None
    _, cls, ops = max(found, key=lambda f: _num(cols["cpu_us"][f[0]]))
    fused = " or fused=True (one kernel for the whole update)" if cls in FUSED_OPTIMIZERS else ""
    return Finding("optimizer_not_foreach", stake, c.cpu_share(stake), [c.tree.paths[r] for r in _distinct(tree, [f[0] for f in found])][:MAX_PATHS],
                   f"{cls}.step runs one op per parameter tensor ({calls} op calls, no _foreach_ or _fused_ kernel): about "
                   f"{fmt.time_us(stake)} of per-op cost, {_pct(c.cpu_share(stake))} of the run; its steps took {fmt.time_us(spent)}",
                   f"Construct it with foreach=True (one kernel per operation for all parameters){fused}: "
                   f"torch.optim.{cls}(params, ..., {'fused' if fused else 'foreach'}=True)")  # fmt: skip


def torch_compile(c: Context) -> Finding | None:
    tree = c.tree
    cols = tree.columns
    names, kinds = cols["name"], cols["kind"]
    dynamo: dict[str, Any] = c.meta["dynamo"] if isinstance(c.meta.get("dynamo"), dict) else {}
    regions = [i for i in range(1, len(tree)) if names[i].startswith(COMPILED_REGION_PREFIX)]
    # A module whose forward ran several compiled frames: each frame after the first follows a graph break.
    frames_of: dict[int, set[str]] = {}
    recompiled: dict[str, int] = {}
    for i in regions:
        match = _COMPILED_ID.search(names[i][len(COMPILED_REGION_PREFIX) :])
        if match is None:
            continue
        frame, version = match.group(1), int(match.group(2))
        module = _nearest_module(tree, i)
        if module >= 0 and not cols["is_backward"][i]:
            frames_of.setdefault(module, set()).add(frame)
        if version > 0:
            recompiled[frame] = max(recompiled.get(frame, 0), version)
    broken = {m: f for m, f in frames_of.items() if len(f) > 1}
    compile_rows = _outermost(tree, lambda i: kinds[i] == _REGION and names[i].startswith(COMPILE_RANGES))
    compile_us = sum(_num(cols["cpu_us"][i]) for i in compile_rows)
    compiled_inside = int(dynamo.get("frames", 0) or 0)
    breaks = dict(dynamo.get("graph_breaks", {}) or {})
    if not broken and not compiled_inside and not breaks and not compile_us:
        return None
    parts = []
    if compiled_inside or compile_us:
        recompiles = f", recompiling frame{'s' if len(recompiled) != 1 else ''} {', '.join(sorted(recompiled))}" if recompiled else ""
        parts.append(f"{compiled_inside or len(compile_rows)} graph{'s' if (compiled_inside or len(compile_rows)) != 1 else ''} "
                     f"compiled inside the profiled block ({fmt.time_us(compile_us)} of compilation{recompiles})")  # fmt: skip
    if broken:
        worst = sorted(broken, key=lambda m: -len(broken[m]))
        parts.append("graph breaks split " + ", ".join(f"{_label(tree, m)} into {len(broken[m])} graphs" for m in worst[:3]))
    if breaks:
        reason = max(breaks.items(), key=lambda kv: kv[1])[0]
        parts.append(f"Dynamo counted {sum(breaks.values())} graph break{'s' if sum(breaks.values()) != 1 else ''} ({reason})")
    stake = compile_us if compile_us else sum(_num(cols["cpu_us"][m]) for m in broken)
    paths = [c.tree.paths[m] for m in sorted(broken, key=lambda m: -_num(cols["cpu_us"][m]))]
    paths += [c.tree.paths[c.layer_of[i]] for i in compile_rows if c.layer_of[i] >= 0]
    return Finding("torch_compile", stake, c.cpu_share(stake), list(dict.fromkeys(paths))[:MAX_PATHS],
                   "torch.compile: " + "; ".join(parts),
                   "Compile and warm up before profiling; stop recompiles by marking changing sizes dynamic "
                   "(torch._dynamo.mark_dynamic, or compile(dynamic=True)); remove graph breaks: TORCH_LOGS=graph_breaks "
                   "or torch._dynamo.explain(model)(*inputs) names each one and its line")  # fmt: skip


def _nearest_module(tree: Tree, row: int) -> int:
    kinds, parent = tree.columns["kind"], tree.parent_index
    r = parent[row]
    while r > 0 and kinds[r] != _MODULE:
        r = parent[r]
    return r if r > 0 else -1


def _main_device(tree: Tree) -> str | None:
    devices = tree.memory.get("devices", {}) if tree.memory else {}
    on_device = [d for d in devices if d != "cpu"]
    return on_device[0] if on_device else (next(iter(devices)) if devices else None)


def activations(c: Context) -> Finding | None:
    tree = c.tree
    device = _main_device(tree)
    if device is None or c.memory_limit is None:
        return None
    peak = tree.memory["devices"][device]
    parts = peak.get("breakdown")
    total = _num(peak.get("peak"))
    if not parts or total <= 0 or total < MEMORY_CONCERN * c.memory_limit:
        return None
    held = sum(b for cat, _, b, inside in parts if inside and cat == "activation")
    if held < ACTIVATION_SHARE * total:
        return None
    cols = tree.columns
    kept = cols["act_cuda_mem" if device != "cpu" else "act_cpu_mem"]
    kinds, parent = cols["kind"], tree.parent_index
    # Blocks: modules right under a root module (a model's layers, stages or transformer blocks).
    blocks = [i for i in range(1, len(tree)) if kinds[i] == _MODULE and parent[i] > 0 and kinds[parent[i]] == _MODULE
              and kinds[parent[parent[i]]] != _MODULE and not cols["is_backward"][i]]  # fmt: skip
    blocks.sort(key=lambda i: -_num(kept[i]))
    top = [i for i in blocks if _num(kept[i]) > 0][:3]
    where = ", ".join(f"{_label(tree, i)} keeps {fmt.nbytes(_num(kept[i]))}" for i in top)
    return Finding("activations", NAN, held / total, [c.tree.paths[i] for i in top],
                   f"Activations are {_pct(held / total)} of the {device} peak ({fmt.nbytes(held)} of {fmt.nbytes(total)}, "
                   f"{_pct(total / c.memory_limit)} of the device's memory)" + (f"; {where}" if where else ""),
                   "Checkpoint the blocks that keep the most (torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)): "
                   "their activations are recomputed in backward instead of kept; or a smaller batch with gradient "
                   "accumulation, bf16 autocast")  # fmt: skip


def low_mfu(c: Context) -> Finding | None:
    tree = c.tree
    cols = tree.columns
    if not tree.has_flops:
        return None
    time = "cuda_us" if tree.has_cuda and _num(cols["cuda_us"][0]) > 0 else "cpu_us"
    total_t, total_f = _num(cols[time][0]), _num(cols["flops"][0])
    if total_t <= 0 or total_f <= 0:
        return None
    rate = total_f / total_t  # FLOPs per µs of the whole model
    kinds, parent = cols["kind"], tree.parent_index
    has_child_module = [False] * len(tree)
    for i in range(1, len(tree)):
        if kinds[i] == _MODULE:
            p = parent[i]
            while p > 0 and kinds[p] != _MODULE:
                p = parent[p]
            has_child_module[p] = True
    layers: dict[str, list[Any]] = {}  # one entry per layer over every step: [µs, FLOPs, first row]
    for i in range(1, len(tree)):
        if kinds[i] != _MODULE or has_child_module[i] or _num(cols["macs"][i]) <= 0:
            continue
        entry = layers.setdefault(layer_key(tree, i), [0.0, 0.0, i])
        entry[0] += _num(cols[time][i])
        entry[1] += _num(cols["flops"][i])
    slow = []
    for t, f, i in layers.values():
        if t <= 0 or t < LOW_MFU_TIME_SHARE * total_t or f < LOW_MFU_FLOP_SHARE * total_f or f / t >= LOW_MFU_RATIO * rate:
            continue
        slow.append((i, t - f / rate, f / t, t))
    if not slow:
        return None
    slow.sort(key=lambda x: -x[1])
    stake = sum(x[1] for x in slow)
    peak = c.summary.get("peak_flops", {}).get("flops_per_s") if isinstance(c.summary.get("peak_flops"), dict) else None
    def mfu_of(r: float) -> str:
        return f", MFU {_pct(r * 1e6 / peak)}" if isinstance(peak, (int, float)) and peak > 0 else ""
    parts = [f"{_label(tree, i)} at {fmt.rate(r * 1e6)}{mfu_of(r)}, {_pct(t / total_t)} of the time" for i, _, r, t in slow[:3]]
    share = stake / total_t
    return Finding("low_mfu", stake, share, [c.tree.paths[x[0]] for x in slow[:MAX_PATHS]],
                   f"{len(slow)} layer{'s' if len(slow) != 1 else ''} with matmuls or convolutions run far below the model's "
                   f"{fmt.rate(rate * 1e6)}: " + "; ".join(parts),
                   "Check their shapes and dtypes: dimensions that are multiples of 8 (16 for fp8) or 64, bf16 or TF32 instead "
                   "of fp32 (torch.set_float32_matmul_precision('high')), channels_last for convolutions, a larger batch; a "
                   "layer can also be memory-bound (few MACs per byte)")  # fmt: skip


def memory_limit(c: Context) -> Finding | None:
    tree = c.tree
    device = _main_device(tree)
    if device is None or c.memory_limit is None:
        return None
    peak = tree.memory["devices"][device]
    total = _num(peak.get("peak"))
    if total < MEMORY_LIMIT_SHARE * c.memory_limit:
        return None
    layer = peak.get("layer_row")
    where = tree.paths[layer if layer is not None else peak["row"]]
    return Finding("memory_limit", NAN, total / c.memory_limit, [where],
                   f"The {device} memory peak is {fmt.nbytes(total)}, {_pct(total / c.memory_limit)} of the device's "
                   f"{fmt.nbytes(c.memory_limit)}, in {where} ({peak.get('phase')})",
                   "Lower the peak before it runs out: activation checkpointing of the largest blocks, a smaller batch with "
                   "gradient accumulation, bf16, an optimizer with less state, zero_grad(set_to_none=True); "
                   "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation (prof.memory_breakdown())")  # fmt: skip


def python_overhead(c: Context) -> Finding | None:
    tree = c.tree
    cols = tree.columns
    names, kinds = cols["name"], cols["kind"]
    steps = [i for i in range(1, len(tree)) if kinds[i] == _REGION and names[i].startswith(STEP_PREFIX)]
    idle = _num(cols["self_cpu_us"][0]) + sum(_num(cols["self_cpu_us"][i]) for i in steps)
    wall = c.summary.get("wall_us", NAN)
    if c.cpu_total <= 0:
        return None  # nothing was recorded (torch dropped the session): no time to place, not idle time
    if not steps and not is_missing(wall):
        idle += max(0.0, wall - c.cpu_total)  # between the block's top-level ranges
    if not is_missing(wall) and wall > 0:
        idle = min(idle, wall)  # (host time in no range can't be more than the block lasted)
    base = max(c.cpu_total, c.wall)
    if base <= 0 or idle / base < OVERHEAD_SHARE or idle < OVERHEAD_MIN_US:
        return None
    return Finding("python_overhead", idle, idle / base, [c.tree.paths[i] for i in [0, *steps][:MAX_PATHS]],
                   f"{_pct(idle / base)} of the run ({fmt.time_us(idle)}) is in no op and no layer: Python between the "
                   "ops (the loop's bookkeeping, logging, data handling in Python) or the host waiting",
                   "Find the lines with stack=True (or py-spy, pyinstrument); move per-step bookkeeping out of the loop, "
                   "batch small tensor operations; torch.compile removes the Python overhead inside the model")  # fmt: skip


def optimizer_step(c: Context) -> Finding | None:
    tree = c.tree
    cols = tree.columns
    names, kinds, depth = cols["name"], cols["kind"], cols["depth"]
    metric = "cuda_us" if c.summary.get("hot_metric") == "cuda_us" else "cpu_us"
    # The outermost steps only (a step run inside another's closure counts once): rows in
    # pre-order, a counted step's subtree (the rows after it, deeper than it) skipped.
    steps: list[int] = []
    skip_below = -1
    for i in range(1, len(tree)):
        if skip_below >= 0 and depth[i] > skip_below:
            continue
        skip_below = -1
        if kinds[i] == _REGION and names[i].startswith(OPTIMIZER_STEP_PREFIX):
            steps.append(i)
            skip_below = depth[i]
    spent = sum(_num(cols[metric][i]) for i in steps)
    share = c.cpu_share(spent) if metric == "cpu_us" else c.wall_share(spent)
    if not steps or not share >= OPTIMIZER_STEP_SHARE or optimizer_not_foreach(c) is not None:
        return None
    calls = sum(int(cols["calls"][i]) for i in steps)
    classes = sorted({names[i][len(OPTIMIZER_STEP_PREFIX) :].split(".", 1)[0] for i in steps})
    return Finding("optimizer_step", spent, share, [tree.paths[r] for r in _distinct(tree, steps)][:MAX_PATHS],
                   f"the optimizer step{'s' if calls != 1 else ''} ({', '.join(classes)}) take {_pct(share)} of the run "
                   f"({fmt.time_us(spent)} in {calls} call{'s' if calls != 1 else ''})",
                   "a fused or foreach step (torch.optim." + classes[0] + "(..., fused=True) or foreach=True), fewer parameter "
                   "groups or parameters to update, a lighter optimizer, or a compiled step (torch.compile(opt.step))")  # fmt: skip


#: Every rule, in the order they are tried (findings are then ranked by time at stake).
RULES: tuple[Callable[[Context], Finding | None], ...] = (
    data_loading, host_sync, gpu_idle, exposed_communication, optimizer_not_foreach, optimizer_step, torch_compile,
    activations, low_mfu, memory_limit, python_overhead,
)  # fmt: skip
#: The rules' names, as ``prof.insights().rule`` spells them.
RULE_NAMES: tuple[str, ...] = tuple(rule.__name__ for rule in RULES)


def find(tree: Tree, summary: Summary, meta: dict[str, Any], memory_limit: float | None = None) -> list[Finding]:
    """Every rule's finding on one profile, ranked: time at stake first (largest first), then the
    memory findings by share. ``memory_limit`` (bytes) overrides the device's memory as the
    profile reports it (``deviceProperties``, or the host's memory for a CPU run)."""
    if not len(tree):
        return []
    if memory_limit is None:
        device = _main_device(tree)
        if device is not None and device != "cpu":
            memory_limit = device_memory(meta)
        elif device == "cpu":
            host = meta.get("host_memory")
            memory_limit = float(host) if isinstance(host, (int, float)) and host > 0 else None
    context = Context(tree, summary, meta, memory_limit)
    found = []
    for rule in RULES:
        try:
            finding = rule(context)
        except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError):  # a rule that cannot read this profile
            finding = None
        if finding is not None:
            found.append(finding)
    return sorted(found, key=lambda f: (math.isnan(f.at_stake_us), -(0.0 if math.isnan(f.at_stake_us) else f.at_stake_us),
                                        -(0.0 if math.isnan(f.share) else f.share)))  # fmt: skip


def insights_frame(findings: list[Finding]) -> pd.DataFrame:
    """The findings as ``prof.insights()`` returns them: one row per finding, the columns of
    :data:`~torchprof._vocab.INSIGHT_COLUMNS`, ranked (index 0 first)."""
    import pandas as pd

    return pd.DataFrame([[getattr(f, c) for c in INSIGHT_COLUMNS] for f in findings], columns=list(INSIGHT_COLUMNS))


def insights_payload(findings: list[Finding]) -> list[dict[str, Any]]:
    """The findings for the widget (an Insights view): one dict per finding with the columns of
    :data:`~torchprof._vocab.INSIGHT_COLUMNS` (NaN as None)."""
    return [{c: (None if isinstance(v := getattr(f, c), float) and math.isnan(v) else v) for c in INSIGHT_COLUMNS} for f in findings]
