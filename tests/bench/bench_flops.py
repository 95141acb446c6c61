"""FLOPs counted from what ran: how exact they are, and what counting them costs.

    .venv/bin/python tests/bench/bench_flops.py                       # every part below
    .venv/bin/python tests/bench/bench_flops.py --part agree          # one part: agree, capture, table
    .venv/bin/python tests/bench/bench_flops.py --part agree --models Mixtral,LeViT

1. ``agree``: every layer row of one training step (forward, loss, backward, an AdamW step) of
   the models of ``tests/model_zoo.py`` (torchvision, timm, transformers with MoE, diffusers, DDP,
   a layer called twice, EmbeddingBag) against an independent count
   (``tests/flop_reference.py``: every op dispatched, with its real arguments, on the layer whose
   forward ran it or made its autograd node), and their MACs against ``FlopCounterMode``'s
   (CPU attention and grouped convolution gradients by its own formulas, where it has gaps: see
   docs/flops.md). Target: 0 rows different.
2. ``capture``: the wall time of a block of training steps under torch.profiler's defaults,
   torch.profiler with ``record_shapes=True`` (what torchprof's default records, at torch's own
   cost), ``torchprof.Profiler()`` and ``Profiler(flops=False)`` (no shapes recorded), in shuffled
   rounds, best round of each; the steps and the exit apart; and each layer's own CPU time under
   the default against ``flops=False`` (median). EfficientNet-B0 + AdamW (batch 8, 128x128) and a
   4-layer GPT-2 (d=256, 128 tokens, batch 4), both steps of 20 ms or more. Targets: the default
   at most 1.15x torch.profiler; the median layer within 5% of ``flops=False``.
3. ``table``: from the block's end to a printed table (``str(prof)``) against torch's
   ``key_averages().table()`` on the same run. Target <= 0.3x.

``--kwargs '{"shapes": true}'`` passes Profiler arguments to the profile under test (to measure
another design on the same models).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


# -- 1. agreement ----------------------------------------------------------------------------------------
def _module_rows(df: Any) -> dict[str, tuple[float, float]]:
    """path -> (macs, flops) of each module path, summed over the rows it has (a layer called
    from two places), not counting a row inside another row of the same path twice."""
    kinds, modules, parents = df["kind"].tolist(), df["module"].tolist(), df["parent"].tolist()
    index = {p: i for i, p in enumerate(df.index)}
    macs, flops = df["macs"].tolist(), df["flops"].tolist()
    out: dict[str, list[float]] = {}
    for i, kind in enumerate(kinds):
        if kind != "module":
            continue
        path = modules[i]
        p = parents[i]
        nested = False
        while isinstance(p, str) and p in index:
            j = index[p]
            if kinds[j] == "module" and modules[j] == path:
                nested = True
                break
            p = parents[j]
        if nested:
            continue
        row = out.setdefault(path, [0.0, 0.0])
        row[0] += macs[i]
        row[1] += flops[i]
    return {k: (v[0], v[1]) for k, v in out.items()}


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _fcm_filled() -> dict[Any, Any]:
    """FlopCounterMode's formulas where it has gaps, from its own formulas: the CPU attention
    kernels (it counts the CUDA ones only) and the weight gradient of a grouped convolution
    counted once (it counts it ``groups`` times)."""
    import torch
    from torch.utils import flop_counter as fc

    aten = torch.ops.aten

    def conv_backward_groups_once(grad_out, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding, groups,
                                  output_mask, out_shape=None, **_: Any) -> int:  # fmt: skip
        args = (grad_out, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding, groups)
        grad_input = fc.conv_backward_flop(*args, [output_mask[0], False, False], out_val=out_shape)
        grad_weight = fc.conv_backward_flop(*args, [False, output_mask[1], False], out_val=out_shape)
        return grad_input + grad_weight // groups

    def attention(q: Any, k: Any, v: Any, *args: Any, out_shape: Any = None, **kw: Any) -> int:
        return fc.sdpa_flop_count(q, k, v)

    def attention_backward(grad: Any, q: Any, k: Any, v: Any, *args: Any, out_shape: Any = None, **kw: Any) -> int:
        return fc.sdpa_backward_flop_count(grad, q, k, v)

    return {aten._scaled_dot_product_flash_attention_for_cpu: attention,
            aten._scaled_dot_product_flash_attention_for_cpu_backward: attention_backward,
            aten.convolution_backward: conv_backward_groups_once}  # fmt: skip


def agree(names: list[str], kwargs: dict[str, Any]) -> None:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    import torchprof
    from flop_reference import ReferenceCount
    from model_zoo import ZOO

    warnings.simplefilter("ignore")
    print(f"agree: every layer row of a training step (forward, loss, backward, AdamW step), Profiler({kwargs or ''}) "
          "against an independent count; MACs against FlopCounterMode", flush=True)
    totals = [0, 0, 0, 0, 0]
    for name in names:
        try:
            model, step = ZOO[name]()
        except ImportError as exc:
            print(f"  {name:<22} skipped ({exc})", flush=True)
            continue
        opt = torch.optim.AdamW(model.parameters(), lr=0.0)  # lr 0: every run is the same step (MoE routing too)

        def run(step: Callable[[], Any] = step, opt: Any = opt) -> None:
            step()
            opt.step()
            opt.zero_grad(set_to_none=True)

        try:
            torch.manual_seed(0)
            run()
        except Exception as exc:
            print(f"  {name:<22} cannot run: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
            continue
        label = type(model).__name__
        torch.manual_seed(0)
        with ReferenceCount(model, label) as ref:
            run()
        torch.manual_seed(0)
        t0 = time.perf_counter()
        with torchprof.Profiler(**kwargs) as prof:
            run()
        ours = _module_rows(prof.df)
        read = time.perf_counter() - t0
        torch.manual_seed(0)
        with FlopCounterMode(display=False, custom_mapping=_fcm_filled()) as fcm:
            run()
        theirs = ref.rows()
        paths = sorted(set(ours) & set(theirs))
        # A row is equal (both counts, or both unknown), unknown (only ours: NaN where the reference
        # counted), or different (ours is a number, and not the reference's).
        equal = sum(1 for p in paths if _same(ours[p][0], theirs[p][0]) and _same(ours[p][1], theirs[p][1]))
        unknown = sum(1 for p in paths if math.isnan(ours[p][1]) and not math.isnan(theirs[p][1]))
        differ = [p for p in paths if not math.isnan(ours[p][1]) and not (_same(ours[p][0], theirs[p][0]) and _same(ours[p][1], theirs[p][1]))]
        both = [p for p in paths if math.isnan(ours[p][1]) and math.isnan(theirs[p][1])]
        missing = len(set(theirs) - set(ours))
        root = prof.df.iloc[0]
        ref_macs, ref_flops = ref.total
        fcm_macs = fcm.get_total_flops() / 2
        root_note = "root equal" if _same(root["flops"], ref_flops) and _same(root["macs"], ref_macs) else (
            f"root {root['flops']:.6g} vs {ref_flops:.6g}")
        fcm_note = "; MACs = FlopCounterMode's" if root["macs"] == fcm_macs else f"; MACs {root['macs']:.6g} vs FlopCounterMode {fcm_macs:.6g}"
        totals[4] += root["macs"] == fcm_macs
        listed = ", ".join(sorted(prof.unsupported_ops)) or "none"
        if both:
            listed += f" (the reference's too: {', '.join(sorted(ref.all_unknown))})"
        print(f"  {name:<22} {len(paths):>4} rows: {equal:>4} equal, {unknown:>3} unknown, {len(differ)} different"
              f"{f', {missing} not in the tree' if missing else ''}; {root_note}{fcm_note}; unknown ops: {listed}; "
              f"block+read {read:.1f} s", flush=True)
        for p in differ[:3]:
            print(f"      {p}: ours {ours[p]} reference {theirs[p]}", flush=True)
        totals[0] += len(paths)
        totals[1] += equal
        totals[2] += unknown
        totals[3] += len(differ)
        del model, opt, prof, ref
        gc.collect()
    print(f"  all: {totals[0]} rows, {totals[1]} equal, {totals[2]} unknown, {totals[3]} different; the whole step's MACs "
          f"equal FlopCounterMode's (its gaps filled by its own formulas) in {totals[4]} of {len(names)} models", flush=True)


# -- 2. capture ------------------------------------------------------------------------------------------
def efficientnet_step() -> tuple[Any, Callable[[], None]]:
    import torch
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.efficientnet_b0(weights=None)
    opt = torch.optim.AdamW(model.parameters())
    x, y = torch.randn(8, 3, 128, 128), torch.arange(8)

    def step() -> None:
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()

    return model, step


def gpt2_step() -> tuple[Any, Callable[[], None]]:
    import torch
    import transformers as tf

    torch.manual_seed(0)
    model = tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=1024, n_embd=256, n_layer=4, n_head=4, n_positions=128))
    opt = torch.optim.AdamW(model.parameters())
    ids = torch.randint(0, 1024, (4, 128))

    def step() -> None:
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad()

    return model, step


def _own_cpu(df: Any) -> dict[str, float]:
    """Each module's own CPU time: its rows' total minus its child modules' (forward and backward)."""
    out: dict[str, float] = {}
    kinds, modules, parents, cpu = df["kind"].tolist(), df["module"].tolist(), df["parent"].tolist(), df["cpu_us"].tolist()
    index = {p: i for i, p in enumerate(df.index)}
    for i, kind in enumerate(kinds):
        if kind != "module":
            continue
        out[modules[i]] = out.get(modules[i], 0.0) + cpu[i]
        p = parents[i]
        while isinstance(p, str) and p in index and kinds[index[p]] != "module":
            p = parents[index[p]]
        if isinstance(p, str) and p in index:
            out[modules[index[p]]] = out.get(modules[index[p]], 0.0) - cpu[i]
    return out


