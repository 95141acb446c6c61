"""Live CUDA figures, each checked against an independent measure of the same run.

    python tests/bench/bench_cuda.py                 # on a machine with a CUDA device
    python tests/bench/bench_cuda.py --small --device cpu   # the same code paths, tiny, without one

Sections (``--only NAME`` runs one; each prints its figures, then ``ok``/``FAILED`` lines):

- ``kernels``: a ResNet-18 training step (batch 32, 224 px, AdamW). The root's CUDA total against the
  sum of every kernel, memcpy and memset duration in torchprof's own exported chrome trace of the same
  run (recomputed here from the JSON); the share of device time that lands on layers (forward and
  backward); every Conv2d and Linear has kernels in both passes; the costliest layers.
- ``compiled``: a 2-layer ``nn.TransformerEncoder`` (d 512, 8 heads, batch 16 x 128 tokens) compiled
  and warmed up before the profiler. Triton kernels on layers against on the wrapper; FLOPs against
  the same model eager; Dynamo's counters before and after (no compile inside the block).
- ``memory``: ResNet-18 + Adam with ``memory=True``: the profile's peak against
  ``torch.cuda.max_memory_allocated()``, and what the peak is made of.
- ``overhead``: ResNet-50 training steps (batch 64, bf16 autocast), ``--steps`` per block, best of
  ``--rounds`` shuffled rounds: no profiler, ``torch.profiler`` (CPU + CUDA), ``torchprof.Profiler()``
  and ``Profiler(flops=False)``; the ratio of torchprof to torch's profiler (target <= 1.10), of the
  steps alone and of the whole block (its exit included).
- ``mfu``: 4 bf16 ``Linear(8192, 8192)`` layers, forward and backward on 8192 rows: the FLOPs against
  3 x 2 x 8192^3 per layer, and torchprof's MFU against FLOPs / (kernel time x the device's peak).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import random
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

FAILED: list[str] = []


def check(ok: bool, what: str) -> None:
    print(("  ok      " if ok else "  FAILED  ") + what, flush=True)
    if not ok:
        FAILED.append(what)


def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def trace_device_us(prof: Any) -> float:
    """Device time recomputed from torchprof's own export of the run: the durations of every
    kernel, memcpy and memset, read from the JSON without torchprof's reader."""
    with tempfile.TemporaryDirectory() as tmp:
        path = prof.export_chrome_trace(os.path.join(tmp, "t.json"))
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    cats = {"kernel", "gpu_memcpy", "gpu_memset"}
    return float(sum(e.get("dur", 0) for e in events if e.get("ph") == "X" and e.get("cat") in cats))


