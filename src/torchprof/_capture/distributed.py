"""What the running process knows about its distributed job: its rank (as torch.distributed or
torchrun tell it) and how each ``DistributedDataParallel`` module buckets its gradients."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from .module_graph import named_modules

#: ``_get_zeros_like_grad_buckets`` allocates a zero copy of every gradient bucket: read the
#: buckets that way only for models whose gradients take at most this many bytes.
ZEROS_LIKE_LIMIT = 64 << 20


def distributed_info() -> dict[str, Any] | None:
    """``{"backend", "rank", "world_size"}`` of the default process group, read when asked (at the
    end of a profiled block): torch.profiler writes ``distributedInfo`` into its trace only when
    the group existed before profiling started, so a script that calls ``init_process_group``
    inside the block would otherwise lose its rank. Without a group, the rank ``torchrun`` gave
    the process (``RANK``, ``WORLD_SIZE``), with no backend; None outside a distributed job."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return {"backend": str(dist.get_backend()), "rank": dist.get_rank(), "world_size": dist.get_world_size()}
    except (ImportError, RuntimeError, ValueError):  # a group torn down by another thread, a build without c10d
        pass
    rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if rank is not None and rank.isdigit() and world is not None and world.isdigit():
        return {"backend": None, "rank": int(rank), "world_size": int(world)}
    return None


def ddp_buckets(roots: Iterable[tuple[Any, str]]) -> list[dict[str, Any]]:
    """How every ``DistributedDataParallel`` module among the profiled roots (and below them)
    buckets its gradients, for the tree to split each bucket's all-reduce over its layers
    (:mod:`torchprof._tree.comm`).

    One dict per DDP module: ``module`` (its path), ``params`` (``[module path, bytes]`` of each
    parameter the reducer holds, in the reducer's order) and ``maps``: the bucket layouts the
    reducer used, as lists of parameter indices per bucket in the order it all-reduces them.
    The layout after the reducer rebuilt its buckets in the order gradients became ready (its
    second iteration; read from DDP's logging data, or from the buckets themselves for small
    models), then the layout it started with (recomputed as DDP computes it, and kept only when
    its bucket sizes are the ones DDP logged). Which one a backward pass used is decided there,
    from the order its gradients became ready. Never raises: a DDP whose buckets cannot be read
    is left out (its all-reduces then stay where they ran)."""
    try:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        if not dist.is_available() or not dist.is_initialized():
            return []  # a DDP module needs a process group: none, so none to find (no walk of the model)
    except ImportError:  # pragma: no cover - a torch build without distributed
        return []
    out: list[dict[str, Any]] = []
    seen: set[int] = set()
    for root, label in roots:
        for name, module in named_modules(root):
            if isinstance(module, DistributedDataParallel) and id(module) not in seen:
                seen.add(id(module))
                path = f"{label}.{name}" if name else label
                try:
                    found = _buckets_of(module, path)
                except Exception:  # noqa: BLE001 - DDP's internals differ between torch versions: no split, no error
                    found = None
                if found is not None:
                    out.append(found)
    return out


def _buckets_of(ddp: Any, path: str) -> dict[str, Any] | None:
    params, expect_sparse = ddp._build_params_for_reducer()
    owner: dict[int, str] = {}
    for name, module in ddp.module.named_modules():
        for p in module.parameters(recurse=False):
            owner.setdefault(id(p), f"{path}.module.{name}" if name else f"{path}.module")
    table: list[tuple[str, int]] = [(owner.get(id(p), f"{path}.module"), int(p.numel() * p.element_size())) for p in params]
    logged = ddp._get_ddp_logging_data()
    maps: list[list[list[int]]] = []
    rebuilt = _index_lists(logged.get("rebuilt_per_bucket_param_indices"))
    if rebuilt is None and getattr(ddp, "_has_rebuilt_buckets", False) and sum(b for _, b in table) <= ZEROS_LIKE_LIMIT:
        # Rebuilt in this process's last forward: DDP logs the new layout only at its next one.
        index = {id(p): i for i, p in enumerate(params)}
        rebuilt = [[index[id(p)] for p in bucket.parameters()] for bucket in ddp.reducer._get_zeros_like_grad_buckets()]
    if rebuilt:
        maps.append(rebuilt)
    initial = _initial_layout(ddp, params, expect_sparse, table, logged.get("bucket_sizes"))
    if initial is not None and (rebuilt is None or not _same_buckets(initial, rebuilt)):
        maps.append(initial)
    return {"module": path, "params": [list(p) for p in table], "maps": maps} if maps else None


def _same_buckets(a: list[list[int]], b: list[list[int]]) -> bool:
    """The same parameters in the same buckets (the order inside a bucket does not matter here)."""
    return [sorted(x) for x in a] == [sorted(x) for x in b]


def _index_lists(text: Any) -> list[list[int]] | None:
    """DDP's logged ``"5 4 3 2, 1 0"``: parameter indices per bucket."""
    if not isinstance(text, str) or not text.strip():
        return None
    return [[int(x) for x in part.split()] for part in text.split(",")]


def _initial_layout(ddp: Any, params: list[Any], expect_sparse: list[bool], table: list[tuple[str, int]], logged: Any) -> list[list[int]] | None:
    """The buckets DDP made at construction (before any rebuild), recomputed as DDP does, kept
    only when their byte sizes are the ``bucket_sizes`` DDP logged."""
    import torch.distributed as dist

    config = getattr(ddp, "_bucket_config", None)
    if config is not None:
        limits, _ = config.compute_bucket_size_limits(static_graph=bool(ddp.static_graph),
                                                      find_unused_parameters=bool(ddp.find_unused_parameters))  # fmt: skip
    else:  # torch before the bucket config: the 1 MB first bucket, then the cap
        limits = [getattr(dist, "_DEFAULT_FIRST_BUCKET_BYTES"), int(ddp.bucket_bytes_cap)]  # noqa: B009 - private, not in its stubs
    indices, _ = getattr(dist, "_compute_bucket_assignment_by_size")(params, limits, expect_sparse)  # noqa: B009
    layout = [list(b) for b in reversed(indices)]
    sizes = [sum(table[i][1] for i in bucket) for bucket in layout]
    wanted = [int(x) for x in str(logged).replace(",", " ").split()] if logged is not None else None
    return layout if wanted is not None and sorted(sizes) == sorted(wanted) else None


def checked_ddp_buckets(value: Any) -> list[dict[str, Any]]:
    """What :func:`ddp_buckets` wrote, read back from a trace; ``ValueError`` saying what is wrong."""
    if not isinstance(value, list):
        raise ValueError(f"must be a list, not {type(value).__name__}")
    out = []
    for entry in value:
        if not isinstance(entry, dict) or not isinstance(entry.get("module"), str):
            raise ValueError("each entry must be an object with a module path")
        params = entry.get("params")
        if not isinstance(params, list) or not all(
                isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) and type(p[1]) is int and p[1] >= 0
                for p in params):  # fmt: skip
            raise ValueError(f"{entry['module']}: params must be [module path, bytes] pairs")
        maps = entry.get("maps")
        if not isinstance(maps, list) or not all(
                isinstance(layout, list) and all(isinstance(b, list) and all(type(i) is int and 0 <= i < len(params) for i in b)
                                                 for b in layout)
                for layout in maps):  # fmt: skip
            raise ValueError(f"{entry['module']}: maps must be lists of buckets of parameter indices")
        out.append({"module": entry["module"], "params": [list(p) for p in params], "maps": maps})
    return out