def capture(rounds: int, steps: int, kwargs: dict[str, Any]) -> None:
    from torch.profiler import profile

    import torchprof

    warnings.simplefilter("ignore")
    for title, make in (("EfficientNet-B0 + AdamW, batch 8x3x128x128", efficientnet_step),
                        ("GPT-2, 4 layers, d=256, batch 4x128 + AdamW", gpt2_step)):  # fmt: skip
        model, step = make()
        for _ in range(3):
            step()

        def bare() -> Any:
            return profile()

        variants: dict[str, Callable[[], Any]] = {
            "torch.profiler": bare,
            "torch shapes": lambda: profile(record_shapes=True),  # torch's own cost of the shapes torchprof records
            "torchprof": lambda: torchprof.Profiler(**kwargs),
            "flops=False": lambda: torchprof.Profiler(flops=False, **{k: v for k, v in kwargs.items() if k != "flops"}),
        }
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in variants}
        own: dict[str, list[dict[str, float]]] = {"torchprof": [], "flops=False": []}
        for r in range(rounds + 1):
            order = list(variants)
            random.shuffle(order)
            for name in order:
                gc.collect()
                ctx = variants[name]()
                ctx.__enter__()
                t0 = time.perf_counter()
                for _ in range(steps):
                    step()
                t1 = time.perf_counter()
                ctx.__exit__(None, None, None)
                t2 = time.perf_counter()
                if r:  # round 0 warms every variant up
                    times[name].append((t1 - t0, t2 - t1))
                    if name in own:
                        own[name].append(_own_cpu(ctx.df))
        base = min(a for a, _ in times["torch.profiler"])
        base_block = min(a + b for a, b in times["torch.profiler"])
        step_ms = base / steps * 1e3
        print(f"capture: {title}, {steps} steps a block, best of {rounds} shuffled rounds (a step under torch.profiler: {step_ms:.0f} ms)", flush=True)
        for name, ts in times.items():
            a = min(t for t, _ in ts)
            b = min(e for _, e in ts)
            block = min(t + e for t, e in ts)
            print(f"  {name:<15} steps {a * 1e3:7.0f} ms ({a / base:.3f}x)  exit {b * 1e3:5.0f} ms  block {block * 1e3:7.0f} ms "
                  f"({block / base_block:.3f}x)", flush=True)
        best_on = {m: min(run.get(m, math.inf) for run in own["torchprof"]) for m in own["torchprof"][0]}
        best_off = {m: min(run.get(m, math.inf) for run in own["flops=False"]) for m in own["flops=False"][0]}
        ratios = sorted(best_on[m] / best_off[m] for m in best_on if best_off.get(m, 0) > 50 and math.isfinite(best_on[m]))
        if ratios:
            p90 = ratios[int(0.9 * (len(ratios) - 1))]
            print(f"  each layer's own CPU time, torchprof / flops=False: median {statistics.median(ratios):.3f}x, "
                  f"p90 {p90:.3f}x over {len(ratios)} layers of 50 µs or more", flush=True)
        del model, step
        gc.collect()


