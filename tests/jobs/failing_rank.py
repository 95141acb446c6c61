"""A 2-rank DistributedDataParallel training whose rank 1 fails, for ``tests/test_faults.py``:
``python -m torch.distributed.run --standalone --nproc_per_node=2 [-m torchprof] failing_rank.py MODE``.

MODE says how rank 1 fails:

- ``mid-step``: it raises in its second step's forward, while rank 0 waits for it in the first
  backward all-reduce of that step (a collective rank 1 never joins);
- ``after``: it raises after the steps (no collective pending);
- ``kill-mid``: it is SIGKILLed in its second step's forward;
- ``kill-after``: it is SIGKILLed just after its script ends (while torchprof reports).
"""

import os
import signal
import sys
import threading

if sys.platform == "linux":  # die with torchrun even if it is killed (each rank has its own session)
    import ctypes

    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

import torch
import torch.distributed as dist
from torch import nn


class PlantedFailure(Exception):
    pass


def main(mode: str) -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    x = torch.randn(4, 8)
    for step in range(3):
        if rank == 1 and step == 1 and mode == "mid-step":
            raise PlantedFailure("rank 1 failed in step 1's forward")
        if rank == 1 and step == 1 and mode == "kill-mid":
            os.kill(os.getpid(), signal.SIGKILL)
        opt.zero_grad()
        ddp(x).sum().backward()
        opt.step()
    if rank == 1 and mode == "after":
        raise PlantedFailure("rank 1 failed after its steps")
    if rank == 1 and mode == "kill-after":
        threading.Timer(0.01, os.kill, (os.getpid(), signal.SIGKILL)).start()


if __name__ == "__main__":
    main(sys.argv[1])