def resnet_step(name: str, batch: int, size: int, device: str, amp: bool) -> Callable[[], None]:
    import torch
    import torchvision

    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(batch, 3, size, size, device=device)
    y = torch.randint(0, 1000, (batch,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step() -> None:
        with torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=amp):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step.model = model  # type: ignore[attr-defined]
    step.opt = opt  # type: ignore[attr-defined]
    return step


def part_kernels(args: argparse.Namespace) -> None:
    import torchprof

    batch, size = (2, 64) if args.small else (32, 224)
    step = resnet_step("resnet18", batch, size, args.device, amp=False)
    for _ in range(3):
        step()
    sync(args.device)
    with torchprof.Profiler() as prof:
        step()
        sync(args.device)
    df = prof.df
    root = df.iloc[0]
    print(f"ResNet-18 train step, batch {batch} x {size}px: wall {prof.summary['wall_us'] / 1e3:.2f} ms, "
          f"CPU {root['cpu_us'] / 1e3:.2f} ms, device {root['cuda_us'] / 1e3:.3f} ms")  # fmt: skip
    if args.save:
        prof.export_chrome_trace(os.path.join(args.save, "resnet18-step.json"))
    if not args.device.startswith("cuda"):
        return
    recomputed = trace_device_us(prof)
    print(f"  device time: torchprof root {root['cuda_us']:.1f} us, recomputed from its trace {recomputed:.1f} us")
    check(
        math.isclose(root["cuda_us"], recomputed, rel_tol=1e-6, abs_tol=1.0),
        "root CUDA total = kernels+memcpy+memset of the trace",
    )
    layers = df[df["kind"] == "module"]
    model_row = layers.iloc[0]
    fwd, bwd = model_row["fwd_cuda_us"], model_row["bwd_cuda_us"]
    on_layers = fwd + bwd
    print(f"  on the model: fwd {fwd / 1e3:.3f} ms, bwd {bwd / 1e3:.3f} ms = {on_layers / root['cuda_us']:.1%} of device time; "
          f"optimizer and the rest {(root['cuda_us'] - on_layers) / 1e3:.3f} ms")  # fmt: skip
    compute = layers[layers["type"].isin(["Conv2d", "Linear"])]
    missing = compute[(compute["fwd_cuda_us"] <= 0) | (compute["bwd_cuda_us"] <= 0)]
    print(f"  {len(compute)} Conv2d/Linear layers; without forward or backward kernels: {list(missing['path'])}")
    check(missing.empty, "every Conv2d and Linear has forward and backward kernels")
    kernels = df[df["kind"] == "kernel"]
    print(f"  {len(kernels)} kernel rows, {kernels['name'].nunique()} kernel names; costliest layers (self CUDA, fwd+bwd):")
    leaf = layers.sort_values("layer_self_cuda_us", ascending=False).head(6)
    for _, r in leaf.iterrows():
        print(f"    {r['path']:<34} {r['type']:<12} {r['layer_self_cuda_us']:9.1f} us  bwd {r['layer_bwd_self_cuda_us']:9.1f} us")
    print(f"  summary: {prof.summary['headline']}")
    print(f"  GPU busy {prof.summary['gpu_busy_us'] / 1e3:.3f} ms, idle {prof.summary['gpu_idle_us'] / 1e3:.3f} ms "
          f"of window {prof.summary['gpu_window_us'] / 1e3:.3f} ms")  # fmt: skip


def part_compiled(args: argparse.Namespace) -> None:
    import torch

    import torchprof

    d, heads, batch, seq = (64, 4, 2, 16) if args.small else (512, 8, 16, 128)

    def make() -> torch.nn.Module:
        torch.manual_seed(0)
        layer = torch.nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True)
        return torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).to(args.device)

    x = torch.randn(batch, seq, d, device=args.device)
    eager = make()
    with torchprof.Profiler() as prof_eager:
        eager(x).sum().backward()
        sync(args.device)
    compiled_model = make()
    compiled = torch.compile(compiled_model)
    t0 = time.perf_counter()
    for _ in range(3):
        compiled(x).sum().backward()
    sync(args.device)
    print(
        f"compiled TransformerEncoder d{d} h{heads} batch {batch}x{seq}: compile + 3 warm-up steps {time.perf_counter() - t0:.1f} s"
    )
    from torch._dynamo.utils import counters

    before = {k: dict(v) for k, v in counters.items()}
    with torchprof.Profiler() as prof:
        compiled(x).sum().backward()
        sync(args.device)
    t0 = time.perf_counter()
    df = prof.df
    print(f"  first prof.df {time.perf_counter() - t0:.2f} s")
    if args.save:
        prof_eager.export_chrome_trace(os.path.join(args.save, "compiled-eager.json"))
        prof.export_chrome_trace(os.path.join(args.save, "compiled-warm.json"))
    check({k: dict(v) for k, v in counters.items()} == before, "nothing compiled inside the block or at the first read")
    rows = df[df["kind"] == "module"]
    for _, r in rows.head(12).iterrows():
        print(f"    {r['path']:<44} {r['type']:<24} cuda {r['cuda_us']:9.1f} us  bwd {r['bwd_cuda_us']:9.1f}  "
              f"cpu {r['cpu_us']:9.1f}  flops {r['flops']:.4g}")  # fmt: skip
    # the model's row: the root also holds the loss's sum, which is unknown (NaN) once compiled code exists
    eager_flops, flops = prof_eager.df.loc["TransformerEncoder", "flops"], df.loc["TransformerEncoder", "flops"]
    print(f"  the model's FLOPs: compiled {flops:,.0f}, eager {eager_flops:,.0f}; root {df.iloc[0]['flops']:,.0f} "
          f"({prof.summary.get('warnings', ['no warning'])[0][:90]})")  # fmt: skip
    check(flops == eager_flops, "compiled FLOPs = eager FLOPs")
    if not args.device.startswith("cuda"):
        return
    kernels = df[df["kind"] == "kernel"]
    triton = kernels[kernels["name"].str.startswith("triton")]
    inside = triton["path"].str.contains(".layers.", regex=False)
    total = kernels["self_cuda_us"].sum()
    print(f"  {len(triton)} Triton kernel rows ({triton['name'].nunique()} names), {triton['self_cuda_us'].sum():.1f} us "
          f"of {total:.1f} us of kernels; on a layer: {inside.sum()} rows, {triton[inside]['self_cuda_us'].sum():.1f} us")  # fmt: skip
    outside = triton[~inside]
    for _, r in outside.head(6).iterrows():
        print(f"    not on a layer: {r['path']}  {r['self_cuda_us']:.1f} us")
    check(len(triton) > 0, "Triton kernels are recorded")
    layer_rows = rows[rows["path"].str.contains(".layers.", regex=False)]
    check(bool((layer_rows["cuda_us"] > 0).any()), "layers inside the compiled model have device time")
    root = df.iloc[0]
    recomputed = trace_device_us(prof)
    check(
        math.isclose(root["cuda_us"], recomputed, rel_tol=1e-6, abs_tol=1.0),
        f"root CUDA total {root['cuda_us']:.1f} = trace {recomputed:.1f}",
    )


