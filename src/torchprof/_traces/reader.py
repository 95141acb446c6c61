"""Reading chrome-trace JSON written by ``torch.profiler`` (or by torchprof) into plain records."""

from __future__ import annotations

import os
import re
from typing import Any

from .._files import TraceError, read_json
from .._records import CompiledGraph, EventColumns, ModuleInfo, Recording, module_range_name, parse_module_range
from .._vocab import (
    CATEGORY_KIND,
    COMPILED_REGION_PREFIX,
    CPU_DEVICE_TYPES,
    DEVICE_LINKED_KINDS,
    MEMORY_EVENT,
    MODULE_PREFIX,
    TRACE_META_KEY,
    EventKind,
)

OP, REGION, MODULE, DEVICE, MEMORY, IGNORED, PYFRAME = map(int, (
    EventKind.OP, EventKind.REGION, EventKind.MODULE, EventKind.DEVICE, EventKind.MEMORY, EventKind.IGNORED,
    EventKind.PYFRAME))  # fmt: skip
_LINKED = frozenset(int(k) for k in DEVICE_LINKED_KINDS)


_TORCH_MODULE = re.compile(r"^nn\.Module: (.+?)(?:_\d+)?$")


def columns_from_events(events: list[Any]) -> tuple[EventColumns, dict[str, Any]]:
    """Events of a chrome trace, column-wise; also the facts found on the way (trace span)."""
    cols = EventColumns()
    assert cols.seq is not None
    names, kinds, tids, starts, ends = cols.name, cols.kind, cols.tid, cols.start, cols.end
    seqs, fwds, exts, links, corrs, nbytes, on_cuda, mem_total = (
        cols.seq, cols.fwd_tid, cols.ext_id, cols.link, cols.corr, cols.nbytes, cols.on_cuda, cols.mem_total)  # fmt: skip
    args_of: list[dict[str, Any]] = []
    facts: dict[str, Any] = {}
    torch_modules: list[int] = []
    has_our_modules = False
    get_kind = CATEGORY_KIND.get
    for e in events:
        if not isinstance(e, dict):
            continue
        ph = e.get("ph")
        cat = e.get("cat")
        if ph == "X":
            kind = get_kind(cat, IGNORED) if isinstance(cat, str) else IGNORED
            name = e.get("name", "")
            if kind == IGNORED:
                if cat == "python_function" and isinstance(name, str):
                    if name.startswith(MODULE_PREFIX):
                        kind = MODULE
                        torch_modules.append(len(names))
                    else:
                        kind = PYFRAME
                elif cat == "Trace":
                    facts["span"] = (e.get("ts"), e.get("dur"))
                    continue
                else:
                    continue
            elif kind == OP and name.startswith(MODULE_PREFIX) and parse_module_range(name) is not None:
                kind = MODULE
                has_our_modules = True
            elif kind == OP and name.startswith(COMPILED_REGION_PREFIX):
                kind = REGION  # a compiled frame, as the live capture sees it
            try:
                ts = float(e["ts"])
                dur = float(e.get("dur", 0.0))
            except (KeyError, TypeError, ValueError):
                continue
            args = e.get("args") or {}
        elif ph == "i" and cat == "cpu_instant_event" and e.get("name") == MEMORY_EVENT:
            kind = MEMORY
            name = MEMORY_EVENT
            try:
                ts = float(e["ts"])
            except (KeyError, TypeError, ValueError):
                continue
            dur = 0.0
            args = e.get("args") or {}
        else:
            continue
        start = round(ts * 1000.0)
        names.append(name)
        kinds.append(kind)
        tids.append((e.get("pid", 0), e.get("tid", 0)))
        starts.append(start)
        ends.append(start + round(dur * 1000.0))
        seqs.append(_int(args.get("Sequence number"), -1))
        fwds.append(_int(args.get("Fwd thread id"), 0))
        ext = _int(args.get("External id"), 0)
        exts.append(ext)
        links.append(ext if kind in _LINKED else 0)
        corrs.append(_int(args.get("correlation"), 0) if kind in _LINKED else 0)
        if kind == MEMORY:
            nbytes.append(_int(args.get("Bytes"), 0))
            on_cuda.append(_int(args.get("Device Type"), 0) not in CPU_DEVICE_TYPES)
            mem_total.append(_int(args.get("Total Allocated"), 0))
        else:
            nbytes.append(0)
            on_cuda.append(False)
            mem_total.append(0)
        args_of.append(args)

    if torch_modules:
        if has_our_modules:
            for i in torch_modules:
                kinds[i] = IGNORED
        else:
            _name_torch_modules(cols, torch_modules)

    def inputs(i: int) -> tuple[list, list] | None:
        args = args_of[i]
        dims = args.get("Input Dims")
        if dims is None:
            return None
        return dims, _concrete(args.get("Concrete Inputs")) or [None] * len(dims)

    cols.inputs = inputs
    return cols, facts


