"""Facts of a run that its events do not hold, read once when the Profiler starts and once when it
stops: the accelerators (name, memory) and the data type the model computed in (for MFU), the
host's memory, the CUDA caching allocator's own figures (for the memory peak), and Dynamo's
counters (graphs compiled and graph breaks inside the block). Each is a cheap query; none
initialises CUDA or imports ``torch._dynamo`` that the user's code did not."""

from __future__ import annotations

import os
import sys
from collections import Counter
from collections.abc import Mapping
from typing import Any

from .module_graph import modules_below

#: What :func:`dynamo_delta` reads of Dynamo's counters: each category, and the one key it reads
#: there (None: every key). Copying only these keeps the copy at each start and stop small:
#: Dynamo and Inductor keep many more.
DYNAMO_KEYS: dict[str, str | None] = {"frames": "total", "graph_break": None, "stats": "unique_graphs"}


def _dynamo_counters() -> dict[str, dict[str, int]]:
    """A copy of what :func:`dynamo_delta` reads of ``torch._dynamo.utils.counters`` (empty where
    Dynamo was never imported)."""
    utils = sys.modules.get("torch._dynamo.utils")
    counters = getattr(utils, "counters", None)
    if not isinstance(counters, dict):
        return {}
    out: dict[str, dict[str, int]] = {}
    try:
        for category, key in DYNAMO_KEYS.items():
            found = counters.get(category)
            if found is None:
                continue
            if key is None:
                out[category] = {str(k): int(v) for k, v in found.items()}
            else:
                out[category] = {key: int(found.get(key, 0))}
    except (AttributeError, TypeError, ValueError, RuntimeError):  # another thread changed them: skip
        return {}
    return out


def _cuda_devices() -> list[int]:
    """Indices of the CUDA devices the process has initialised (none when CUDA was never used)."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is None or not cuda.is_initialized() or not cuda.is_available():  # (the cheap question first)
            return []
        return list(range(cuda.device_count()))
    except (RuntimeError, AssertionError):
        return []


def _allocator() -> dict[str, dict[str, int]]:
    """Per initialised CUDA device: bytes allocated now and the allocator's high-water mark."""
    import torch

    out: dict[str, dict[str, int]] = {}
    for index in _cuda_devices():
        try:
            out[f"cuda:{index}"] = {"allocated": int(torch.cuda.memory_allocated(index)),
                                    "max": int(torch.cuda.max_memory_allocated(index))}  # fmt: skip
        except (RuntimeError, AssertionError):
            continue
    return out


