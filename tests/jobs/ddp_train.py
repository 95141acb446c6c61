"""A real DistributedDataParallel training job for the tests: each rank profiles its own steps.

Run by ``tests/test_distributed.py`` through ``python -m torch.distributed.run --standalone
--nproc_per_node=2 ddp_train.py OUT`` (gloo on the CPU); writes ``OUT/rank<r>.json.gz`` (the
rank's chrome trace) and ``OUT/rank<r>.profile.json`` (its saved profile) and, from rank 0,
``OUT/facts.json`` (the true parameter count).

With ``--plain`` instead of ``OUT`` it only trains (the process group is made inside, and left
open), for ``torchrun ... -m torchprof ddp_train.py --plain`` to profile every rank.
"""

import json
import os
import sys

if sys.platform == "linux":  # die with torchrun even if it is killed (each rank has its own session)
    import ctypes
    import signal

    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

import torch
import torch.distributed as dist
from torch import nn

import torchprof


def make_model() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 8 * 8, 16), nn.ReLU(),
                         nn.Linear(16, 4))  # fmt: skip


def main(out: str) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = make_model()
    # Two buckets (10 kB each at most): Linear 3's weight fills the first, Conv2d 0 is the second.
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.01)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 4, (4,))

    def step() -> None:
        opt.zero_grad()
        nn.functional.cross_entropy(ddp(x), y).backward()
        opt.step()

    step()  # warm-up, unprofiled
    if out == "--plain":
        for _ in range(2):
            step()
        return
    with torchprof.Profiler() as prof:
        for _ in range(2):
            step()
    prof.export_chrome_trace(os.path.join(out, f"rank{rank}.json.gz"))
    prof.save(os.path.join(out, f"rank{rank}.profile.json"))
    if rank == 0:
        with open(os.path.join(out, "facts.json"), "w") as f:
            json.dump({"params": sum(p.numel() for p in model.parameters()), "world_size": dist.get_world_size()}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
