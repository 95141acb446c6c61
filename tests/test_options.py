"""One option table (``_vocab.OPTIONS``) builds the command line's and the magic's parsers: an
option both have reads, defaults and explains itself the same in both, and the view's defaults
are the vocabulary's."""

from __future__ import annotations

import argparse
import inspect

import pytest

from torchprof import _cli, _vocab
from torchprof._magic import TorchprofMagics
from torchprof._options import options_of, state_from_options


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {flag: a for a in parser._actions for flag in a.option_strings if flag not in ("-h", "--help")}


PARSERS = {"cli": _cli.build_parser, "demo": _cli.build_demo_parser, "magic": lambda: TorchprofMagics.torchprof.parser}


@pytest.mark.parametrize("entry", sorted(PARSERS))
def test_each_parser_has_exactly_the_options_the_table_gives_it(entry):
    parser = PARSERS[entry]()
    expected = {flag for o in options_of(entry) for flag in o.flags}
    assert set(_actions(parser)) == expected


def test_an_option_of_both_entry_points_has_one_default_one_help_and_one_type():
    cli, magic = _actions(_cli.build_parser()), _actions(TorchprofMagics.torchprof.parser)
    shared = [o for o in _vocab.OPTIONS if {"cli", "magic"} <= o.where]
    assert len(shared) >= 12  # the recording, view and output options
    for option in shared:
        for flag in option.flags:
            a, b = cli[flag], magic[flag]
            assert (a.dest, a.default, a.help, a.type, a.nargs, a.metavar, type(a)) == (
                b.dest, b.default, b.help, b.type, b.nargs, b.metavar, type(b)), flag  # fmt: skip
    # and the defaults are the view's, as the vocabulary states them
    state = {k.name: k.default for k in _vocab.STATE}
    assert cli["--min-pct"].default == magic["--min-pct"].default == state["min_pct"]
    assert cli["--sort"].default == magic["--sort"].default == state["sort_by"]
    assert "default 1)" in cli["--min-pct"].help and "default cpu_us;" in cli["--sort"].help


def test_options_of_one_entry_point_say_so_in_the_table():
    only = {o.flags: sorted(o.where) for o in _vocab.OPTIONS if not {"cli", "magic"} <= o.where}
    assert only[("--text",)] == ["magic"] and only[("-o", "--out")] == ["magic"]
    assert only[("--out",)] == ["cli"] and only[("--md",)] == ["cli", "demo"] and only[("--batch",)] == ["demo"]


def test_a_demo_option_repeated_after_the_model_keeps_the_value_given_before_it():
    args = _cli.build_parser().parse_args(["--min-pct", "5", "--sort", "flops"])
    _cli.build_demo_parser().parse_args(["resnet18", "--ops"], namespace=args)
    assert (args.min_pct, args.sort, args.ops, args.batch) == (5.0, "flops", True, 8)


def test_signatures_taking_min_pct_or_sort_by_default_to_the_vocabulary():
    from torchprof import Result
    from torchprof._comparison import Comparison
    from torchprof._views import compare, html, rows, table, widget

    both, pct, sort = ("min_pct", "sort_by"), ("min_pct",), ("sort_by",)
    # The row selection under the views keeps every row unless told (min_pct=0); a comparison orders
    # by the size of the change unless told (sort_by=None).
    checked = ((Result.table, both), (Result.display, both), (table.render_table, both), (html.static_table, both),
               (widget.static_bundle, both), (Comparison.table, pct), (compare.render_table, pct),
               (rows.visible_rows, sort), (rows.select_rows, sort))  # fmt: skip
    defaults = {"min_pct": _vocab.DEFAULT_MIN_PCT, "sort_by": _vocab.DEFAULT_SORT}
    for fn, names in checked:
        params = inspect.signature(fn).parameters
        assert {n: params[n].default for n in names} == {n: defaults[n] for n in names}, fn


def test_the_view_state_of_options_leaves_out_what_the_view_opens_with_anyway():
    class Fake:
        tree = None

    assert state_from_options(Fake(), min_pct=_vocab.DEFAULT_MIN_PCT, sort_by=_vocab.DEFAULT_SORT) == {}  # type: ignore[arg-type]
    assert state_from_options(Fake(), min_pct=0.0, sort_by="flops") == {"min_pct": 0.0, "sort_by": "flops"}  # type: ignore[arg-type]


def test_the_columns_a_narrow_table_drops_are_columns_a_view_shows():
    assert set(_vocab.NARROW_DROP_ORDER) <= set(_vocab.VIEW_COLUMNS)
    assert set(_vocab.COMPARE_NARROW_DROP_ORDER) <= set(_vocab.COMPARE_VIEW_COLUMNS)
    assert len(set(_vocab.NARROW_DROP_ORDER)) == len(_vocab.NARROW_DROP_ORDER)


def test_every_column_unit_rollup_dtype_and_family_is_one_the_vocabulary_names():
    from typing import get_args

    for c in (*_vocab.COLUMNS, *_vocab.COMPARE_COLUMNS, *_vocab.COMPARE_VIEW_EXTRA):
        assert c.unit in get_args(_vocab.Unit) and c.rollup in get_args(_vocab.Rollup), c.name
        assert c.dtype in get_args(_vocab.Dtype) and c.family in (None, *get_args(_vocab.Family)), c.name