def part_memory(args: argparse.Namespace) -> None:
    import torch

    import torchprof

    if not args.device.startswith("cuda"):
        print("memory: needs CUDA")
        return
    batch, size = (2, 64) if args.small else (32, 224)
    step = resnet_step("resnet18", batch, size, args.device, amp=False)
    step()
    sync(args.device)
    torch.cuda.reset_peak_memory_stats()
    with torchprof.Profiler(memory=True) as prof:
        step()
        sync(args.device)
    peak = torch.cuda.max_memory_allocated()
    s = prof.summary
    print(f"ResNet-18 + AdamW, batch {batch}: profile peak {s['peak_cuda_mem']:,.0f} B, allocator max {peak:,} B")
    check(s["peak_cuda_mem"] == peak, "the profile's CUDA peak is the allocator's")
    parts = prof.memory_breakdown(device="cuda:0")
    print(parts.to_string())
    check(parts["bytes"].sum() == peak, "the parts of the peak add up to it")
    params = sum(p.numel() * p.element_size() for p in step.model.parameters())  # type: ignore[attr-defined]
    if "parameter" in parts.index:
        check(parts.loc["parameter", "bytes"] == params, f"parameters at the peak = {params:,} B of parameters")
    df = prof.df
    top = df[df["kind"] == "module"].sort_values("act_cuda_mem", ascending=False).head(5)
    for _, r in top.iterrows():
        print(f"    {r['path']:<30} kept {r['act_cuda_mem']:,.0f} B  peak {r['peak_cuda_mem']:,.0f} B")


@contextlib.contextmanager
def variant(kind: str) -> Iterator[None]:
    import torch

    import torchprof

    if kind == "none":
        yield
    elif kind == "torch.profiler":
        acts = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            acts.append(torch.profiler.ProfilerActivity.CUDA)
        with torch.profiler.profile(activities=acts):
            yield
    elif kind == "torchprof":
        with torchprof.Profiler():
            yield
    elif kind == "torchprof flops=False":
        with torchprof.Profiler(flops=False):
            yield


def part_overhead(args: argparse.Namespace) -> None:
    batch, size = (2, 64) if args.small else (64, 224)
    step = resnet_step("resnet50", batch, size, args.device, amp=args.device.startswith("cuda"))
    for _ in range(5):
        step()
    sync(args.device)
    kinds = ["none", "torch.profiler", "torchprof", "torchprof flops=False"]
    # Which session starts kineto decides how it logs for the process (docs/limits.md): torchprof's
    # first start, as in a process that profiles with torchprof, before any timed round.
    for _ in range(2):  # (the stop after the first start completes the judgement)
        with variant("torchprof flops=False"):
            pass
    block: dict[str, list[float]] = {k: [] for k in kinds}
    steps: dict[str, list[float]] = {k: [] for k in kinds}
    for _ in range(args.rounds):
        order = kinds[:]
        random.shuffle(order)
        for kind in order:
            gc.collect()
            sync(args.device)
            t0 = time.perf_counter()
            with variant(kind):
                for _ in range(args.steps):
                    step()
                sync(args.device)
                t1 = time.perf_counter()
            t2 = time.perf_counter()
            block[kind].append(t2 - t0)
            steps[kind].append(t1 - t0)
    print(f"ResNet-50 training, batch {batch} x {size}px{' bf16 autocast' if args.device.startswith('cuda') else ''}, "
          f"{args.steps} steps per block, best of {args.rounds} rounds:")  # fmt: skip
    for kind in kinds:
        print(f"  {kind:<24} steps {min(steps[kind]) * 1e3 / args.steps:8.2f} ms/step   whole block {min(block[kind]) * 1e3:9.1f} ms"
              f"   (median block {statistics.median(block[kind]) * 1e3:9.1f} ms)")  # fmt: skip
    ratio_steps = min(steps["torchprof"]) / min(steps["torch.profiler"])
    ratio_block = min(block["torchprof"]) / min(block["torch.profiler"])
    print(f"  torchprof / torch.profiler: steps {ratio_steps:.3f}x, whole block {ratio_block:.3f}x (target <= 1.10); "
          f"torch.profiler / none: steps {min(steps['torch.profiler']) / min(steps['none']):.3f}x")  # fmt: skip