def host_memory() -> int | None:
    """The machine's physical memory in bytes, where the OS says (asked once)."""
    if not _HOST_MEMORY:
        try:
            _HOST_MEMORY.append(int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")))
        except (AttributeError, ValueError, OSError):
            _HOST_MEMORY.append(None)
    return _HOST_MEMORY[0]


_HOST_MEMORY: list[int | None] = []


def device_properties() -> list[dict[str, Any]]:
    """``deviceProperties`` as kineto writes them into a trace (``id``, ``name``,
    ``totalGlobalMem``, ...), for every visible CUDA (or ROCm) device; empty without one."""
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    out: list[dict[str, Any]] = []
    try:
        if cuda is None or not cuda.is_available():
            return out
        for index in range(cuda.device_count()):
            p = cuda.get_device_properties(index)
            out.append({"id": index, "name": str(p.name), "totalGlobalMem": int(p.total_memory),
                        "computeMajor": int(getattr(p, "major", 0)), "computeMinor": int(getattr(p, "minor", 0)),
                        "numSms": int(getattr(p, "multi_processor_count", 0))})  # fmt: skip
    except (RuntimeError, AssertionError, AttributeError):
        return out
    return out


def compute_dtype(roots: list[tuple[Any, str]], autocast: list[Any], on_device: bool,
                  counted: Mapping[int, dict[Any, int]] | None = None) -> str | None:  # fmt: skip
    """The data type the profiled modules computed in: autocast's where any root call ran under
    it, else the floating dtype holding most of the roots' parameter bytes; float32 counts as
    ``tf32`` on a device where float32 matmuls may use TF32 (``torch.get_float32_matmul_precision``
    is not ``highest``). None without floating parameters. ``counted``: the bytes by dtype of
    roots whose parameters were counted already (by id), taken where there is one root."""
    import torch

    names = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32", torch.float64: "fp64"}
    for dtype in autocast:
        if dtype in names:
            return names[dtype]
    held: dict[str, int] = {}
    seen: set[int] = set()
    known = counted.get(id(roots[0][0])) if counted and len(roots) == 1 else None
    if known is not None:
        for dtype, nbytes in known.items():
            if dtype in names:
                held[names[dtype]] = held.get(names[dtype], 0) + nbytes
        roots = []
    for module, _ in roots:
        try:
            params = [p for m in modules_below(module) for p in m._parameters.values() if p is not None]  # (no recursive generators)
            for p in params:
                if id(p) in seen or p.dtype not in names:
                    continue
                seen.add(id(p))
                name = names[p.dtype]
                held[name] = held.get(name, 0) + p.numel() * p.element_size()
        except (RuntimeError, AttributeError, TypeError):
            continue
    if not held:
        return None
    dtype = max(held, key=lambda name: held[name])  # the first of equals, as Counter.most_common
    if dtype == "fp32" and on_device and torch.get_float32_matmul_precision() != "highest":
        return "tf32"
    return dtype


class RunFacts:
    """What :func:`start` saw when the block began, to compare with the end."""

    def __init__(self) -> None:
        self._counters = _dynamo_counters()
        self._allocator = _allocator()

    def finish(self, roots: list[tuple[Any, str]], autocast: list[Any], cuda: bool,
               counted: Mapping[int, dict[Any, int]] | None = None) -> dict[str, Any]:  # fmt: skip
        """The facts for the recording's metadata, keyed as traces key them where they have them."""
        out: dict[str, Any] = {}
        props = device_properties() if cuda else []
        if props:
            out["deviceProperties"] = props
        try:
            dtype = compute_dtype(roots, autocast, bool(props), counted)
        except Exception:  # noqa: BLE001 - a facts query must never lose the profile
            dtype = None
        if dtype is not None:
            out["compute_dtype"] = dtype
        memory = host_memory()
        if memory:
            out["host_memory"] = memory
        after = _allocator()
        allocator = {}
        for device, end in after.items():
            start = self._allocator.get(device)
            if start is not None:
                allocator[device] = {"allocated_start": start["allocated"], "max_start": start["max"], "max_end": end["max"]}
        if allocator:
            out["cuda_allocator"] = allocator
        dynamo = dynamo_delta(self._counters, _dynamo_counters())
        if dynamo:
            out["dynamo"] = dynamo
        return out


def dynamo_delta(before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]) -> dict[str, Any]:
    """What Dynamo counted inside the block: ``frames`` compiled, ``graph_breaks`` by reason (its
    first line) and ``unique_graphs``; empty when it counted nothing."""
    if before == after:  # the common case, in one comparison
        return {}

    def grown(category: str) -> Counter[str]:
        diff = Counter(after.get(category, {}))
        diff.subtract(before.get(category, {}))
        return Counter({k: v for k, v in diff.items() if v > 0})

    frames = grown("frames").get("total", 0)
    breaks: Counter[str] = Counter()
    for reason, n in grown("graph_break").items():
        breaks[reason.strip().splitlines()[0] if reason.strip() else "graph break"] += n
    graphs = grown("stats").get("unique_graphs", 0)
    out: dict[str, Any] = {}
    if frames:
        out["frames"] = frames
    if breaks:
        out["graph_breaks"] = dict(breaks)
    if graphs:
        out["unique_graphs"] = graphs
    return out
