"""``%%torchprof`` and ``%torchprof``: profile a notebook cell (or one statement) layer by layer.

``%load_ext torchprof`` registers both. The cell runs in the user's namespace exactly as it
would without the magic (its names persist, its prints and displays appear, the value of its last
expression is returned like ``%%time`` does), under a :class:`~torchprof.Profiler`; then the
widget shows the layer tree. The profile is bound to ``_torchprof`` (and to ``-o VAR``).
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import sys
from typing import TYPE_CHECKING, Any

from IPython.core import magic_arguments
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class

from ._errors import CellSyntaxError as CellSyntaxError  # re-exported: its home before _errors.py
from ._errors import OutputError
from ._options import (
    check_output_paths,
    magic_options,
    options_end,
    parse_peak_flops,
    state_from_options,
    takes_value,
    write_outputs,
)
from ._views.format import printable

if TYPE_CHECKING:
    from ._profiler import Profiler

#: The name the last profile is always bound to in the user's namespace.
LAST = "_torchprof"
HELP_HINT = "see %%torchprof? for the options"


@magics_class
class TorchprofMagics(Magics):
    @magic_options
    @line_cell_magic
    def torchprof(self, line: str, cell: str | None = None) -> Any:
        """Profile a cell layer by layer: forward and backward time, memory and FLOPs per nn.Module.

        ::

            %%torchprof [options]
            loss = model(x).sum()
            loss.backward()

            %torchprof [options] statement

        The cell runs in your namespace as usual, then the widget shows the layer tree. The
        Profiler is bound to ``_torchprof`` (and to ``-o VAR``): ``_torchprof.df`` is the
        DataFrame, ``print(_torchprof)`` the table. Root modules bound to a variable are labelled
        by its name (``model.layer1.0``), others by their class name.
        """
        __tracebackhide__ = True
        if cell is None:
            options, source = split_statement(self.torchprof.parser, line)
            if not source.strip() and not {m.group(1) for m in _TOKEN.finditer(options)} & {"-h", "--help"}:
                raise UsageError("%torchprof needs a statement to profile, e.g. %torchprof model(x); for a whole cell use %%torchprof")
            first_line = 1
        else:
            options, source = line, cell
            first_line = 2  # the cell's first line sits below the %%torchprof line
        if {m.group(1) for m in _TOKEN.finditer(options)} & {"-h", "--help"}:
            print(self.torchprof.parser.format_help())  # as the command line's --help: nothing runs
            return None
        args = parse_options(self.torchprof, options)
        return run_profiled(self.shell, args, source, first_line)


def parse_options(magic: Any, options: str) -> Any:
    """Parsed options, or one :class:`UsageError` line naming the problem (never a traceback)."""
    try:
        args = magic_arguments.parse_argstring(magic, options)
    except UsageError as exc:
        raise UsageError(f"%%torchprof: {exc}; {HELP_HINT}") from None
    except (SystemExit, ValueError) as exc:  # argparse exits on a few errors; arg_split on bad quoting
        raise UsageError(f"%%torchprof: cannot read the options {options!r} ({exc}); {HELP_HINT}") from None
    if args.warmup < 0:
        raise UsageError("%%torchprof: --warmup must be 0 or more")
    if args.repeat < 1:
        raise UsageError("%%torchprof: --repeat must be 1 or more")
    if args.depth is not None and args.depth < 0:
        raise UsageError("%%torchprof: --depth must be 0 or more")
    if not args.min_pct >= 0:
        raise UsageError("%%torchprof: --min-pct must be 0 or more")
    from ._views.rows import resolve_sort

    try:
        resolve_sort(args.sort)
    except ValueError as exc:
        raise UsageError(f"%%torchprof: --sort: {exc}") from None
    if args.out is not None and not args.out.isidentifier():
        raise UsageError(f"%%torchprof: -o/--out needs a variable name, not {args.out!r}")
    try:
        check_output_paths(html=args.html, csv=args.csv, trace=args.trace)
    except OutputError as exc:
        raise UsageError(f"%%torchprof: {exc}") from None
    args.start_dir = os.getcwd()  # the files' folder, whatever directory the cell moves to
    try:
        args.peak_flops = parse_peak_flops(args.peak_flops)
    except ValueError as exc:
        raise UsageError(f"%%torchprof: --peak-flops: {exc}") from None
    return args


# One token of a magic line: a quoted string or a run of non-blanks.
_TOKEN = re.compile(r"""\s*("[^"]*"|'[^']*'|\S+)""")