def part_mfu(args: argparse.Namespace) -> None:
    import torch

    import torchprof

    n, layers = (256, 2) if args.small else (8192, 4)
    dtype = torch.bfloat16 if args.device.startswith("cuda") else torch.float32
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(n, n, bias=False) for _ in range(layers)]).to(args.device, dtype)
    x = torch.randn(n, n, device=args.device, dtype=dtype, requires_grad=True)
    for _ in range(3):
        model(x).sum().backward()
    sync(args.device)
    with torchprof.Profiler() as prof:
        model(x).sum().backward()
        sync(args.device)
    s = prof.summary
    expected = layers * 3 * 2 * n**3  # forward, grad of the input and grad of the weight: 3 matmuls per layer
    matmul = prof.df[prof.df["type"] == "Linear"]["flops"].sum()
    print(
        f"{layers} x Linear({n}, {n}) {str(dtype)[6:]}, fwd+bwd on {n} rows: layers' FLOPs {matmul:,.0f}, expected {expected:,}"
    )
    check(matmul == expected, "the layers' FLOPs are 3 x 2 x n^3 each")
    peak = s["peak_flops"]
    print(f"  peak: {peak}")
    if not args.device.startswith("cuda"):
        return
    # The model's row: the root also holds the loss's sum, unknown once this process has compiled code.
    row = prof.df.loc["Sequential"]
    by_hand = row["flops"] / (row["cuda_us"] * 1e-6) / peak["flops_per_s"] if peak["flops_per_s"] else float("nan")
    print(f"  MFU of the model: torchprof {row['mfu']:.4f}, by hand FLOPs / device time / peak {by_hand:.4f}; "
          f"achieved {row['flops'] / (row['cuda_us'] * 1e-6) / 1e12:.1f} TFLOP/s; summary MFU {s['mfu']:.4f} "
          f"(of wall {s['mfu_wall']:.4f})")  # fmt: skip
    check(peak["device"] is not None and peak["flops_per_s"] is not None, f"the device's peak is known ({peak['device']})")
    check(math.isclose(row["mfu"], by_hand, rel_tol=1e-3), "MFU = FLOPs / device time / peak")
    check(0.2 < row["mfu"] <= 1.0, "MFU of big bf16 matmuls is between 20% and 100%")
    layer_rows = prof.df[prof.df["type"] == "Linear"]
    print("  per layer MFU: " + ", ".join(f"{v:.3f}" for v in layer_rows["mfu"]))


PARTS = {"kernels": part_kernels, "compiled": part_compiled, "memory": part_memory, "overhead": part_overhead, "mfu": part_mfu}


def main() -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true", help="tiny sizes (a dry run of the code paths)")
    parser.add_argument("--only", choices=sorted(PARTS), action="append")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--save", metavar="DIR", help="export the compiled model's traces there (to study them without a GPU)")
    args = parser.parse_args()
    if args.device.startswith("cuda"):
        print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    else:
        print(f"no CUDA device: running on {args.device} (kernel, memory and MFU checks need CUDA)")
    for name in args.only or PARTS:
        print(f"\n== {name}", flush=True)
        t0 = time.perf_counter()
        try:
            PARTS[name](args)
        except Exception:  # one part failing must not hide the others' figures
            traceback.print_exc(file=sys.stdout)
            FAILED.append(f"{name} raised")
        print(f"   ({name}: {time.perf_counter() - t0:.1f} s)", flush=True)
    print(f"\n{len(FAILED)} failed: {FAILED}" if FAILED else "\nall checks passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