# -- 3. time to a table ----------------------------------------------------------------------------------
def table(rounds: int, kwargs: dict[str, Any]) -> None:
    import torch

    import torchprof

    warnings.simplefilter("ignore")
    for title, make in (("EfficientNet-B0 + AdamW", efficientnet_step), ("GPT-2 4 layers + AdamW", gpt2_step)):
        model, step = make()
        step()
        ours, theirs = [], []
        for r in range(rounds + 1):
            gc.collect()
            with torchprof.Profiler(**kwargs) as prof:
                step()
            t0 = time.perf_counter()
            text = str(prof)
            t1 = time.perf_counter()
            prof.torch_profile.key_averages().table()
            t2 = time.perf_counter()
            if r:
                ours.append(t1 - t0)
                theirs.append(t2 - t1)
            assert "?" not in text.splitlines()[3], text[:2000]
        a, b = min(ours), min(theirs)
        print(f"table: {title}, best of {rounds}: from the block's end to str(prof) {a * 1e3:.0f} ms, torch's "
              f"key_averages().table() on the same run {b * 1e3:.0f} ms = {a / b:.2f}x (target <= 0.3)", flush=True)
        del model, step
        gc.collect()
    _ = torch


def main() -> None:
    from model_zoo import ZOO

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["agree", "capture", "table"], action="append")
    parser.add_argument("--models", default=",".join(ZOO))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--kwargs", default="{}", help="Profiler arguments of the profile under test, as JSON")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: steadier figures on a shared machine)")
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    kwargs = json.loads(args.kwargs)
    parts = args.part or ["agree", "capture", "table"]
    if "agree" in parts:
        agree([m for m in args.models.split(",") if m], kwargs)
    if "capture" in parts:
        capture(args.rounds, args.steps, kwargs)
    if "table" in parts:
        table(args.rounds, kwargs)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
