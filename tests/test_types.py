"""The typed shapes of what torchprof hands around (the summary, the steps, by_rank, the view
state) hold exactly the keys the vocabulary and the code give them, so a type checker reading
them tells the truth."""

from __future__ import annotations

from synthetic import build, ev, training_step
from torchprof import _vocab
from torchprof._records import Recording
from torchprof._tree.ranks import rank_rows
from torchprof._tree.steps import StepSplit, StepSpread, spread, step_splits
from torchprof._tree.summary import GPU_TIME_KEYS, Summary
from torchprof._tree.tree import RankRow
from torchprof._views.state import ViewState, check_state


def _stepped():
    events = []
    for k, step in enumerate((1, 2, 3)):
        t = 200.0 * k
        events.append(ev("region", f"ProfilerStep#{step}", t, t + 150 + 100 * (step == 3)))
        events.append(ev("module", "Net", t + 1, t + 100, type_="Net"))
        events.append(ev("region", "Optimizer.step#SGD.step", t + 110, t + 140))
    return build(events)


def test_the_view_state_type_has_the_vocabularys_keys_and_check_state_fills_them_all():
    assert tuple(ViewState.__annotations__) == _vocab.STATE_KEYS
    assert tuple(check_state(build(training_step()), {})) == _vocab.STATE_KEYS


def test_a_steps_split_has_its_number_wall_time_the_parts_and_the_extras():
    assert tuple(StepSplit.__annotations__) == ("step", "wall_us", *_vocab.STEP_PARTS, *_vocab.STEP_EXTRA)
    splits = step_splits(_stepped())
    assert len(splits) == 3 and all(tuple(s) == tuple(StepSplit.__annotations__) for s in splits)
    assert set(spread(splits)) == set(StepSpread.__annotations__) and spread([]) == {}


def test_by_rank_rows_have_the_vocabularys_columns():
    assert tuple(RankRow.__annotations__) == _vocab.BY_RANK_COLUMNS
    assert tuple(rank_rows(build(training_step()), 0, 220.0)[0]) == _vocab.BY_RANK_COLUMNS


def test_the_summary_type_names_every_key_a_summary_has():
    from torchprof._result import Result

    summary = Result(_stepped(), Recording(modules={}, wall_us=600.0)).summary
    assert {"wall_us", "cpu_us", "time_split", "step_spread", "hot_path", "headline"} <= set(summary)
    assert set(summary) <= set(Summary.__annotations__)
    assert set(GPU_TIME_KEYS) <= set(summary)
