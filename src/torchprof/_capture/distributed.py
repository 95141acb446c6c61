"""The rank of the running process in a distributed job, as torch.distributed or torchrun tell it."""

from __future__ import annotations

import os
from typing import Any


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
