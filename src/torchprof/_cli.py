"""The command line: ``python -m torchprof [options] script.py [args]``, ``torchprof FILE`` and
``torchprof demo``.

Like ``python -m cProfile``: the script runs as ``__main__`` with its own ``sys.argv``, under a
:class:`~torchprof.Profiler`, and the layer tree is printed when it ends (also when it raises
or is interrupted: what was profiled until then is kept). A ``.json`` or ``.json.gz`` FILE (a
torch.profiler chrome trace or a profile saved by ``prof.save``) is opened instead of run.
``torchprof demo [MODEL]`` profiles one training step of any torchvision model.

What it shares with the notebook magic (option splitting, output files, view state) is in
:mod:`torchprof._options`.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import runpy
import sys
import textwrap
import time
import traceback
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._demo import DEMO, TorchvisionMismatch, build_demo_parser, demo_step, model_names, unknown_model
from ._errors import OutputError
from ._options import (
    add_options,
    check_output_paths,
    expanded_like_table,
    options_end,
    parse_peak_flops,
    state_from_options,
    takes_value,
    write_outputs,
)
from ._torchrun import job, launched_by_torchrun, report_rank
from ._views.format import printable
from ._vocab import DEFAULT_SORT

if TYPE_CHECKING:
    from ._profiler import Profiler
    from ._result import Result

#: Endings of the files the command line opens instead of running (traces and saved profiles).
PROFILE_FILE_SUFFIXES = (".json", ".json.gz")
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130  # what a shell reports for a process stopped by Ctrl-C


# -- the command line ------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchprof",
        usage="%(prog)s [options] (script.py [args ...] | -m module [args ...] | demo [MODEL] [demo options] | FILE.json[.gz])",
        description="Profile a PyTorch script layer by layer (forward and backward time, memory and FLOPs\n"
                    "per nn.Module) and print the layer tree, like python -m cProfile; or open a\n"
                    "torch.profiler chrome trace or a profile saved by prof.save() (.json or .json.gz).",
        epilog="examples:\n  torchprof train.py --epochs 1\n  torchprof --html report.html -m mypkg.train\n"
               "  torchprof --ops trace.json.gz      # a trace recorded elsewhere, with the ops\n"
               "  torchprof demo resnet18            # one training step of a torchvision model\n"
               "  torchprof demo vit_b_16 --batch 2 --html vit.html",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    add_options(parser, "cli")
    return parser


def split_argv(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[list[str], str | None, str | None, list[str]]:
    """``(our options, module, script, the program's arguments)``.

    Our options come first; the first word that is not one of them (or its value) is the script
    (``demo`` included), and everything after it belongs to the script, as with ``python`` and
    ``python -m cProfile``. ``-m module`` ends our options the same way.
    """
    i = options_end(argv, takes_value(parser), ends=lambda w: w.startswith("-m") and not w.startswith("--"))
    if i == len(argv):
        return argv, None, None, []
    word = argv[i]
    if word == "--":
        rest = argv[i + 1 :]
        return argv[:i], None, rest[0] if rest else None, rest[1:]
    if word.startswith("-m") and not word.startswith("--"):
        module = word[2:] or (argv[i + 1] if i + 1 < len(argv) else None)
        if module is None:
            return argv[: i + 1], None, None, []  # argparse will say -m needs a value
        return argv[:i], module, None, argv[i + (1 if word[2:] else 2) :]
    return argv[:i], None, word, argv[i + 1 :]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m torchprof`` and the ``torchprof`` console script; the exit code."""
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt:  # Ctrl-C while printing or writing: no traceback of ours
        print("KeyboardInterrupt", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `torchprof ... | head`: the reader has what it wanted
        # Later writes (the interpreter's last flush included) go nowhere, not into a traceback.
        with contextlib.suppress(Exception):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _main(argv: list[str]) -> int:
    parser = build_parser()
    options, module, target, rest = split_argv(parser, argv)
    files: list[str] = []
    if target is not None and target.lower().endswith(PROFILE_FILE_SUFFIXES):
        # Files are opened, not run: more files after the first are the ranks of one job (a
        # shell's rank*.json), and options after them are ours (a word that is neither is an error).
        more = next((i for i, w in enumerate(rest) if w.startswith("-") or not w.lower().endswith(PROFILE_FILE_SUFFIXES)), len(rest))
        if options_end(rest[more:], takes_value(parser)) == len(rest) - more:
            files, options, rest = [target, *rest[:more]], options + rest[more:], []
    elif target is not None and target != DEMO and _trace_folder(target):
        files = [target]
    if "--compare" in options:
        return run_compare(parser, argv)
    try:
        args = parser.parse_args(options)
    except SystemExit as exc:  # --help, or a usage error argparse already printed
        return _exit_code(exc.code)
    args.module, args.target, args.args = module, target, rest
    if target is None and module is None:
        parser.print_usage(sys.stderr)
        print("torchprof: error: give a script to profile, -m module, or 'demo'", file=sys.stderr)
        return EXIT_USAGE
    problem = _check_view_options(args)
    if problem:
        parser.print_usage(sys.stderr)
        print(printable(f"torchprof: error: {problem}"), file=sys.stderr)
        return EXIT_USAGE
    if target == DEMO:
        return run_demo(args)
    if files or (target is not None and target.lower().endswith(PROFILE_FILE_SUFFIXES)):
        args.files = files or [target]
        return open_file(args)
    saved = sys.argv, list(sys.path)
    try:
        return run_script(args)
    finally:
        sys.argv, sys.path[:] = saved


def _check_view_options(args: argparse.Namespace) -> str | None:
    from ._views.rows import resolve_sort

    try:
        resolve_sort(args.sort)
    except ValueError as exc:
        return f"--sort: {exc}"
    if args.min_pct < 0:
        return "--min-pct must be 0 or more"
    if args.depth is not None and args.depth < 0:
        return "--depth must be 0 or more"
    if args.width is not None and args.width < 0:
        return "--width must be 0 (no limit) or more"
    try:
        check_output_paths(html=args.html, csv=args.csv, trace=args.trace, md=None if args.md == "-" else args.md)
    except OutputError as exc:
        return str(exc)
    try:
        args.peak_flops = parse_peak_flops(args.peak_flops)
    except ValueError as exc:
        return f"--peak-flops: {exc}"
    return None


def _exit_code(code: Any) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # sys.exit("message") prints the message and exits with 1
    return 1


def _profiler(args: argparse.Namespace, name: str) -> Profiler:
    from ._profiler import Profiler

    return Profiler(cuda=True if args.cuda else None, memory=args.memory, shapes=args.shapes, stack=args.stack,
                    flops=args.flops, name=name, peak_flops=args.peak_flops)  # fmt: skip


def _width(args: argparse.Namespace) -> int | None:
    """The characters the printed output fits in: ``--width`` (0: no limit), else the terminal's."""
    from ._views.table import terminal_width

    return (args.width or None) if args.width is not None else terminal_width()


def _report(prof: Result, args: argparse.Namespace, *, title: str) -> int:
    """Print the summary line, the tree and the top insights; write the requested files (the
    HTML report opens with the rows the terminal showed). With ``--md -`` only the Markdown
    summary is printed. 0, or 1 if a file failed."""
    if args.md == "-":
        print(prof.to_markdown(), end="")
    else:
        width = _width(args)
        print("\n".join(textwrap.wrap(printable(title), width, break_long_words=False, break_on_hyphens=False)) if width else printable(title))
        print(prof.summary_line(notes=False, width=width))  # (the table prints the notes under it)
        print(prof.table(min_pct=args.min_pct, sort_by=args.sort, show_ops=args.ops, max_depth=args.depth,
                         colour=_wants_colour(), width=width))  # fmt: skip
        print(_insights_text(prof, width))
    state = state_from_options(prof, min_pct=args.min_pct, sort_by=args.sort, show_ops=args.ops)
    state["expanded"] = expanded_like_table(prof, min_pct=args.min_pct, sort_by=args.sort, show_ops=args.ops,
                                            max_depth=args.depth)  # fmt: skip
    status = 0
    if args.md and args.md != "-":
        try:
            prof.to_markdown(os.path.expanduser(args.md))
            print(printable(f"torchprof: wrote {args.md}"))
        except (OSError, ValueError) as exc:
            print(printable(f"torchprof: error: --md {args.md}: {exc}"), file=sys.stderr)
            status = 1
    try:
        for path in write_outputs(prof, html=args.html, csv=args.csv, trace=args.trace, state=state):
            print(printable(f"torchprof: wrote {path}"), file=sys.stderr if args.md == "-" else sys.stdout)
    except OutputError as exc:
        print(printable(f"torchprof: error: {exc}"), file=sys.stderr)
        return 1
    return status


#: Insights the command line prints under the table.
CLI_INSIGHTS = 3


def _insights_text(prof: Result, width: int | None) -> str:
    """The top findings of ``prof.insights()``, numbered, wrapped to ``width``; one line when none."""
    import textwrap

    found = prof._findings()  # as prof.insights() ranks them, without importing pandas
    if not found:
        return "Insights: none (no rule fired)"
    lines = [f"Insights ({len(found)}; prof.insights() has them all):" if len(found) > CLI_INSIGHTS else "Insights:"]
    for n, f in enumerate(found[:CLI_INSIGHTS], 1):
        text = printable(f"{n}. [{f.rule}] {f.message}. Try: {f.advice}.")
        lines += textwrap.wrap(text, width, subsequent_indent="   ", break_long_words=False) if width else [text]
    return "\n".join(lines)


def _wants_colour() -> bool:
    from ._views.table import wants_colour

    return wants_colour(sys.stdout)


# -- comparing two runs --------------------------------------------------------------------------------
def run_compare(parser: argparse.ArgumentParser, argv: list[str]) -> int:
    """``torchprof --compare BASE NEW [--html FILE] [--csv FILE] [--min-pct P] [--sort COL] [--ops]
    [--depth N]``: the diff tree of two traces or saved profiles; --csv writes ``cmp.df``."""
    from ._comparison import compare
    from ._errors import TraceError
    from ._views.compare import resolve_sort

    try:
        args = parser.parse_args(argv)  # the whole line: a script after the two runs is an error
    except SystemExit as exc:
        return _exit_code(exc.code)
    sort = args.sort if any(w == "--sort" or w.startswith("--sort=") for w in argv) else None
    problem = None
    try:
        resolve_sort(sort, DEFAULT_SORT)
        check_output_paths(html=args.html, csv=args.csv)
    except (ValueError, OutputError) as exc:
        problem = str(exc)
    if args.trace or args.out:
        problem = "--trace and --out do not apply to --compare"
    if problem:
        parser.print_usage(sys.stderr)
        print(printable(f"torchprof: error: {problem}"), file=sys.stderr)
        return EXIT_USAGE
    try:
        cmp = compare(*args.compare)
    except (OSError, TraceError) as exc:
        print(printable(f"torchprof: error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    print(printable(f"torchprof: {cmp.label}"))
    print(cmp.table(min_pct=args.min_pct, sort_by=sort, show_ops=args.ops, max_depth=args.depth, colour=_wants_colour(),
                    width=_width(args)))  # fmt: skip
    state: dict[str, Any] = {"min_pct": args.min_pct, "show_ops": args.ops}
    if sort is not None:
        state["sort_by"] = sort
    if args.depth is not None:
        from ._views.state import expanded_to_depth

        state["expanded"] = expanded_to_depth(cmp._diff.tree, args.depth)
    status = 0
    for option, path, write in (("html", args.html, lambda p: cmp.to_html(p, **state)),
                                ("csv", args.csv, lambda p: _write_csv(cmp.df, p))):  # fmt: skip
        if not path:
            continue
        try:
            write(os.path.expanduser(path))
            print(printable(f"torchprof: wrote {path}"))
        except (OSError, ValueError) as exc:
            print(printable(f"torchprof: error: --{option} {path}: {exc}"), file=sys.stderr)
            status = 1
    return status


def _write_csv(df: Any, path: str) -> str:
    from ._views.frame import write_csv

    return write_csv(df, path)
# -- files --------------------------------------------------------------------------------------------
def _trace_folder(path: str) -> bool:
    """A folder to open as the ranks of one job: trace files in it, and no ``__main__.py``."""
    return (os.path.isdir(path) and not os.path.exists(os.path.join(path, "__main__.py"))
            and any(name.lower().endswith(PROFILE_FILE_SUFFIXES) for name in os.listdir(path)))  # fmt: skip


def open_file(args: argparse.Namespace) -> int:
    """Print the tree of a chrome trace or a saved profile (and write the requested files), as
    for a script run, instead of running the file; of several traces or a folder of them, the
    job they are the ranks of."""
    from ._errors import TraceError
    from ._load import load_trace, open_profile_file

    path = args.target
    if len(args.files) > 1 or os.path.isdir(path):
        try:
            job = load_trace(args.files if len(args.files) > 1 else path, flops=args.flops, peak_flops=args.peak_flops)
        except (TraceError, OSError, ValueError) as exc:
            print(printable(f"torchprof: error: {exc}"), file=sys.stderr)
            return 1
        where = path if len(args.files) == 1 else f"{path} and {len(args.files) - 1} more"
        return _report(job, args, title=f"torchprof: {where} (a job of {len(args.files) if len(args.files) > 1 else len(job.ranks)} traces)")
    if args.args:
        print(printable(f"torchprof: error: {path} is opened, not run: it takes no arguments ({' '.join(args.args)})"),
              file=sys.stderr)  # fmt: skip
        return EXIT_USAGE
    if not os.path.isfile(path):
        print(printable(f"torchprof: error: cannot open {path!r}: no such file"), file=sys.stderr)
        return EXIT_USAGE
    try:
        prof, what = open_profile_file(path, flops=args.flops, peak_flops=args.peak_flops)
    except (TraceError, OSError) as exc:
        print(printable(f"torchprof: error: {exc}"), file=sys.stderr)
        return 1
    return _report(prof, args, title=f"torchprof: {path} ({what})")


# -- scripts ------------------------------------------------------------------------------------------
def run_script(args: argparse.Namespace) -> int:
    """Run a script or module as ``__main__`` under the Profiler and print the tree.

    The script's exceptions are reported as Python would report them (its own frames only, none
    of ours or runpy's), after the profile collected until then; the exit code is the script's
    (``sys.exit(n)``), 1 for an exception and 130 for Ctrl-C, as the interpreter itself gives.
    """
    from ._errors import ProfilerError, ProfilerWarning

    # The script may change directory: its output files and traceback are read from here.
    start_dir = os.getcwd()
    if args.module is not None:
        label = args.module
        sys.argv = [args.module, *args.args]  # runpy replaces argv[0] with the module's file
        sys.path.insert(0, os.getcwd())  # as `python -m module` does (the console script has no cwd on the path)
        run = lambda: runpy.run_module(args.module, run_name="__main__", alter_sys=True)  # noqa: E731
        origin = None
    else:
        script = args.target
        if not os.path.exists(script):
            print(f"torchprof: error: cannot open {script!r}: no such file", file=sys.stderr)
            return EXIT_USAGE
        if os.path.isdir(script) and not os.path.exists(os.path.join(script, "__main__.py")):
            print(f"torchprof: error: {script!r} is a folder without __main__.py or trace files (*.json, *.json.gz)", file=sys.stderr)
            return EXIT_USAGE
        label = os.path.basename(script)
        origin = os.path.abspath(script)
        sys.argv = [script, *args.args]
        sys.path.insert(0, os.path.dirname(origin))  # as `python script.py` does
        # By its absolute path, as `python script.py` runs it: __file__ and the traceback's
        # file names stay right after the script changes directory.
        run = lambda: runpy.run_path(origin, run_name="__main__")  # noqa: E731
    try:
        prof = _profiler(args, label)
    except (ProfilerError, TypeError) as exc:
        print(printable(f"torchprof: error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    code = 0
    failure: BaseException | None = None
    failure_told: BaseException | None = None  # a rank's failure, said before its report (kept till the end)
    # What the profile missed is said once, in the summary line under the title, not also as a
    # Python warning (located in runpy, the script's caller, or in our report).
    quiet = _HeldWarnings(ProfilerWarning)
    try:
        with prof:
            _run_to_clean_exit(run)
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt as exc:
        failure, code = exc, EXIT_INTERRUPTED
    except BaseException as exc:  # noqa: BLE001 - reported like the interpreter would, below
        failure, code = exc, 1
    sys.stdout.flush()
    with contextlib.suppress(OSError):  # a folder the script removed: paths are then the script's
        os.chdir(start_dir)
    if args.module is not None and _module_not_found(failure):
        # `python -m` says this in one line and runs nothing: no profile of runpy's search.
        quiet.release(show=False)
        print(printable(f"torchprof: error: {failure}"), file=sys.stderr)
        return EXIT_USAGE
    try:
        prof.result  # noqa: B018 - raises where the Profiler never started
    except ProfilerError:
        # Nothing was profiled: a Ctrl-C (or a failure) while the Profiler started, before the
        # script ran. No table, no traceback of ours: what happened, and the script's exit code.
        quiet.release(show=False)
        what = "interrupted" if isinstance(failure, KeyboardInterrupt) else "stopped"
        print(printable(f"torchprof: {label}: {what} before anything was profiled"), file=sys.stderr)
        if failure is not None and not isinstance(failure, KeyboardInterrupt):
            _print_user_traceback(failure, origin)
        return code or 1
    # As cProfile does: the profile first (also of a run that failed), the error last.
    title = f"torchprof: {label}" + (" (incomplete: the script did not finish)" if failure is not None else "")
    try:
        if args.out is None and not launched_by_torchrun() and len(prof.result.tree) <= 1 and not prof.result.summary.get("warnings"):
            # A script's --help, one that exits early: no table of nothing, no report of it.
            wanted = any(path for path in (args.html, args.csv, args.trace, args.md))
            print(printable(f"torchprof: {label}: nothing was recorded (no torch operation ran)"
                            + ("; no file written" if wanted else "")))  # fmt: skip
            status = 0
        elif args.out is not None or launched_by_torchrun():
            told = None if failure is None else printable(f"{type(failure).__name__}: {failure}")
            if failure is not None and not isinstance(failure, KeyboardInterrupt) and job()[1] > 1:
                # Said first: the job may be stopped (torchrun ends every rank once one fails)
                # before this rank's report is done, and the traceback is what says why.
                sys.stdout.flush()
                _print_user_traceback(failure, origin)
                failure_told, failure = failure, None
            status = report_rank(prof.result, args, title, _report, close_group=True, failed=told)
        else:
            status = _report(prof.result, args, title=title)
    finally:
        quiet.release(said=prof.result.summary.get("warnings") or ())
    if failure is not None:
        sys.stdout.flush()
        _print_user_traceback(failure, origin)
    shown = failure if failure is not None else failure_told
    if isinstance(shown, ProfilerError) and "already running" in str(shown):
        print("torchprof: the script starts a profiler of its own, and `python -m torchprof` already profiles "
                  "the whole script: run it with python, or drop the script's Profiler", file=sys.stderr)  # fmt: skip
    # The profile holds the script's root modules (for their parameter counts): let
    # them go now, as they would have gone when the script returned. A DistributedDataParallel
    # module freed only as the interpreter ends takes its gloo group with it then, and gloo's
    # threads can abort the process there ("terminate called without an active exception").
    prof = failure = failure_told = shown = None  # type: ignore[assignment]
    gc.collect()
    return code or status


class _HeldWarnings:
    """Warnings of ``category`` held from now until :meth:`release` (others show as they come):
    then those whose text a report already said are dropped, and the rest shown."""

    def __init__(self, category: type[Warning]) -> None:
        self.category = category
        self.held: list[tuple[Any, ...]] = []
        self.show = warnings.showwarning

        def hold(message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
            if issubclass(category, self.category):
                self.held.append((message, category, filename, lineno, file, line))
            else:
                self.show(message, category, filename, lineno, file, line)

        self.hold = hold
        warnings.showwarning = hold

    def release(self, said: Any = (), show: bool = True) -> None:
        if warnings.showwarning is self.hold:  # unless the script installed its own since
            warnings.showwarning = self.show
        held, self.held = self.held, []
        for message, *rest in held if show else ():
            if str(message).removeprefix("torchprof: ") not in said:
                self.show(message, *rest)


def _run_to_clean_exit(run: Any) -> None:
    """``run()``; a ``sys.exit(0)`` (or ``sys.exit()``) in it ends it as a return would: the
    profile is complete, not "stopped by SystemExit"."""
    try:
        run()
    except SystemExit as exc:
        if exc.code not in (None, 0):
            raise


def _module_not_found(failure: BaseException | None) -> bool:
    """The ImportError runpy raises itself when ``-m``'s module cannot be found or run (no
    module, a package without ``__main__``), not one from the module's own imports."""
    if not isinstance(failure, ImportError) or failure.__traceback__ is None:
        return False
    tb = failure.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    filename = tb.tb_frame.f_code.co_filename
    return filename == "<frozen runpy>" or os.path.abspath(filename) == os.path.abspath(runpy.__file__)  # frozen in 3.11+


def _ours(filename: str) -> bool:
    return os.path.abspath(filename).startswith(os.path.dirname(os.path.abspath(__file__)) + os.sep)


def _print_user_traceback(exc: BaseException, origin: str | None) -> None:
    """The traceback without the frames of torchprof, runpy and importlib that lead to the
    user's code: it starts at the script (or, for -m, the first frame outside the machinery)."""
    tb = exc.__traceback__
    skip = (os.path.dirname(os.path.abspath(__file__)), os.path.dirname(runpy.__file__))
    start = None
    cursor = tb
    while cursor is not None:
        filename = os.path.abspath(cursor.tb_frame.f_code.co_filename)
        ours = filename.startswith(skip[0] + os.sep) or filename == os.path.abspath(runpy.__file__)
        frozen = cursor.tb_frame.f_code.co_filename.startswith("<frozen")
        if (origin is not None and filename == origin) or (origin is None and not ours and not frozen):
            start = cursor
            break
        cursor = cursor.tb_next
    if isinstance(exc, KeyboardInterrupt):
        print("KeyboardInterrupt", file=sys.stderr)
        return
    from ._errors import OutputError, ProfilerError, TraceError

    if start is not None and isinstance(exc, (ProfilerError, TraceError, OutputError)):
        # torchprof's own error, raised at a call of the user's: their frames, none of ours.
        frames = traceback.extract_tb(start)
        cut = next((i for i, frame in enumerate(frames) if i and _ours(frame.filename)), len(frames))
        lines = ["Traceback (most recent call last):\n", *traceback.format_list(frames[:cut]),
                 *traceback.format_exception_only(type(exc), exc)]  # fmt: skip
    elif start is not None:
        lines = traceback.format_exception(type(exc), exc, start)
    else:
        lines = traceback.format_exception_only(type(exc), exc)
    sys.stderr.write("".join(lines))
    sys.stderr.flush()


# -- the demo (its models and training step: _demo.py) ----------------------------------------------
def run_demo(args: argparse.Namespace) -> int:
    """Profile one training step of a torchvision model (random weights, random data)."""
    demo = build_demo_parser()
    try:
        demo.parse_args(args.args, namespace=args)
    except SystemExit as exc:
        return _exit_code(exc.code)
    problem = _check_view_options(args)
    if problem:
        demo.print_usage(sys.stderr)
        print(printable(f"torchprof demo: error: {problem}"), file=sys.stderr)
        return EXIT_USAGE
    try:
        names = model_names()
    except TorchvisionMismatch as exc:
        print(printable(f"torchprof demo: error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except ImportError:
        print("torchprof demo: error: the demo needs torchvision (pip install 'jupyter-torchprof[demo]')", file=sys.stderr)
        return EXIT_USAGE
    if args.list:
        print("\n".join(names))
        return 0
    problem = unknown_model(args.model, names)
    if problem:
        print(f"torchprof demo: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if args.batch < 1 or (args.size is not None and args.size < 16):
        print("torchprof demo: error: --batch must be 1 or more and --size 16 or more", file=sys.stderr)
        return EXIT_USAGE
    try:
        prof = _profiler(args, args.model)
    except Exception as exc:  # noqa: BLE001 - ProfilerError (--cuda without a GPU) and friends
        print(printable(f"torchprof demo: error: {exc}"), file=sys.stderr)
        return EXIT_USAGE

    t0 = time.perf_counter()
    try:
        step, shape = demo_step(args.model, batch=args.batch, size=args.size)
        step()  # warm-up: first calls allocate, pick kernels and fill caches
        with prof:
            step()
    except KeyboardInterrupt:
        print("KeyboardInterrupt", file=sys.stderr)
        if prof.wall_us is None:
            return EXIT_INTERRUPTED
        _report(prof.result, args, title=f"torchprof demo: {args.model} (interrupted)")
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - a model this demo cannot drive: say so, briefly
        print(printable(f"torchprof demo: error: could not run a training step of {args.model}: {type(exc).__name__}: {exc}"), file=sys.stderr)
        return 1
    title = (f"torchprof demo: {args.model}, one training step (forward, backward, SGD step) on {shape}, "
             f"random weights; {time.perf_counter() - t0:.1f}s with the warm-up step")  # fmt: skip
    return _report(prof.result, args, title=title)
