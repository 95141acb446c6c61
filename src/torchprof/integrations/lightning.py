"""Profile chosen optimizer steps of a Lightning ``Trainer`` into the layer tree.

>>> from torchprof.integrations.lightning import TorchprofProfiler
>>> profiler = TorchprofProfiler(steps=[10, 11, 12])
>>> Trainer(profiler=profiler, max_steps=100).fit(model, data)
>>> profiler.result        # a torchprof.Result; profiler.summary() is its table

Lightning's actions (``run_training_batch``, ``[LightningModule]Model.training_step``,
``[_TrainingEpochLoop].train_dataloader_next``, ...) become regions of the tree, so data
loading, the optimizer and the hooks show beside the layers. Needs ``lightning``
(``pip install 'jupyter-torchprof[lightning]'``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

try:
    from lightning.pytorch.profilers import Profiler
except ImportError as exc:  # pragma: no cover - exercised without lightning installed
    raise ImportError(
        "torchprof.integrations.lightning needs lightning: pip install 'jupyter-torchprof[lightning]'"
    ) from exc

from ._ranks import gather_ranks, world_size
from ._report import in_kernel, labelled, show
from ._window import StepWindow

if TYPE_CHECKING:
    from .._result import Result

__all__ = ["TorchprofProfiler"]

#: Actions that span many steps: never regions (a step's range would open inside them).
SPANNING = frozenset({"run_training_epoch"})
#: The LightningModule hooks the window follows: training begins, a batch ends, training ends.
_HOOK = "[LightningModule]{}.{}"


class TorchprofProfiler(Profiler):  # type: ignore[misc]
    """A Lightning ``Profiler`` that records the chosen optimizer steps layer by layer.

    Args:
        steps: the optimizer steps to record, counted from 1 as ``trainer.global_step`` counts
            them (step N is the one after which ``global_step`` is N; with gradient
            accumulation it holds all its batches), e.g. ``[10, 11, 12]``. Default: 3 steps
            after the first 5 (where ``torch.compile`` compiles); a shorter run's last steps.
            Outside the chosen steps (and one warm-up step) torchprof is not installed at all.
        dirpath, filename: as for Lightning's profilers: with ``filename`` (``dirpath``
            defaults to the trainer's log dir) or ``dirpath``, the summary table goes to
            ``{stage}-{filename}.txt``, and the interactive report (``.html``), the chrome trace
            (``.json.gz``) and a Markdown summary (``.md``) are written beside it.
        memory, shapes, stack, flops, cuda: as for :class:`torchprof.Profiler`.
        display: show the widget when training ends (None: in a notebook); otherwise the
            summary is printed and the table logged, as Lightning's profilers do.

    After ``fit``, :attr:`result` is the profile (in a distributed job: the merged job on
    rank 0, :attr:`rank_result` this rank's own), every step's wall time in its
    ``step_times``; :meth:`summary` returns its table.
    """

    def __init__(
        self,
        steps: Iterable[int] | int | None = None,
        *,
        dirpath: str | os.PathLike[str] | None = None,
        filename: str | None = None,
        memory: bool = False,
        shapes: bool = False,
        stack: bool = False,
        flops: bool = True,
        cuda: bool | None = None,
        display: bool | None = None,
    ) -> None:
        super().__init__(dirpath=os.fspath(dirpath) if dirpath is not None else None, filename=filename)
        options = {"memory": memory, "shapes": shapes, "stack": stack, "flops": flops, "cuda": cuda}
        self._window = StepWindow(steps, options, trainer="Lightning Trainer")
        self._explicit_dir = dirpath is not None
        self.display = display
        self.result: Result | None = None
        """The profile of the last ``fit`` (None before, or when none of the chosen steps ran)."""
        self.rank_result: Result | None = None
        """This rank's own profile (the same as :attr:`result` in one process)."""
        self._lightning_module: Any = None  # set by the Trainer, as for Lightning's PyTorchProfiler
        self._regions: list[tuple[str, Any]] = []  # open regions, innermost last
        self._hooks: tuple[str, str, str] = ("", "", "")  # the names of train start, batch end, train end
        self._hook_names: frozenset[str] = frozenset()
        self._global_step = 0
        self._shown = False

    @property
    def steps(self) -> list[int]:
        """The steps recorded in the last run (the chosen ones, or the default for its length)."""
        return list(self._window.steps)

    # -- Lightning's profiler API ---------------------------------------------------------------
    def setup(self, stage: str, local_rank: int | None = None, log_dir: str | None = None) -> None:
        super().setup(stage, local_rank=local_rank, log_dir=log_dir)
        module = self._lightning_module
        name = module.__class__.__name__ if module is not None else ""  # through the weak proxy, as Lightning names it
        self._hooks = (_HOOK.format(name, "on_train_start"), _HOOK.format(name, "on_train_batch_end"),
                       _HOOK.format(name, "on_train_end"))  # fmt: skip
        self._hook_names = frozenset(self._hooks)

    def start(self, action_name: str) -> None:
        window = self._window
        if window.prof is None or not window.recording or action_name in SPANNING:
            return  # the fast way out: Lightning calls this for every action of every step
        try:
            region = window.region(action_name)
            if region is not None:
                region.__enter__()
                self._regions.append((action_name, region))
        except Exception as exc:  # noqa: BLE001 - never into the user's training
            window.disable(exc)

    def stop(self, action_name: str) -> None:
        window = self._window
        try:
            if self._regions:
                self._close(action_name)
            if action_name not in self._hook_names:
                return
            trainer = self._lightning_module.trainer
            started, batch_end, _ = self._hooks
            if action_name == batch_end:
                # A batch that stepped the optimizer ends its step (several batches make one step
                # under gradient accumulation; global_step counts optimizer steps).
                if trainer.global_step != self._global_step:
                    self._global_step = trainer.global_step
                    self._close()
                    window.boundary()
            elif action_name == started:
                self._global_step = trainer.global_step
                self.result = self.rank_result = None
                self._shown = False
                module = trainer.lightning_module  # the module itself, not the Trainer's weak proxy of it
                window.begin(trainer.global_step + 1, _last_step(trainer), labelled(module, "model"), module)
            else:
                self._close()
                self._finish()
        except Exception as exc:  # noqa: BLE001
            self._regions.clear()
            window.disable(exc)

    def summary(self) -> str:
        """The layer table of the recorded steps of the last ``fit`` ("" when nothing was recorded,
        and in Lightning's other stages: only training steps are recorded)."""
        if self.result is None or self._stage not in (None, "fit"):
            return ""
        return self.result.table()

    def describe(self) -> None:
        """When training ends (Lightning calls this): the widget in a notebook; elsewhere a short
        summary printed and the table logged (or written to ``{stage}-{filename}.txt``), with
        the report files beside it when a ``filename`` or ``dirpath`` was given."""
        result = self.result
        if result is not None and not self._shown and self.rank_result is not None:
            self._shown = True
            display = in_kernel() if self.display is None else self.display
            try:
                show(result, self._paths(), display)
            except Exception as exc:  # noqa: BLE001
                self._window.disable(exc)
            if display:
                self.teardown(stage=self._stage)
                return
        super().describe()

    def teardown(self, stage: str | None) -> None:
        # Lightning tears down after each stage, and when the profiler is deleted: a capture left
        # running by a run that raised inside the chosen steps ends here.
        if self._window.capturing:
            self._close()
            self._window.close("the trainer tore down inside the recorded steps")
        super().teardown(stage=stage)

    def __del__(self) -> None:
        # Lightning's __del__ tears down; a copy made without __init__ (a deepcopy or unpickling
        # of the module that holds the trainer) has nothing to tear down, and must not say so on stderr.
        if "_stage" in self.__dict__ and "_window" in self.__dict__:
            super().__del__()

    # -- helpers ----------------------------------------------------------------------------------
    def _finish(self) -> None:
        self.rank_result = self._window.end()
        if self.rank_result is None:
            return
        result: Result | None = self.rank_result
        if world_size(self.rank_result) > 1:
            out = os.path.join(str(self.dirpath), f"{self._stem()}-traces") if self._writes_files() else None
            result = gather_ranks(self.rank_result, out)
        self.result = result if result is not None else self.rank_result
        self._shown = result is None  # only the rank holding the job (rank 0) reports it

    def _close(self, action_name: str | None = None) -> None:
        """Close the open regions down to ``action_name``'s (all of them without a name: a step
        ends, and no region spans two steps)."""
        regions = self._regions
        if action_name is not None and all(name != action_name for name, _ in regions):
            return
        while regions:
            name, region = regions.pop()
            region.__exit__(None, None, None)
            if name == action_name:
                return

    def _writes_files(self) -> bool:
        return self.dirpath is not None and (self._explicit_dir or bool(self.filename))

    def _stem(self) -> str:
        return "-".join(part for part in (self._stage, self.filename or "torchprof") if part)

    def _paths(self) -> dict[str, str]:
        if not self._writes_files():
            return {}
        base = os.path.join(str(self.dirpath), self._stem())
        return {"html": base + ".html", "trace": base + ".json.gz", "markdown": base + ".md"}


def _last_step(trainer: Any) -> int | None:
    """The run's last optimizer step, when Lightning knows it."""
    if trainer.max_steps is not None and trainer.max_steps > 0:
        return int(trainer.max_steps)
    try:
        total = trainer.estimated_stepping_batches
    except Exception:  # noqa: BLE001 - an iterable dataset of unknown length
        return None
    return int(total) if total != float("inf") else None