def split_statement(parser: Any, line: str) -> tuple[str, str]:
    """Split ``%torchprof`` line input into its leading options and the statement after them.

    Options come first (``%torchprof --text -o p model(x)``); the statement starts at the first
    token that is neither an option nor an option's value, or after ``--``. The statement is
    returned verbatim (quotes and spacing intact), unlike a shell-style split of the whole line.
    """
    tokens = list(_TOKEN.finditer(line))
    i = options_end([m.group(1) for m in tokens], takes_value(parser))
    if i == len(tokens):
        return line.strip(), ""
    if tokens[i].group(1) == "--":
        return line[: tokens[i].start(1)].strip(), line[tokens[i].end() :].lstrip()
    # Leading blanks would be an IndentationError; everything else is the user's.
    return line[: tokens[i].start(1)].strip(), line[tokens[i].start(1) :].lstrip()


def run_profiled(shell: Any, args: Any, source: str, first_line: int = 1) -> Any:
    """Run ``source`` in the user's namespace under a Profiler, then show the profile.

    Like ``%%time``: the code is compiled by IPython (so ``!cmd``, line magics and AST
    transformers work), the body is executed and the last expression, if any, evaluated and
    returned. If the code raises, the partial profile is still bound and shown, then the
    exception propagates for IPython to show as usual; our own frames are hidden from it.
    """
    __tracebackhide__ = True
    from ._errors import ProfilerError

    user_ns = shell.user_ns
    try:
        body, last, quiet = compile_source(shell, source, first_line)
    except SyntaxError as exc:
        raise CellSyntaxError(shell, exc) from None
    prof = make_profiler(user_ns, args)

    for _ in range(args.warmup):
        _execute(shell, body, last)
    value = None
    try:
        try:
            prof.start()
        except ProfilerError as exc:  # another profiler is running
            raise UsageError(f"%%torchprof: {exc}") from None
        # Bound before the code runs, so even an interrupted run leaves its partial profile.
        user_ns[LAST] = prof
        if args.out:
            user_ns[args.out] = prof
        try:
            for _ in range(args.repeat):
                value = _execute(shell, body, last)
        except BaseException as exc:
            prof.interrupted = exc
            raise
        finally:
            prof.stop()
    except UsageError:
        raise
    except BaseException as exc:
        _show_partial(shell, prof, args, exc)
        _hide_our_frames(exc)
        raise
    show(shell, prof, args)
    return None if quiet else value


def compile_source(shell: Any, source: str, first_line: int = 1) -> tuple[Any, Any, bool]:
    """Code objects for the body and the last expression (None when the code ends with a
    statement), and whether a trailing ``;`` asks IPython not to show the value.

    The source is cached under IPython's cell name, so tracebacks show the cell's lines with the
    line numbers the user sees (``first_line`` is where the code starts in the cell).
    """
    __tracebackhide__ = True
    from IPython.core.displayhook import DisplayHook

    transformed = shell.transform_cell(source)
    padded = "\n" * (first_line - 1) + transformed
    filename = shell.compile.cache(padded, shell.execution_count, raw_code="\n" * (first_line - 1) + source)
    tree = shell.compile.ast_parse(padded, filename=filename)
    tree = shell.transform_ast(tree)
    if tree is None:  # an AST transformer rejected the code (it has already said why)
        raise UsageError("%%torchprof: IPython's input transformers rejected this code")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = shell.compile(ast.Expression(tree.body.pop().value), filename, "eval")
    body = shell.compile(ast.Module(tree.body, []), filename, "exec")
    try:
        quiet = last is not None and DisplayHook.semicolon_at_end_of_expression(transformed)
    except Exception:  # noqa: BLE001 - tokenizing is only for the ';' check
        quiet = False
    return body, last, quiet


def _execute(shell: Any, body: Any, last: Any) -> Any:
    __tracebackhide__ = True
    exec(body, shell.user_global_ns, shell.user_ns)
    if last is not None:
        return eval(last, shell.user_global_ns, shell.user_ns)
    return None


def make_profiler(user_ns: dict[str, Any], args: Any) -> Profiler:
    """The Profiler for these options, root modules labelled by their variable names."""
    from ._errors import ProfilerError
    from ._profiler import Profiler

    model = resolve_model(user_ns, args.model) if args.model else None
    labels = module_labels(user_ns)
    if model is not None:
        labels[model] = args.model

    def label_of(module: Any) -> str | None:
        # Asked when a root module first runs: a model the cell itself creates is in the
        # namespace by then, so it too is named after its variable.
        label = labels.get(module)
        if label is None:
            label = module_labels(user_ns).get(module)
        return label

    try:
        return Profiler(model, cuda=True if args.cuda else None, memory=args.memory, shapes=args.shapes,
                        stack=args.stack, flops=args.flops, name="cell", labels=label_of,
                        peak_flops=args.peak_flops)  # fmt: skip
    except ProfilerError as exc:
        raise UsageError(f"%%torchprof --cuda: {exc}" if args.cuda else f"%%torchprof: {exc}") from None


