"""Profile chosen optimizer steps of a Hugging Face ``transformers.Trainer`` into the layer tree.

>>> from torchprof.integrations.hf import TorchprofCallback
>>> cb = TorchprofCallback(steps=[10, 11, 12])
>>> Trainer(model=model, args=args, train_dataset=ds, callbacks=[cb]).train()
>>> cb.result            # a torchprof.Result: the widget in a notebook, prof.df, print(cb.result)

Needs ``transformers`` (``pip install 'jupyter-torchprof[hf]'``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

try:
    from transformers import TrainerCallback
except ImportError as exc:  # pragma: no cover - exercised without transformers installed
    raise ImportError(
        "torchprof.integrations.hf needs transformers: pip install 'jupyter-torchprof[hf]'"
    ) from exc

from ._ranks import gather_ranks, world_size
from ._report import OUTPUT_FILES, labelled, show
from ._window import StepWindow

if TYPE_CHECKING:
    from .._result import Result

__all__ = ["TorchprofCallback"]


class TorchprofCallback(TrainerCallback):  # type: ignore[misc]
    """A ``TrainerCallback`` that records the chosen optimizer steps layer by layer.

    Args:
        steps: the optimizer steps to record, numbered as ``state.global_step`` counts them
            (the first step is 1; step N is the one after which ``global_step`` is N), e.g.
            ``[10, 11, 12]`` or ``range(100, 103)``. Default: 3 steps after the first 5 (where
            ``torch.compile`` compiles and the optimizer builds its state); a shorter run's last
            steps. Each step holds its data loading, every gradient-accumulation micro-batch,
            the optimizer, and the trainer's work since the previous step (logging, evaluation).
            Outside the chosen steps (and the warm-up step before them) torchprof is not
            installed at all.
        memory, shapes, stack, flops, cuda: as for :class:`torchprof.Profiler`.
        output_dir: also write ``torchprof.html`` (the interactive report), the chrome trace and
            ``torchprof.md`` there (with several ranks, each rank's trace in ``traces/``).
        display: show the widget (None: in a notebook) or print a short summary when training
            ends; False prints the summary even in a notebook.

    After training, :attr:`result` is the profile (in a distributed job: the merged job on rank
    0, this rank's own elsewhere; :attr:`rank_result` is always this rank's), with every step's
    wall time in ``result.step_times``.
    """

    def __init__(
        self,
        steps: Iterable[int] | int | None = None,
        *,
        memory: bool = False,
        shapes: bool = False,
        stack: bool = False,
        flops: bool = True,
        cuda: bool | None = None,
        output_dir: str | os.PathLike[str] | None = None,
        display: bool | None = None,
    ) -> None:
        options = {"memory": memory, "shapes": shapes, "stack": stack, "flops": flops, "cuda": cuda}
        self._window = StepWindow(steps, options, trainer="Trainer")
        self.output_dir = os.fspath(output_dir) if output_dir is not None else None
        self.display = display
        self.result: Result | None = None
        """The profile of the last training run (None before one ended, or when none of the
        chosen steps ran)."""
        self.rank_result: Result | None = None
        """This rank's own profile (the same as :attr:`result` in one process)."""

    @property
    def steps(self) -> list[int]:
        """The steps recorded in the last run (the chosen ones, or the default for its length)."""
        return list(self._window.steps)

    # -- the trainer's events (each guarded: a failure of ours never stops the training) ---------
    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        window = self._window
        try:
            model = kwargs.get("model")
            self.result = self.rank_result = None
            window.begin(state.global_step + 1, state.max_steps or None, labelled(model, "model"), model)
        except Exception as exc:  # noqa: BLE001 - never into the user's training
            window.disable(exc)

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        window = self._window
        try:
            window.boundary()
        except Exception as exc:  # noqa: BLE001
            window.disable(exc)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        window = self._window
        try:
            self.rank_result = window.end()
            if self.rank_result is None:
                return
            result: Result | None = self.rank_result
            if world_size(self.rank_result) > 1:
                out = os.path.join(self.output_dir, "traces") if self.output_dir else None
                result = gather_ranks(self.rank_result, out)
            self.result = result if result is not None else self.rank_result
            if result is not None:  # rank 0 (or the only process) reports
                paths = {kind: os.path.join(self.output_dir, name) for kind, name in OUTPUT_FILES.items()} if self.output_dir else {}
                show(result, paths, self.display)
        except Exception as exc:  # noqa: BLE001
            window.disable(exc)
