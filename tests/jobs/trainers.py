"""Tiny real trainings for the integration tests and benchmark: a GPT-2 (from a config, no
download) under the Hugging Face ``Trainer``, a LightningModule under Lightning's ``Trainer``, and
an ``accelerate`` loop, each on a few CPU steps.

Also a 2-rank job: ``python -m torch.distributed.run --standalone --nproc_per_node=2 trainers.py
OUT`` trains all three on every rank (gloo), each with torchprof recording steps 2-3, and rank 0
saves each merged job to ``OUT/<framework>.job.json`` (every rank saves its own profile to
``OUT/<framework>.rank<r>.json``).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from typing import Any

#: The tiny GPT-2: its lm_head is Linear(EMBD, VOCAB, bias=False) over BATCH * SEQ tokens.
VOCAB, EMBD, LAYERS, HEADS, SEQ, BATCH = 128, 32, 2, 2, 16, 4
#: The LightningModule: Linear(FEATURES, WIDTH), ReLU, Linear(WIDTH, 1) on batches of ROWS.
FEATURES, WIDTH, ROWS = 8, 32, 4


def once_per_session(tmp_path_factory: Any, name: str, produce: Any) -> Any:
    """``produce(folder)`` run once per test session, by whichever xdist worker asks first (the
    others wait for it, then read its folder): a trained run shared by the tests of a module,
    wherever xdist sends them. Returns the folder."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the workers' temporary folders sit side by side in it
    folder = root / name
    with FileLock(str(folder) + ".lock"):
        if not (folder / ".done").exists():
            folder.mkdir(exist_ok=True)
            produce(folder)
            (folder / ".done").touch()
    return folder


def quiet_frameworks() -> None:
    """No tips, progress bars or config chatter from the frameworks in test output."""
    import logging
    import warnings

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    for name in ("lightning", "lightning.pytorch", "lightning.fabric", "transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message=r".*(LeafSpec|treespec|does not have many workers|litlogger).*")


def token_dataset(n: int = 64) -> Any:
    import torch

    class Tokens(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return n

        def __getitem__(self, i: int) -> dict[str, Any]:
            ids = torch.randint(0, VOCAB, (SEQ,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": ids, "labels": ids}

    return Tokens()


def gpt2() -> Any:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=VOCAB, n_positions=2 * SEQ, n_embd=EMBD, n_layer=LAYERS, n_head=HEADS,
                        bos_token_id=0, eos_token_id=0, pad_token_id=0)  # fmt: skip
    return GPT2LMHeadModel(config)


def hf_train(callbacks: list[Any], *, max_steps: int = 6, accumulate: int = 2, output_dir: str) -> Any:
    """A real ``Trainer.train()`` of the tiny GPT-2 on the CPU; returns the trainer."""
    from transformers import Trainer, TrainingArguments

    quiet_frameworks()
    args = TrainingArguments(output_dir=output_dir, use_cpu=True, report_to=[], save_strategy="no", logging_strategy="no",
                             disable_tqdm=True, max_steps=max_steps, per_device_train_batch_size=BATCH,
                             gradient_accumulation_steps=accumulate, dataloader_num_workers=0, seed=0,
                             ddp_find_unused_parameters=False)  # fmt: skip
    data = token_dataset(max(64, BATCH * accumulate * max_steps))  # every step in one epoch
    trainer = Trainer(model=gpt2(), args=args, train_dataset=data, callbacks=callbacks)
    with contextlib.redirect_stdout(io.StringIO()) if os.environ.get("QUIET_TRAIN") else contextlib.nullcontext():
        trainer.train()
    return trainer


def lightning_module() -> Any:
    import lightning.pytorch as pl
    import torch
    from torch import nn

    class Regressor(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Sequential(nn.Linear(FEATURES, WIDTH), nn.ReLU(), nn.Linear(WIDTH, 1))

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            x, y = batch
            return nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    torch.manual_seed(0)
    return Regressor()


def lightning_train(profiler: Any, *, max_steps: int = 6, accumulate: int = 2, devices: int = 1, **trainer_args: Any) -> Any:
    """A real Lightning ``Trainer.fit()`` of a small regressor on the CPU; returns the trainer."""
    import lightning.pytorch as pl
    import torch

    quiet_frameworks()
    rows = 16 * ROWS * max(max_steps, 1)  # enough batches for every step in one epoch
    data = torch.utils.data.TensorDataset(torch.randn(rows, FEATURES, generator=torch.Generator().manual_seed(0)),
                                          torch.randn(rows, 1, generator=torch.Generator().manual_seed(1)))  # fmt: skip
    loader = torch.utils.data.DataLoader(data, batch_size=ROWS)
    strategy = "ddp" if devices > 1 else "auto"
    trainer = pl.Trainer(max_steps=max_steps, accelerator="cpu", devices=devices, strategy=strategy, profiler=profiler,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                         accumulate_grad_batches=accumulate, num_sanity_val_steps=0, **trainer_args)  # fmt: skip
    trainer.fit(lightning_module(), loader)
    return trainer


def accelerate_train(prof: Any, steps: int = 6) -> None:
    """An ``accelerate`` loop (the Accelerator prepares model, optimizer and data; DDP across
    ranks), ``prof.step()`` once per iteration."""
    import torch
    from accelerate import Accelerator
    from torch import nn

    accelerator = Accelerator(cpu=True)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    model, opt, loader = accelerator.prepare(model, opt, loader)
    for step, (x, y) in enumerate(loader):
        if step == steps:
            break
        loss = nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
        prof.step()


def main(out: str) -> None:
    """Every rank trains under each integration; rank 0 saves the merged jobs."""
    import torch.distributed as dist

    import torchprof
    from torchprof.integrations import gather_ranks
    from torchprof.integrations.hf import TorchprofCallback
    from torchprof.integrations.lightning import TorchprofProfiler

    quiet_frameworks()
    rank = int(os.environ["RANK"])
    saved: dict[str, Any] = {}

    callback = TorchprofCallback(steps=[2, 3], output_dir=os.path.join(out, "hf"))
    hf_train([callback], max_steps=4, output_dir=os.path.join(out, "hf-trainer"))
    saved["hf"] = (callback.result, callback.rank_result)

    profiler = TorchprofProfiler(steps=[2, 3], dirpath=os.path.join(out, "lightning"))
    lightning_train(profiler, max_steps=4, devices=2)
    saved["lightning"] = (profiler.result, profiler.rank_result)

    with torchprof.Profiler(steps=[2, 3]) as prof:
        accelerate_train(prof, steps=5)
    saved["accelerate"] = (gather_ranks(prof, os.path.join(out, "accelerate")), prof.result)

    for name, (job, own) in saved.items():
        own.save(os.path.join(out, f"{name}.rank{rank}.json"))
        if rank == 0:
            job.save(os.path.join(out, f"{name}.job.json"))
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    if sys.platform == "linux":  # die with torchrun even if it is killed (each rank has its own session)
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    main(sys.argv[1])
