"""The FLOP replay (FLOPs without recorded shapes): what it costs and how often it is exact.

    .venv/bin/python tests/bench/bench_replay.py                 # every part below
    .venv/bin/python tests/bench/bench_replay.py --part table    # one part: table, depth, memory, agree
    .venv/bin/python tests/bench/bench_replay.py --part depth --depths 500,1000 --widths 5000

1. ``table``: from the end of the profiled block to a printed table, the replays included (the
   model's, the optimizer's, the loss's), against torch's ``key_averages().table()`` on the same
   run: an EfficientNet-B0 (batch 2, 96x96) training step with ``F.cross_entropy`` and AdamW,
   best of ``--rounds``. Target <= 0.3x.
2. ``depth``: the first ``prof.df`` of a chain of modules ``--depths`` deep and of a module with
   ``--widths`` children, each a training step (forward and backward), with FLOPs on and off, in
   fresh processes (``--repeat`` each, 3 by default: the best of each is shown, as the machine's
   noise only ever adds time). Target: FLOPs on <= 3x FLOPs off at depth 3,000 and width 5,000.
3. ``memory``: the replay's peak resident memory on a module that holds 1 GB in plain attributes
   (tensors in a list and a dict, a NumPy array, an object holding a tensor): the process's
   peak while ``prof.df`` runs, above what it held before. Target: no copy of the data.
4. ``agree``: every module row of the default capture against ``shapes=True`` on the same step,
   for torchvision models and Hugging Face models built from tiny configs (skipped without
   ``transformers``): rows equal, rows unknown (NaN), rows different (target 0), and the root.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any


# -- 1. time to a table --------------------------------------------------------------------------------
def table(rounds: int) -> None:
    import torch
    import torchvision

    import torchprof

    torch.manual_seed(0)
    model = torchvision.models.efficientnet_b0(weights=None)
    opt = torch.optim.AdamW(model.parameters())
    x, y = torch.randn(2, 3, 96, 96), torch.tensor([1, 7])

    def step() -> None:
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()

    step()
    ours, theirs, replay = [], [], []
    for r in range(rounds + 1):  # round 0 warms up
        gc.collect()
        with torchprof.Profiler() as prof:
            step()
        t0 = time.perf_counter()
        text = str(prof)
        t1 = time.perf_counter()
        prof.torch_profile.key_averages().table()
        t2 = time.perf_counter()
        if r:
            ours.append(t1 - t0)
            theirs.append(t2 - t1)
        assert "of ops of unknown cost" not in text, prof.unsupported_ops
    with torchprof.Profiler() as prof:
        step()
    t0 = time.perf_counter()
    prof._session.replays(["EfficientNet"])
    prof._session.outside_replays()
    replay.append(time.perf_counter() - t0)
    a, b = min(ours), min(theirs)
    print(f"table: EfficientNet-B0 AdamW step, best of {rounds}: str(prof) {a * 1e3:.0f} ms (replays {replay[0] * 1e3:.0f} ms), "
          f"torch key_averages().table() {b * 1e3:.0f} ms = {a / b:.2f}x (target <= 0.3)", flush=True)


# -- 2. depth and width ----------------------------------------------------------------------------------
def one_shape(shape: str, size: int) -> dict[str, float]:
    import torch
    from torch import nn

    import torchprof

    class Link(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.ones(1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x * self.w
            inner = self._modules.get("inner")
            return inner(x) if inner is not None else x

    class Fan(nn.Module):
        def __init__(self, n: int) -> None:
            super().__init__()
            self.kids = nn.ModuleList(Link() for _ in range(n))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for kid in self.kids:
                x = kid(x)
            return x

    if shape == "depth":
        model = link = Link()
        for _ in range(size - 1):
            link.inner = Link()
            link = link.inner
    else:
        model = Fan(size)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * size + 1000))
    x = torch.ones(2)
    with torchprof.Profiler() as warm:  # the first profile's imports are not the cost measured
        Link()(x).sum().backward()
    warm.df
    out: dict[str, float] = {}
    roots = []
    for flops, shapes in ((False, False), (True, False), (True, True)):
        model.zero_grad(set_to_none=True)
        with torchprof.Profiler(flops=flops, shapes=shapes) as prof:
            model(x).sum().backward()
        t0 = time.perf_counter()
        df = prof.df
        if not shapes:
            out["flops" if flops else "plain"] = time.perf_counter() - t0
        if flops:
            roots.append(df.loc["profile", "flops"])
    out["exact"] = float(roots[0] == roots[1])
    return out


def depth(depths: list[int], widths: list[int], repeat: int = 3) -> None:
    print(f"depth and width: the first prof.df of a training step, FLOPs on / off (target <= 3x), best of {repeat}", flush=True)
    for shape, sizes in (("depth", depths), ("width", widths)):
        for size in sizes:
            runs = []
            for _ in range(repeat):
                res = subprocess.run([sys.executable, __file__, "--one", shape, str(size)], capture_output=True, text=True, check=False)
                if res.returncode:
                    print(f"  {shape} {size}: failed\n{res.stderr[-2000:]}", flush=True)
                    break
                runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
            if len(runs) < repeat:
                continue
            r = {"flops": min(x["flops"] for x in runs), "plain": min(x["plain"] for x in runs), "exact": min(x["exact"] for x in runs)}
            print(f"  {shape} {size:>5}: FLOPs on {r['flops']:6.2f} s, off {r['plain']:6.2f} s = {r['flops'] / r['plain']:.2f}x"
                  f"{'' if r['exact'] else '  (FLOPs not exact!)'}", flush=True)


# -- 3. memory -----------------------------------------------------------------------------------------------
def _status(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # MB
    return float("nan")


def memory() -> None:
    import numpy as np
    import torch
    from torch import nn

    import torchprof

    class Box:
        def __init__(self, t: torch.Tensor) -> None:
            self.t = t

    quarter = 256 * 2**20 // 4  # float32 elements in 256 MB

    class Holder(nn.Module):
        """1 GB in plain attributes, none of it a parameter or buffer."""

        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(64, 64)
            self.cache = [torch.ones(quarter)]
            self.table = {"k": torch.ones(quarter)}
            self.array = np.ones(quarter, dtype=np.float32)
            self.box = Box(torch.ones(quarter))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(x)

    model = Holder()
    x = torch.randn(8, 64)
    with torchprof.Profiler() as prof:
        model(x).sum().backward()
    gc.collect()
    before = _status("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # the peak starts again from here
    except OSError:
        print("memory: cannot reset the peak on this system", flush=True)
        return
    prof.df
    peak = _status("VmHWM")
    print(f"memory: a module holding 1024 MB in plain attributes: the first prof.df (replay included) peaked "
          f"{peak - before:.0f} MB above the {before:.0f} MB held before", flush=True)


# -- 4. agreement with shapes=True -----------------------------------------------------------------------
def _torchvision(name: str, size: int) -> Callable[[], tuple[Any, Callable[[], None]]]:
    def make() -> tuple[Any, Callable[[], None]]:
        import torch
        import torchvision

        model = getattr(torchvision.models, name)(weights=None)
        x, y = torch.randn(2, 3, size, size), torch.tensor([1, 2])
        return model, lambda: torch.nn.functional.cross_entropy(model(x), y).backward()

    return make


def _hf(kind: str) -> Callable[[], tuple[Any, Callable[[], None]]]:
    def make() -> tuple[Any, Callable[[], None]]:
        import torch
        import transformers as tf

        ids = torch.randint(0, 128, (2, 16))
        if kind == "llama":
            m = tf.LlamaForCausalLM(tf.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64))
            return m, lambda: m(input_ids=ids, labels=ids, use_cache=False).loss.backward()
        if kind == "gpt2":
            m = tf.GPT2LMHeadModel(tf.GPT2Config(vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=64))
            return m, lambda: m(input_ids=ids, labels=ids).loss.backward()
        if kind == "gpt-neox":
            m = tf.GPTNeoXForCausalLM(tf.GPTNeoXConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                                       num_attention_heads=4, max_position_embeddings=64))
            mask = torch.ones(2, 16, dtype=torch.long)
            mask[1, 12:] = 0
            return m, lambda: m(input_ids=ids, attention_mask=mask, labels=ids).loss.backward()
        if kind == "bert":
            m = tf.BertForMaskedLM(tf.BertConfig(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                 intermediate_size=128, max_position_embeddings=64))
            return m, lambda: m(input_ids=ids, labels=ids).loss.backward()
        if kind == "t5":
            m = tf.T5ForConditionalGeneration(tf.T5Config(vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                                                          decoder_start_token_id=0))
            return m, lambda: m(input_ids=ids, labels=ids).loss.backward()
        if kind == "whisper":
            m = tf.WhisperForConditionalGeneration(tf.WhisperConfig(
                vocab_size=128, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=16, max_source_positions=32,
                max_target_positions=32, decoder_start_token_id=1, pad_token_id=0, bos_token_id=1, eos_token_id=2))
            feats, labels = torch.randn(2, 16, 64), torch.randint(3, 128, (2, 8))
            return m, lambda: m(input_features=feats, labels=labels).loss.backward()
        if kind == "clip":
            m = tf.CLIPModel(tf.CLIPConfig(
                text_config={"vocab_size": 128, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                                 "max_position_embeddings": 16, "bos_token_id": 0, "eos_token_id": 1},
                vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "image_size": 32,
                                   "patch_size": 8}))
            px = torch.randn(2, 3, 32, 32)
            return m, lambda: m(input_ids=ids[:, :8], pixel_values=px, return_loss=True).loss.backward()
        raise ValueError(kind)

    return make


AGREE: dict[str, Callable[[], tuple[Any, Callable[[], None]]]] = {
    "ResNet-18": _torchvision("resnet18", 64),
    "MobileNetV3-S": _torchvision("mobilenet_v3_small", 64),
    "EfficientNet-B0": _torchvision("efficientnet_b0", 64),
    "ConvNeXt-T": _torchvision("convnext_tiny", 64),
    "Swin-T": _torchvision("swin_t", 64),
    "ViT-B/16": _torchvision("vit_b_16", 224),
    "Llama": _hf("llama"), "GPT-2": _hf("gpt2"), "GPT-NeoX": _hf("gpt-neox"), "BERT": _hf("bert"),
    "T5": _hf("t5"), "Whisper": _hf("whisper"), "CLIP": _hf("clip"),
}  # fmt: skip


def agree(names: list[str]) -> None:
    import warnings

    import pandas as pd
    import torch

    import torchprof

    warnings.simplefilter("ignore")
    print("agree: every module row of a training step (forward, loss, backward, AdamW step), default vs shapes=True, "
          "the same step twice", flush=True)
    for name in names:
        try:
            model, step = AGREE[name]()
        except ImportError as exc:
            print(f"  {name:<16} skipped ({exc})", flush=True)
            continue
        torch.manual_seed(0)
        opt = torch.optim.AdamW(model.parameters())

        def run(step: Callable[[], None] = step, opt: Any = opt, model: Any = model) -> None:
            step()
            opt.step()

        run()
        profs = []
        for shapes in (False, True):
            model.zero_grad(set_to_none=True)  # both runs the same step
            with torchprof.Profiler(shapes=shapes) as prof:
                run()
            profs.append((prof, prof.df))
        (default, a), (_, b) = profs
        rows = a.index[a["kind"] == "module"]
        equal = sum(1 for r in rows if r in b.index and (a.loc[r, "flops"], a.loc[r, "macs"]) == (b.loc[r, "flops"], b.loc[r, "macs"]))
        unknown = sum(1 for r in rows if pd.isna(a.loc[r, "flops"]))
        differ = len(rows) - equal - unknown
        root, truth = a.loc["profile", "flops"], b.loc["profile", "flops"]
        listed = ", ".join(sorted(default.unsupported_ops)) or "none"
        print(f"  {name:<16} {len(rows):>4} rows: {equal:>4} equal, {unknown:>3} unknown, {differ} different; "
              f"root {'unknown' if pd.isna(root) else f'{root / truth:.4f}x'} of shapes=True; unknown ops: {listed}", flush=True)
        del model, opt, profs, default
        gc.collect()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["table", "depth", "memory", "agree"], action="append")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--depths", default="500,1000,2000,3000")
    parser.add_argument("--widths", default="5000")
    parser.add_argument("--repeat", type=int, default=3, help="processes per depth/width case; the best figures are shown")
    parser.add_argument("--models", default=",".join(AGREE))
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one_shape(args.one[0], int(args.one[1]))))
        return
    parts = args.part or ["table", "depth", "memory", "agree"]
    if "table" in parts:
        table(args.rounds)
    if "depth" in parts:
        depth([int(d) for d in args.depths.split(",") if d], [int(w) for w in args.widths.split(",") if w], args.repeat)
    if "memory" in parts:
        memory()
    if "agree" in parts:
        agree([m for m in args.models.split(",") if m])


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
