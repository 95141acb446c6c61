"""A real FSDP2 (``fully_shard``) training job on the CPU (gloo) for the tests, profiled from
outside: ``torchrun --nproc_per_node=2 -m torchprof --out DIR fsdp_train.py``. Each layer with
weights is its own FSDP unit (parameters all-gathered before its forward and backward, gradients
reduce-scattered after). The process group is made inside the profiled run and destroyed before
it ends, so rank 0 waits for the other ranks' trace files, not on a barrier."""

import sys

if sys.platform == "linux":  # die with torchrun even if it is killed (each rank has its own session)
    import ctypes
    import signal

    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

import torch
import torch.distributed as dist
from ddp_train import make_model
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard


def main() -> None:
    dist.init_process_group("gloo")
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    torch.manual_seed(0)
    model = make_model()
    for i in (0, 3, 5):
        fully_shard(model[i], mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(4, 3, 8, 8), torch.randint(0, 4, (4,))
    for _ in range(3):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
