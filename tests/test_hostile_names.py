"""Names torchprof did not choose (module attribute names, labels, the notebook's variables) never
break the user's code, a row, the terminal or a written file; the user's own callables that fail
are said, never raised into their forward."""

from __future__ import annotations

import warnings

import pytest
import torch

import torchprof


class Named(torch.nn.Module):
    """A model with one child under an arbitrary attribute name."""

    def __init__(self, child_name: str) -> None:
        super().__init__()
        self.first = torch.nn.Linear(4, 4)
        self.child_name = child_name
        self.add_module(child_name, torch.nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return getattr(self, self.child_name)(self.first(x))


X = torch.randn(2, 4)


@pytest.mark.parametrize(("name", "shown"), [("a\ud800b", "a\\ud800b"), ("a\x00b", "a\\x00b")])
def test_a_module_name_no_profiler_can_hold_runs_and_shows_escaped(name, shown, tmp_path):
    """A lone surrogate used to raise in torchprof's hook ("error unpacking string as utf-8"),
    breaking the user's forward; a NUL cut the range's name short, making a malformed row
    ("nn.Module: Named.first" of no kind). Both are rows of their own now, named visibly, and the
    profile saves and prints."""
    model = Named(name)
    with torchprof.Profiler() as prof:
        out = model(X)
    assert out.shape == (2, 4)
    df = prof.df
    assert sorted(df.index[df["kind"] == "module"]) == sorted(["Named", "Named.first", f"Named.{shown}"])  # (siblings by time)
    assert df.loc[f"Named.{shown}", "type"] == "ReLU" and df.loc[f"Named.{shown}", "calls"] == 1
    assert not any(p.startswith("nn.Module") for p in df.index)
    assert shown in prof.table(min_pct=0)
    assert torchprof.load(prof.save(str(tmp_path / "saved.json"))).df.loc[f"Named.{shown}", "calls"] == 1


@pytest.mark.parametrize(("name", "shown"), [("evil\u202etxt", "evil\\u202etxt"), ("line\u2028two", "line\\u2028two"),
                                             ("rtl\u2067x\u2069", "rtl\\u2067x\\u2069"), ("esc\x1b[31m", "esc\\x1b[31m")])  # fmt: skip
def test_bidi_and_line_separators_never_reach_the_terminal_or_the_stacks_file(name, shown, tmp_path):
    """A right-to-left override (U+202E) reorders everything printed after it ("Trojan Source"),
    U+2028 breaks the line; both reached the terminal table, and export_stacks wrote ESC raw."""
    with torchprof.Profiler() as prof:
        Named(name)(X)
    table = prof.table(min_pct=0)
    assert name not in table and shown in table
    stacks = tmp_path / "stacks.txt"
    prof.export_stacks(str(stacks))
    text = stacks.read_text(encoding="utf-8")
    assert name not in text
    assert f"Named;{shown} " in text or f"Named;{shown};" in text
    assert not any(ch in text for ch in "\x1b\u202e\u2028\u2067")
    assert all(line.rsplit(" ", 1)[1].isdigit() for line in text.splitlines())  # one well-formed line per frame


def test_a_labels_callable_that_raises_is_said_and_the_class_name_used():
    """It used to raise into the user's forward (from torchprof's hook)."""

    def labels(module):
        raise ValueError("no names today")

    model = Named("act")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torchprof.Profiler(labels=labels) as prof:
            out = model(X)
        df = prof.df
    assert out.shape == (2, 4)
    assert sorted(df.index[df["kind"] == "module"]) == ["Named", "Named.act", "Named.first"]
    said = [str(w.message) for w in caught if issubclass(w.category, torchprof.ProfilerWarning)]
    assert said == ["torchprof: labels= raised ValueError: no names today (for a Named): its class name is used"]
    assert prof.summary["warnings"] == [said[0].removeprefix("torchprof: ")]


def test_a_labels_callable_that_returns_no_text_is_ignored():
    with torchprof.Profiler(labels=lambda module: 42) as prof:
        Named("act")(X)
    assert "Named.act" in prof.df.index


def test_a_notebook_object_whose_class_lookup_raises_does_not_fail_the_cell():
    """%%torchprof names root modules after the notebook's variables: it asked every variable
    isinstance(value, nn.Module), which reads __class__, and a property raising there failed the
    cell before the code ran."""
    from IPython.testing.globalipapp import get_ipython

    class Odd:
        @property
        def __class__(self):  # type: ignore[override]
            raise RuntimeError("no class for you")

    ip = get_ipython()
    ip.run_line_magic("load_ext", "torchprof")
    try:
        ip.user_ns.update(odd=Odd(), model=torch.nn.Sequential(torch.nn.Linear(4, 4)), x=X)
        result = ip.run_cell("%%torchprof --text\nmodel(x)")
        assert result.success, result.error_in_exec
        assert ip.user_ns["_torchprof"].df.loc["model.0", "calls"] == 1  # still named after its variable
    finally:
        for name in ("odd", "model", "x", "_torchprof"):
            ip.user_ns.pop(name, None)
        ip.run_line_magic("unload_ext", "torchprof")
