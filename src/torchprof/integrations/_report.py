"""What a trainer integration shows when training ends: the widget in a notebook, a short summary
elsewhere, and the HTML report, the trace and the Markdown summary in an output folder."""

from __future__ import annotations

import os
import statistics
import sys
import warnings
from typing import TYPE_CHECKING, Any

from .._errors import ProfilerWarning
from .._views.format import printable, time_us

if TYPE_CHECKING:
    from .._result import Result

#: What an output folder gets, by kind: file names for the HF callback's ``output_dir``.
OUTPUT_FILES = {"html": "torchprof.html", "trace": "torchprof-trace.json.gz", "markdown": "torchprof.md"}


def in_kernel() -> bool:
    """Running in a Jupyter kernel (where the widget renders), not a script or terminal IPython."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None


def headline(result: Result) -> str:
    """``torchprof: GPT2LMHeadModel under the Trainer, steps 6-8 recorded (of 1-12)``."""
    meta = result.meta
    parts = [f"torchprof: {result.recording.label} under the {meta.get('trainer', 'trainer')}"]  # a job's label counts its ranks
    if meta.get("steps"):
        run = f" (of {meta['run_steps']})" if meta.get("run_steps") else ""
        plural = "s" if any(c in meta["steps"] for c in "-,") else ""
        parts.append(f"step{plural} {meta['steps']} recorded{run}")
    return printable(", ".join(parts))


def step_time_line(result: Result) -> str | None:
    """``step time over 40 steps: median 3.2ms, slowest step 1 (15ms, 4.7x the median)``: where
    a long run's outliers are (per rank in a merged job); None without step times."""
    times = result.recording.step_times
    walls: list[float] = list(times.get("wall_us", []))
    if not walls:
        return None
    steps, ranks = times["step"], times.get("rank")
    median = statistics.median(walls)
    slowest = max(range(len(walls)), key=walls.__getitem__)
    where = f"step {steps[slowest]}" + (f" of rank {ranks[slowest]}" if ranks else "")
    ratio = f", {walls[slowest] / median:.1f}x the median" if median > 0 else ""
    return (f"step time over {len(set(steps))} steps: median {time_us(median)}, slowest {where} "
            f"({time_us(walls[slowest])}{ratio}); all of them in .step_times")  # fmt: skip


def write_files(result: Result, paths: dict[str, str]) -> list[str]:
    """Write the report files named in ``paths`` (``html``, ``trace``, ``markdown``); returns
    those written. A file that cannot be written is a warning, never an error in the training."""
    written: list[str] = []
    for kind, path in paths.items():
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            if kind == "html":
                result.to_html(path)
            elif kind == "trace":
                if "traces" in result.meta:  # a merged job: each rank's trace is in its traces folder
                    continue
                result.export_chrome_trace(path)
            elif kind == "markdown":
                to_markdown = getattr(result, "to_markdown", None)
                if to_markdown is None:  # a torchprof without Markdown reports
                    continue
                to_markdown(path)
            else:
                continue
        except (OSError, ValueError, RuntimeError, TypeError) as exc:
            warnings.warn(printable(f"torchprof: cannot write {path}: {exc}"), ProfilerWarning, stacklevel=2)
            continue
        written.append(path)
    return written


def show(result: Result, paths: dict[str, str], display: bool | None) -> list[str]:
    """The report of a finished run: its files written, then the widget in a notebook
    (``display`` None: where a kernel runs), a short summary printed otherwise."""
    written = write_files(result, paths)
    lines = [headline(result)]
    if display is None:
        display = in_kernel()
    if not display:
        lines.append(result.summary_line())
    step_line = step_time_line(result)
    if step_line:
        lines.append(step_line)
    if written:
        lines.append("written: " + ", ".join(written))
    print("\n".join(printable(line) for line in lines))
    if display:
        from IPython.display import display as ipython_display

        ipython_display(result)
    return written


def labelled(model: Any, fallback: str) -> str:
    """The profile's name: the model's class (under any wrapper), else ``fallback``."""
    inner = getattr(model, "module", model)  # DDP, DataParallel
    inner = getattr(inner, "_orig_mod", inner)  # torch.compile's wrapper
    return type(inner).__name__ if inner is not None else fallback