def module_labels(user_ns: dict[str, Any]) -> dict[Any, str]:
    """``{module: variable name}`` for every ``nn.Module`` in the namespace (the first name
    wins when several are bound to one module; private names such as ``_`` are skipped)."""
    import torch

    labels: dict[Any, str] = {}
    module = torch.nn.Module
    for name, value in list(user_ns.items()):
        if name.startswith("_"):
            continue
        try:
            if isinstance(value, module) and value not in labels:
                labels[value] = name
        except Exception:  # noqa: BLE001 - an object whose __class__ or __hash__ raises: not a module to name
            continue
    return labels


def resolve_model(user_ns: dict[str, Any], name: str) -> Any:
    """The module ``--model NAME`` names: a variable or a dotted attribute path of one."""
    import torch

    head, *rest = name.split(".")
    if not head.isidentifier() or head not in user_ns:
        raise UsageError(f"%%torchprof --model {name}: there is no variable {head!r} in the notebook")
    obj = user_ns[head]
    for i, attr in enumerate(rest):
        try:
            obj = getattr(obj, attr)
        except Exception:  # noqa: BLE001 - a property that raises is as absent as a missing one
            where = ".".join([head, *rest[:i]])
            raise UsageError(f"%%torchprof --model {name}: {where} has no attribute {attr!r}") from None
    if not isinstance(obj, torch.nn.Module):
        raise UsageError(f"%%torchprof --model {name}: {name} is a {type(obj).__name__}, not a torch.nn.Module")
    return obj


def show(shell: Any, prof: Profiler, args: Any) -> None:
    """Write the requested files, then show the widget (or the table with ``--text``, or in a
    terminal IPython, which cannot show widgets)."""
    __tracebackhide__ = True
    result = prof.result
    state = state_from_options(result, min_pct=args.min_pct, sort_by=args.sort, show_ops=args.ops, depth=args.depth)
    try:
        written = write_outputs(result, html=args.html, csv=args.csv, trace=args.trace, state=state,
                                base=getattr(args, "start_dir", None))  # fmt: skip
    except OutputError as exc:
        raise UsageError(f"%%torchprof: {exc} (the profile is in {LAST})") from None
    for path in written:
        print(printable(f"torchprof: wrote {path}"))
    if args.text or not _has_widget_frontend(shell):
        result.display(min_pct=args.min_pct, sort_by=args.sort, show_ops=args.ops, max_depth=args.depth)
        return
    from IPython.display import display

    display(result.widget(**state) if state else prof)


def _show_partial(shell: Any, prof: Profiler, args: Any, exc: BaseException) -> None:
    """The cell raised: show what was profiled until then; never mask the cell's exception."""
    __tracebackhide__ = True
    with contextlib.suppress(Exception):
        prof.stop()  # a no-op, unless an interrupt cut the cell's own stop short: then it is finished here
    if prof.wall_us is None:  # it never ran (the profiler could not start)
        return
    try:
        if len(prof.result.tree) > 1:
            print(f"torchprof: the cell raised {type(exc).__name__}; the profile until then is in {LAST}")
            show(shell, prof, args)
    except BaseException as problem:  # noqa: BLE001 - the cell's own exception matters more
        print(printable(f"torchprof: could not show the partial profile ({type(problem).__name__}: {problem})"), file=sys.stderr)


def _hide_our_frames(exc: BaseException) -> None:
    """torchprof's own error raised at a call in the cell (a Profiler inside it, a trace that
    cannot be read): its traceback ends at the cell's line, without torchprof's frames below it,
    as an error of the user's own code would. Other exceptions keep every frame."""
    from ._errors import OutputError, ProfilerError, TraceError

    if not isinstance(exc, (ProfilerError, TraceError, OutputError)):
        return
    if isinstance(exc, ProfilerError) and "already running" in str(exc):
        print("torchprof: %%torchprof already profiles the cell: drop the cell's own Profiler, or the magic")
    ours = os.path.dirname(os.path.abspath(__file__)) + os.sep
    tb, last_user, in_cell = exc.__traceback__, None, False
    while tb is not None:
        code = tb.tb_frame.f_code
        mine = os.path.abspath(code.co_filename).startswith(ours)
        if mine and last_user is not None:
            last_user.tb_next = None  # cut below the cell's (or its functions') last frame
            return
        if in_cell and not mine:
            last_user = tb
        in_cell = in_cell or code is _execute.__code__
        tb = tb.tb_next


def _has_widget_frontend(shell: Any) -> bool:
    # A kernel (Jupyter, VS Code, Colab) renders widgets; the terminal IPython does not.
    return getattr(shell, "kernel", None) is not None


def register(ipython: Any) -> None:
    """Add ``%torchprof`` and ``%%torchprof`` to an IPython shell (``%load_ext torchprof``)."""
    ipython.register_magics(TorchprofMagics)


def unregister(ipython: Any) -> None:
    """Remove the magics again (``%unload_ext torchprof``)."""
    manager = ipython.magics_manager
    for kind in ("line", "cell"):
        manager.magics[kind].pop("torchprof", None)
    manager.registry.pop(TorchprofMagics.__name__, None)
