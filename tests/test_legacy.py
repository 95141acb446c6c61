"""The 2020 torchprof API (PyPI's ``torchprof``, awwong1): ``torchprof.Profile(model, ...)`` as a
context manager, ``print(prof)``, ``display(show_events=...)``, ``paths=``, ``raw()``,
``enabled=False`` and ``color=``, run as its README wrote them."""

from __future__ import annotations

import pytest
import torch

import torchprof
from torchprof._capture.session import ProfilerError
from torchprof._legacy import TableText, Trace


@pytest.fixture
def run(mlp):
    """``(prof, mlp)`` after the 2020 README's quickstart, on the CPU."""
    with torchprof.Profile(mlp, use_cuda=False, profile_memory=True) as prof:
        prof(torch.randn(2, 8)).sum().backward()  # calling the profile runs the model, as in 2020
    return prof, mlp


def _names(table: str) -> list[str]:
    """The Node cells of a table, guides stripped."""
    lines = [line for line in table.splitlines() if line.startswith("| ")][1:]
    return [line.split("|")[1].strip().lstrip("│├└─ ") for line in lines]


def test_the_2020_context_manager_profiles_the_model_and_prints_its_layers(run):
    prof, _ = run
    table = str(prof)
    assert sorted(_names(table)) == ["(backward, no module)", "0", "1", "2", "Sequential", "profile"]
    assert "Linear" in table and "ReLU" in table  # Sequential children are named by their type
    assert isinstance(prof, torchprof.Profiler) and isinstance(prof.result, torchprof.Result)
    assert prof.display() == table  # print(prof) and print(prof.display()) are the same table
    assert prof.profile_memory and not prof.use_cuda
    assert prof.df.loc["Sequential.0", "type"] == "Linear"  # the Profiler's results are there too
    assert prof.df.loc["Sequential", "cpu_mem"] == prof.df.loc["Sequential", "cpu_mem"]  # memory was recorded (not NaN)


def test_display_returns_the_table_and_shows_it_as_itself_in_a_notebook(run):
    prof, _ = run
    shown = prof.display()
    assert isinstance(shown, TableText) and isinstance(shown, str)
    assert repr(shown) == str(shown)  # not a quoted string with \n escapes as a cell's value


def test_show_events_lists_the_ops_inside_each_layer(run):
    prof, _ = run
    without, with_events = _names(prof.display(show_events=False)), _names(prof.display(show_events=True))
    assert not any(n.startswith("aten::") for n in without)
    assert "aten::linear" in with_events and "aten::relu" in with_events
    assert set(without) <= set(with_events)


def test_paths_show_only_the_chosen_layers_and_their_ancestors(mlp):
    with torchprof.Profile(mlp, paths=[("Sequential", "2"), "Sequential.1"]) as prof:
        mlp(torch.randn(2, 8))
    assert sorted(_names(str(prof))) == ["1", "2", "Sequential", "profile"]
    events = _names(prof.display(show_events=True))
    assert "aten::linear" in events and "aten::relu" in events
    assert events.count("aten::linear") == 1  # the first Linear was not chosen
    assert [t.path for t in prof.raw()[0] if t.path in prof.raw()[1]] == [("Sequential", "1"), ("Sequential", "2")]


def test_paths_that_name_no_module_are_an_error_with_the_closest_paths(mlp):
    with pytest.raises(ValueError, match=r"Sequential\.3 \(did you mean Sequential\.\d"):
        torchprof.Profile(mlp, paths=[("Sequential", "3")])
    with pytest.raises(TypeError, match="list of module paths"):
        torchprof.Profile(mlp, paths=("Sequential", "1"))


def test_raw_returns_every_module_as_a_trace_and_the_rows_of_each_profiled_leaf(run):
    prof, mlp = run
    traces, events = prof.raw()
    assert traces == (
        Trace(("Sequential",), False, mlp),
        Trace(("Sequential", "0"), True, mlp[0]),
        Trace(("Sequential", "1"), True, mlp[1]),
        Trace(("Sequential", "2"), True, mlp[2]),
    )
    assert list(events) == [("Sequential", "0"), ("Sequential", "1"), ("Sequential", "2")]
    first = events[("Sequential", "0")][0]  # 2020: event_lists_dict[trace.path][0]
    assert first.index[0] == "Sequential.0"
    assert "aten::addmm" in set(first["name"]) and "AddmmBackward0" in set(first["name"])  # forward and backward ops
    assert all(p == "Sequential.0" or p.startswith("Sequential.0/") for p in first.index)
    assert first["self_cpu_us"].sum() == pytest.approx(first.loc["Sequential.0", "cpu_us"])


def test_enabled_false_runs_the_block_unprofiled(mlp):
    with torchprof.Profile(mlp, enabled=False, use_cuda=True) as prof:  # no GPU needed when disabled
        out = mlp(torch.randn(2, 8))
    assert out.shape == (2, 4)
    assert "nothing was profiled" in str(prof) and "nothing was profiled" in prof.display()
    assert prof.raw() is None
    with pytest.raises(ProfilerError, match="enabled=False"):
        prof.df


def test_color_colours_names_by_depth_in_both_apis(run, capsys):
    prof, _ = run
    assert "\x1b[" not in prof.display() and "\x1b[36m├──Sequential" in prof.display(color=True)
    prof.result.display(color=True)  # the 2020 spelling works on torchprof's own display too
    assert "\x1b[36m├──Sequential" in capsys.readouterr().out
    prof.result.display(color=False)
    assert "\x1b[" not in capsys.readouterr().out


def test_a_result_is_not_a_profile_and_passing_one_says_which_is_which(run, tmp_path):
    prof, _ = run
    path = prof.save(str(tmp_path / "p.json"))
    loaded = torchprof.load(path)
    assert type(loaded) is torchprof.Result and not isinstance(loaded, torchprof.Profile)
    with pytest.raises(TypeError, match=r"torchprof\.Result"):
        torchprof.Profile(loaded.tree, loaded.recording)
