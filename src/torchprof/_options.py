"""What the command line and the notebook magic share: their options (argparse for the one,
``magic_arguments`` for the other, both built from ``_vocab.OPTIONS``), where options end, the view
options as widget state, and checking and writing the ``--html``, ``--csv`` and ``--trace`` files."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ._errors import OutputError as OutputError  # re-exported: its home before _errors.py
from ._vocab import OPTIONS, STATE, EntryPoint, Option

if TYPE_CHECKING:
    from ._result import Result

_NEGATIVE_NUMBER = re.compile(r"-\d.*")


_TYPES: dict[str, Callable[[str], Any]] = {"int": int, "float": float}


def options_of(entry: EntryPoint) -> tuple[Option, ...]:
    """The options ``entry`` takes, in the table's order."""
    return tuple(o for o in OPTIONS if entry in o.where)


def argparse_keywords(option: Option, *, suppress_default: bool = False) -> dict[str, Any]:
    """``add_argument``'s keywords for ``option``. ``suppress_default``: a value not given leaves
    the namespace alone (the demo's options repeat the command line's after the model name)."""
    shown = format(option.default, "g") if isinstance(option.default, float) else str(option.default)
    # Written in here, not left to argparse: a suppressed default would not be in its reach.
    kw: dict[str, Any] = {"help": option.help.replace("%(default)s", shown)}
    if option.value == "flag":
        kw.update(action="store_true", default=False)
    elif option.value == "off":
        kw.update(action="store_false", default=True)
    else:
        kw.update(default=option.default, metavar=option.metavar)
        if option.value in _TYPES:
            kw["type"] = _TYPES[option.value]
        if option.nargs is not None:
            kw["nargs"] = option.nargs
    if option.dest is not None:
        kw["dest"] = option.dest
    if suppress_default:
        kw["default"] = argparse.SUPPRESS
    return kw


def add_options(parser: argparse.ArgumentParser, entry: EntryPoint, *, suppress: frozenset[EntryPoint] = frozenset()) -> None:
    """Add ``entry``'s options to an argparse parser; those also of an entry point in ``suppress``
    get no default (see :func:`argparse_keywords`)."""
    for option in options_of(entry):
        parser.add_argument(*option.flags, **argparse_keywords(option, suppress_default=bool(option.where & suppress)))


def magic_options(func: Any) -> Any:
    """IPython's ``magic_arguments`` for the magic's options: the decorators its parser (and the
    magic's ``?`` help) are built from, applied in the table's order."""
    from IPython.core import magic_arguments

    for option in reversed(options_of("magic")):  # the last decorator applied is listed first
        func = magic_arguments.argument(*option.flags, **argparse_keywords(option))(func)
    return magic_arguments.magic_arguments()(func)


def takes_value(parser: argparse.ArgumentParser) -> set[str]:
    """The option strings of ``parser`` that read the next word as their value."""
    return {opt for action in parser._actions for opt in action.option_strings if action.nargs != 0}


def options_end(words: Sequence[str], with_value: set[str], ends: Callable[[str], bool] = lambda w: False) -> int:
    """Index of the first word that is not one of our options or an option's value: the program
    or statement starts there (``--``, a word not starting with ``-``, ``-`` itself, a negative
    number, or a word ``ends`` says ends the options, such as ``-m``)."""
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--" or word == "-" or not word.startswith("-") or _NEGATIVE_NUMBER.fullmatch(word) or ends(word):
            return i
        i += 2 if word in with_value else 1
    return len(words)


def check_output_paths(**paths: str | None) -> None:
    """Fail before a long run, not after it, when an output file's folder does not exist."""
    for option, path in paths.items():
        if not path:
            continue
        folder = os.path.dirname(os.path.abspath(os.path.expanduser(path)))
        if not os.path.isdir(folder):
            raise OutputError(f"--{option} {path}: the folder {folder} does not exist")
        if os.path.isdir(path):
            raise OutputError(f"--{option} {path}: that is a folder, not a file name")


def state_from_options(prof: Result, *, min_pct: float | None = None, sort_by: str | None = None,
                       show_ops: bool = False, depth: int | None = None) -> dict[str, Any]:  # fmt: skip
    """Widget / HTML state for the view options that differ from the view's defaults (the widget
    keeps its defaults for the rest). ``depth`` N expands every row above depth N, so rows down to
    depth N show."""
    from ._views.state import expanded_to_depth

    defaults = {k.name: k.default for k in STATE}
    state: dict[str, Any] = {}
    if min_pct is not None and min_pct != defaults["min_pct"]:
        state["min_pct"] = min_pct
    if sort_by is not None and sort_by != defaults["sort_by"]:
        state["sort_by"] = sort_by
    if show_ops:
        state["show_ops"] = True
    if depth is not None:
        state["expanded"] = expanded_to_depth(prof.tree, depth)
    return state


def expanded_like_table(prof: Result, *, min_pct: float, sort_by: str | None, show_ops: bool,
                        max_depth: int | None) -> list[str]:  # fmt: skip
    """The ``expanded`` state under which a report or widget shows the rows the terminal table
    showed with these options: every shown row that has a shown child is open."""
    from ._views.rows import visible_rows

    tree = prof.tree
    rows = visible_rows(tree, min_pct=min_pct, sort_by=sort_by, show_ops=show_ops, max_depth=max_depth)
    parent, paths = tree.parent_index, tree.paths
    with_shown_child = {parent[r] for r in rows[1:]}
    return [paths[r] for r in rows if r in with_shown_child]


def write_outputs(prof: Result, *, html: str | None = None, csv: str | None = None, trace: str | None = None,
                  state: dict[str, Any] | None = None, base: str | None = None) -> list[str]:  # fmt: skip
    """Write the requested files; the paths written, as given. Every file is attempted; failures
    are collected into one :class:`OutputError`. A relative path is under ``base`` when given (the
    folder the run started in: the profiled code may have changed directory since)."""
    from ._views.frame import write_csv

    written: list[str] = []
    problems: list[str] = []
    jobs: tuple[tuple[str, str | None, Callable[[str], Any]], ...] = (
        ("html", html, lambda path: prof.to_html(path, **(state or {}))),
        ("csv", csv, lambda path: write_csv(prof.df, path)),
        ("trace", trace, lambda path: prof.export_chrome_trace(path)),
    )
    for option, path, write in jobs:
        if not path:
            continue
        path = os.path.expanduser(path)
        try:
            write(os.path.join(base, path) if base is not None else path)
        except (OSError, ValueError, RuntimeError) as exc:
            problems.append(f"--{option} {path}: {exc}")
        else:
            written.append(path)
    if problems:
        raise OutputError("; ".join(problems))
    return written


def parse_peak_flops(value: Any) -> float | str | None:
    """``--peak-flops``: a number of FLOP/s, or a data type name; ValueError for anything else."""
    from ._tree.devices import choose_peak

    if value is None or isinstance(value, float):
        return value
    try:
        peak: float | str = float(value)
    except ValueError:
        peak = str(value)
    choose_peak({}, peak, False)  # raises for a bad value
    return peak