def _name_torch_modules(cols: EventColumns, idx: list[int]) -> None:
    """torch's python tracer names module calls ``nn.Module: Conv2d_3`` (class and an id) with no
    path: give them paths from how they nest (``ResNet.Conv2d_3``), in torchprof's range format."""
    idx = sorted(idx, key=lambda i: (cols.tid[i], cols.start[i], -cols.end[i]))
    stacks: dict[Any, list[tuple[int, str]]] = {}
    for i in idx:
        stack = stacks.setdefault(cols.tid[i], [])
        while stack and cols.end[stack[-1][0]] <= cols.start[i]:
            stack.pop()
        raw = cols.name[i][len(MODULE_PREFIX) :]
        m = _TORCH_MODULE.match(cols.name[i])
        type_name = m.group(1) if m else raw
        path = f"{stack[-1][1]}.{raw}" if stack else raw
        cols.name[i] = module_range_name(path, type_name)
        stack.append((i, path))


def _int(value: Any, default: int) -> int:
    if value is None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _concrete(values: Any) -> list[Any] | None:
    """Concrete Inputs are strings in a trace (``"[1, 1]"``, ``"False"``, ``""``): parse them."""
    if not isinstance(values, list):
        return None
    out: list[Any] = []
    for v in values:
        if not isinstance(v, str):
            out.append(v)
            continue
        s = v.strip()
        if s == "":
            out.append(None)
        elif s in ("True", "False"):
            out.append(s == "True")
        elif s.startswith("[") and s.endswith("]"):
            inner = s[1:-1].strip()
            try:
                out.append([_scalar(x.strip()) for x in inner.split(",")] if inner else [])
            except ValueError:
                out.append(None)
        else:
            try:
                out.append(_scalar(s))
            except ValueError:
                out.append(s)
    return out


def _scalar(s: str) -> Any:
    if s in ("True", "False"):
        return s == "True"
    try:
        return int(s)
    except ValueError:
        return float(s)


def read_trace(path: str | os.PathLike[str]) -> Recording:
    """A trace file as a :class:`Recording` (one cycle of events plus torchprof's metadata)."""
    data = read_json(path)
    if isinstance(data, list):
        events, top = data, {}
    elif isinstance(data, dict) and isinstance(data.get("traceEvents"), list):
        events, top = data["traceEvents"], data
    else:
        raise TraceError(f"{os.fspath(path)} has no 'traceEvents' list: not a torch.profiler chrome trace")
    cols, facts = columns_from_events(events)
    if len(cols) == 0:
        raise TraceError(f"{os.fspath(path)} holds no profiler events (no operators, ranges or kernels)")
    block = top.get(TRACE_META_KEY)
    meta_block: dict[str, Any] = block if isinstance(block, dict) else {}
    modules: dict[str, ModuleInfo] = {}
    for mpath, info in (meta_block.get("modules") or {}).items():
        try:
            modules[mpath] = ModuleInfo.from_json(info)
        except (TypeError, ValueError, IndexError):
            continue
    compiled: dict[str, CompiledGraph] = {}
    for key, graph in (meta_block.get("compiled") or {}).items():
        try:
            compiled[str(key)] = CompiledGraph.from_json(graph)
        except (TypeError, ValueError, KeyError, IndexError):
            continue
    wall = meta_block.get("wall_us")
    if wall is None:
        span = facts.get("span")
        if span and span[1]:
            wall = float(span[1])
        else:
            host = [i for i, k in enumerate(cols.kind) if k != IGNORED]
            wall = (max(cols.end[i] for i in host) - min(cols.start[i] for i in host)) / 1000.0 if host else None
    label = meta_block.get("label") or _stem(os.fspath(path))
    meta: dict[str, Any] = {"source": os.fspath(path)}
    if isinstance(meta_block.get("recorded"), dict):
        meta["recorded"] = meta_block["recorded"]
    for key in ("deviceProperties", "distributedInfo", "traceName"):
        if key in top:
            meta[key] = top[key]
    cap = Recording(cycles=[cols], modules=modules, wall_us=wall, label=str(label), meta=meta, compiled=compiled)
    cap.meta["has_device"] = any(k == DEVICE for k in cols.kind)
    cap.meta["has_memory"] = any(k == MEMORY for k in cols.kind)
    return cap


def _stem(path: str) -> str:
    base = os.path.basename(path)
    for suffix in (".json.gz", ".json", ".gz"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base
