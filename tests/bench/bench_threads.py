"""Cost of torch's profile_all_threads (torchprof's default) on the profiled thread: the CPU time
of one training step under a Profiler that records every thread vs one that records only the
starting thread, and with no profiler, measured side by side in one run.

    .venv/bin/python tests/bench/bench_threads.py [--model mlp|resnet18] [--rounds 40]

CPU time of the main thread (``time.thread_time``, one intra-op thread), so other processes on a
shared machine do not blur it as they blur wall time. Prints medians.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet18", choices=["mlp", "resnet18"])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()

    import torch

    import torchprof
    from torchprof._capture import session

    torch.manual_seed(0)
    torch.set_num_threads(1)
    if args.model == "mlp":
        model = torch.nn.Sequential(*[m for _ in range(8) for m in (torch.nn.Linear(256, 256), torch.nn.ReLU())])
        x = torch.randn(32, 256)
    else:
        import torchvision

        model = torchvision.models.resnet18(weights=None)
        x = torch.randn(2, 3, 64, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        model(x).sum().backward()
        opt.step()
        opt.zero_grad()

    every_thread = session._thread_config
    modes = {"every thread": every_thread, "starting thread only": lambda memory: (False, None)}
    times: dict[str, list[float]] = {"no profiler": [], **{name: [] for name in modes}}
    for _ in range(3):
        step()
    for _ in range(args.rounds):
        t0 = time.thread_time()
        step()
        times["no profiler"].append(time.thread_time() - t0)
        for name, config in modes.items():
            session._thread_config = config  # type: ignore[assignment]
            with torchprof.Profiler():
                t0 = time.thread_time()
                step()
                times[name].append(time.thread_time() - t0)
    session._thread_config = every_thread
    base = statistics.median(times["no profiler"])
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{args.model:9s} {name:22s} {median * 1e3:8.2f} ms CPU  ({median / base:.2f}x no profiler)")


if __name__ == "__main__":
    main()
