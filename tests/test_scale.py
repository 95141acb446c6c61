"""Deep and wide models: naming stays exact and every stage works at depths where recursion or
per-module string rebuilding used to fail (timings are in tests/bench/bench_depth.py, not here)."""

from __future__ import annotations

import contextlib
import gzip
import inspect
import json
import random
import sys
import zlib

import pytest
import torch
from torch import nn

import torchprof
from synthetic import build, ev
from torchprof._capture.module_graph import ModuleGraph, parameter_sizes
from torchprof._views import table as table_view
from torchprof._views.payload import payload, payload_bytes


class Link(nn.Module):
    """One level of a chain: a scalar parameter, one op, then the next level."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.ones(()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * self.w
        inner = self._modules.get("inner")
        return inner(x) if inner is not None else x


def chain(depth: int) -> nn.Module:
    top = link = Link()
    for _ in range(depth - 1):
        link.inner = Link()
        link = link.inner
    return top


@contextlib.contextmanager
def recursion_limit(limit: int):
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def tight_limit() -> int:
    """A recursion limit 150 frames above the caller's depth: any recursion per tree level in
    torchprof's code fails under it long before depth 3000."""
    return len(inspect.stack(0)) + 150


# -- a 3000-deep chain, end to end ------------------------------------------------------------------
@pytest.fixture(scope="module")
def deep():
    torch.manual_seed(0)
    model = chain(3000)
    # The model's own forward recurses (3 Python frames per level): that is the user's code.
    with recursion_limit(20_000), torch.no_grad(), torchprof.Profiler() as prof:
        model(torch.ones(2))
    return prof


@pytest.mark.slow
def test_a_3000_deep_chain_profiles_with_the_right_deepest_path_and_no_recursion_in_torchprof(deep, tmp_path):
    deepest = "Link" + ".inner" * 2999
    with recursion_limit(tight_limit()):
        df = deep.df
        table = deep.table(min_pct=0)
        stacks = deep.export_stacks(str(tmp_path / "stacks.txt.gz"))
        by_type = deep.by_type()
        html = deep.to_html()
        blob = payload_bytes(payload(deep.tree, deep.summary))
        table_view.render_table(deep.tree, min_pct=0, show_ops=True)
        deep.save(str(tmp_path / "p.json"))
        reopened = torchprof.load(str(tmp_path / "p.json")).df
        trace = deep.export_chrome_trace(str(tmp_path / "t.json"))
        loaded = torchprof.load_trace(trace).df
    modules = df[df.kind == "module"]
    assert len(modules) == 3000
    assert modules.index[-1] == deepest and modules.loc[deepest, "depth"] == 3000
    assert modules.loc[deepest, "parent"] == "Link" + ".inner" * 2998
    assert modules.loc[deepest, "name"] == "inner"
    # parameters of each level and all below it: one scalar per level
    assert modules.loc["Link", "params"] == 3000 and modules.loc[deepest, "params"] == 1
    # FLOPs replayed on a data-free copy made and run without recursion in torchprof: x * w, 2 per level
    assert modules.loc["Link", "flops"] == 2 * 3000 and modules.loc[deepest, "flops"] == 2
    assert deep.summary["params"] == 3000
    assert by_type.loc["Link", "modules"] == 3000 and by_type.loc["Link", "params"] == 3000
    # every module row is in the table; rows past MAX_GUIDES levels show only the innermost guides
    assert sum(line.count("inner") for line in table.splitlines() if line.startswith("| ")) == 2999
    deepest_line = next(line for line in reversed(table.splitlines()) if "inner" in line and line.startswith("| "))
    assert deepest_line.startswith("| " + table_view.ELIDED)
    assert len(deepest_line.split("inner")[0]) == len("| ") + 2 * table_view.MAX_GUIDES + len("└──")
    # folded stacks: the deepest module's line names every level once
    lines = gzip.decompress(open(stacks, "rb").read()).decode().splitlines()
    frames = max((line.rsplit(" ", 1)[0].split(";") for line in lines), key=len)
    assert frames[:2] == ["profile", "Link"] and frames[2:3001] == ["inner"] * 2999
    data = payload(deep.tree, deep.summary)
    assert data["tail"][list(df.index).index(deepest)] == ".inner"  # sent as the tail of its parent's path
    assert zlib.decompress(blob)[:4] == b"TPF1"
    assert html.startswith("<!DOCTYPE html>")
    assert reopened.loc[deepest, "depth"] == 3000
    assert loaded.loc[deepest, "depth"] == 3000 and loaded.loc[deepest, "params"] == 1


def test_a_trace_nested_3000_deep_loads_and_renders_within_the_recursion_limit(tmp_path):
    depth = 3000
    events = [{"ph": "X", "cat": "user_annotation", "name": "r", "ts": i, "dur": 2 * (depth - i) + 1, "pid": 1, "tid": 1}
              for i in range(depth)]  # fmt: skip
    path = tmp_path / "deep.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with recursion_limit(tight_limit()):
        prof = torchprof.load_trace(str(path))
        df = prof.df
        prof.table(min_pct=0)
        prof.export_stacks(str(tmp_path / "s.txt"))
        prof.to_html()
    assert df["depth"].max() == depth
    assert df.index[-1] == "/".join(["r"] * depth)


def nested_ranges(path, depth: int, chains: int, name: str = "range_{}_{}") -> str:
    """``chains`` chains of ``depth`` user ranges on one thread, each range inside the previous,
    named by chain and level."""
    events, t = [], 0
    for c in range(chains):
        for i in range(depth):
            events.append({"ph": "X", "cat": "user_annotation", "name": name.format(c, i), "ts": t + i,
                           "dur": 2 * (depth - i) - 1, "pid": 1, "tid": 1})  # fmt: skip
        t += 2 * depth
    path.write_text(json.dumps({"traceEvents": events}))
    return str(path)


def peak_bytes(fn) -> int:
    """The most memory Python allocated while ``fn`` ran (tracemalloc: counts, not timings)."""
    import tracemalloc

    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_and_saved_size_grow_with_the_ranges_not_with_their_depth(tmp_path):
    # 3,000 ranges as one chain 3,000 deep and as 300 chains 10 deep, all named apart (3,000
    # rows): the same rows cost the same, where full paths per row cost the square of the depth
    # (27 MB of strings here).
    deep = nested_ranges(tmp_path / "deep.json", 3000, 1)
    shallow = nested_ranges(tmp_path / "shallow.json", 10, 300)

    def load_and_show(path: str, saved: str):
        def run():
            prof = torchprof.load_trace(path)
            prof.summary, prof.table(min_pct=0), prof.save(saved)
            torchprof.load(saved).table(min_pct=0)
        return run

    with recursion_limit(tight_limit()):
        deep_peak = peak_bytes(load_and_show(deep, str(tmp_path / "deep.tp.json")))
        shallow_peak = peak_bytes(load_and_show(shallow, str(tmp_path / "shallow.tp.json")))
    assert deep_peak < 1.5 * shallow_peak, (deep_peak, shallow_peak)
    deep_size, shallow_size = (tmp_path / "deep.tp.json").stat().st_size, (tmp_path / "shallow.tp.json").stat().st_size
    assert deep_size < 1.3 * shallow_size, (deep_size, shallow_size)
    # and the paths read as before, built when asked for
    reopened = torchprof.load(str(tmp_path / "deep.tp.json"))
    expected = "/".join(f"range_0_{i}" for i in range(3000))
    assert reopened.tree.columns["path"][-1] == expected
    assert reopened.df.index[-1] == expected and reopened.df["parent"].iloc[-1] == expected.rsplit("/", 1)[0]
    assert reopened.df.equals(torchprof.load_trace(deep).df)


def module_chains(depth: int, chains: int) -> tuple[list[dict], dict]:
    """``chains`` chains of ``depth`` nested modules (``M0``, ``M0.inner``, ...), an op in each."""
    from torchprof._records import ModuleInfo

    events, modules, t = [], {}, 0
    for c in range(chains):
        path = f"M{c}"
        for i in range(depth):
            path = f"{path}.inner" if i else path
            events.append(ev("module", path, t + i, t + 2 * depth - i, type_="Link"))
            modules[path] = ModuleInfo("Link", depth - i, 4 * (depth - i))
        events.append(ev("op", "aten::mul", t + depth, t + depth + 0.5))
        t += 2 * depth + 1
    return events, modules


def test_a_saved_deep_model_grows_with_its_modules_not_with_their_depth():
    # Module paths repeat their parents' (``M0.inner.inner...``): saved as full strings, a 1,500
    # deep chain wrote 27 MB where 150 chains of 10 wrote 0.5 MB.
    from torchprof._files import dumps
    from torchprof._records import Recording
    from torchprof._tree.storage import from_json, to_json
    from torchprof._views.frame import to_dataframe

    sizes = []
    for depth, chains in ((1500, 1), (10, 150)):
        events, modules = module_chains(depth, chains)
        tree = build(events, modules=modules)
        saved = to_json(tree, Recording(modules=modules))
        sizes.append(len(dumps(saved)))
        reopened, recording = from_json(json.loads(dumps(saved)), "saved")
        assert recording.modules == modules
        assert to_dataframe(reopened).equals(to_dataframe(tree))
    assert sizes[0] < 1.3 * sizes[1], sizes


def test_a_profile_saved_with_full_paths_still_opens(tmp_path):
    from torchprof._tree.storage import to_json

    prof = torchprof.load_trace(nested_ranges(tmp_path / "t.json", 3, 2, name="r{1}"))
    old = to_json(prof.tree, prof.recording)
    old["version"] = 1  # as torchprof wrote it before paths were stored as scopes and labels
    for column in ("path", "parent", "module"):
        old["columns"][column] = list(prof.tree.columns[column])
    old["capture"]["modules"] = {p: m.to_json() for p, m in prof.recording.modules.items()}
    for key in ("path_scope", "path_label", "module_base", "module_tail"):
        del old[key]
    (tmp_path / "old.json").write_text(json.dumps(old))
    reopened = torchprof.load(str(tmp_path / "old.json")).df
    assert list(reopened.index) == ["t", "r0", "r0/r1", "r0/r1/r2", "r0 #2", "r0 #2/r1", "r0 #2/r1/r2"] or \
        list(reopened.index) == list(prof.df.index)
    assert reopened.equals(prof.df)


# -- a module with 10,000 children ------------------------------------------------------------------
class Fan(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(nn.Identity() for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


@pytest.mark.slow
def test_10000_children_called_through_a_module_list_are_each_named_under_it():
    with torch.no_grad(), torchprof.Profiler() as prof:
        Fan(10_000)(torch.ones(2))
    df = prof.df
    modules = df[df.kind == "module"]
    assert len(modules) == 10_001
    assert {"Fan.blocks.0", "Fan.blocks.9999"} <= set(modules.index)
    assert (modules[modules.index != "Fan"].parent == "Fan").all()  # the ModuleList never ran
    assert modules.loc["Fan.blocks.5000", "name"] == "blocks.5000"


# -- naming rules --------------------------------------------------------------------------------------
def paths_of(run) -> list[str]:
    with torch.no_grad(), torchprof.Profiler() as prof:
        run()
    df = prof.df
    return sorted(df[df.kind == "module"].index)


def test_a_module_registered_under_two_names_takes_the_first_as_named_modules_does():
    class Twice(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first = nn.ReLU()
            self.second = self.first

        def forward(self, x):
            return self.second(x)

    model = Twice()
    assert [n for n, _ in model.named_modules()] == ["", "first"]
    assert paths_of(lambda: model(torch.ones(1))) == ["Twice", "Twice.first"]


def test_a_module_held_by_two_parents_is_one_row_under_the_one_that_names_it():
    class Holder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.act = nn.ReLU()
            self.block = nn.Sequential(nn.Identity(), self.act)

        def forward(self, x):
            return self.act(self.block(x))

    # named_modules() names it act (its first place): its calls from block count there too.
    assert paths_of(lambda: Holder()(torch.ones(1))) == ["Holder", "Holder.act", "Holder.block", "Holder.block.0"]


def test_a_child_created_during_the_forward_is_named_under_its_parent():
    class Lazy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.first = nn.Identity()

        def forward(self, x):
            x = self.first(x)  # its parent's children were read here, before `late` existed
            if not hasattr(self, "late"):
                self.late = nn.ReLU()
            return self.late(x)

    assert paths_of(lambda: Lazy()(torch.ones(1))) == ["Lazy", "Lazy.first", "Lazy.late"]


def test_a_module_of_no_model_called_at_every_level_of_a_chain_is_a_row_under_each():
    act = nn.ReLU()

    class Level(nn.Module):
        def forward(self, x):
            x = act(x)
            inner = self._modules.get("inner")
            return inner(x) if inner is not None else x

    top = level = Level()
    for _ in range(49):
        level.inner = Level()
        level = level.inner
    with torch.no_grad(), torchprof.Profiler() as prof:
        top(torch.ones(1))
    df = prof.df
    relu = df[(df.kind == "module") & (df.type == "ReLU")]
    # Named where it was called (as a module made in the forward is), never as a child it is not.
    assert len(relu) == 50 and set(relu.name) == {"(ReLU)"}
    assert "Level.inner.(ReLU)" in prof.recording.modules and "Level.inner.ReLU" not in prof.recording.modules


def test_module_graph_names_through_the_only_route_and_named_modules_elsewhere():
    shared = nn.Linear(1, 1)
    model = nn.Sequential(nn.Sequential(nn.Identity(), shared), nn.ModuleDict({"x": shared}))
    graph = ModuleGraph()
    graph.add(model)
    expected = {id(m): name for name, m in model.named_modules() if name}
    for m in model.modules():
        if m is not model:
            assert graph.relative_name(model, m) == expected[id(m)]
    assert graph.path_between(model[0], model[0][0]) == "0"
    assert graph.path_between(model, shared) is None  # two routes: not the fast path
    assert graph.ancestors(shared) == {id(model), id(model[0]), id(model[1])}


# -- parameter counts --------------------------------------------------------------------------------
def test_parameter_sizes_count_each_tensor_once_as_parameters_does():
    torch.manual_seed(0)
    emb = nn.Embedding(10, 4)
    head = nn.Linear(4, 10, bias=False)
    head.weight = emb.weight  # tied weights
    shared = nn.Linear(4, 4)
    model = nn.Sequential(emb, nn.Sequential(shared, nn.ReLU(), shared), nn.ModuleList([shared, chain(5)]), head)
    model.loop = model  # a cycle: parameters() and named_modules() skip what they met before
    modules = list(model.modules())
    sizes = parameter_sizes(modules)
    for m in modules:
        params = list(m.parameters())
        expected = (sum(p.numel() for p in params), sum(p.numel() * p.element_size() for p in params))
        assert sizes[id(m)] == expected, m
        assert parameter_sizes([m]) == {id(m): expected}, m  # one module asked about: its own walk


def test_parameter_sizes_of_a_tree_in_any_order_take_one_walk_and_match_parameters():
    from torchprof._capture.module_graph import _tree_sizes

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Sequential(nn.Linear(8, 8).half(), nn.LayerNorm(8)), nn.ModuleList([chain(4)]))
    modules = list(model.modules())
    random.Random(0).shuffle(modules)  # descendants asked about before their ancestors too
    assert _tree_sizes(modules) is not None  # nothing shared: the one-walk path
    sizes = parameter_sizes(modules)
    for m in modules:
        params = list(m.parameters())
        assert sizes[id(m)] == (sum(p.numel() for p in params), sum(p.numel() * p.element_size() for p in params)), m
    tied = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    tied[1].weight = tied[0].weight
    reused = nn.Sequential(tied[0], tied[0])
    looped = nn.Sequential(nn.Linear(2, 2))
    looped.loop = looped
    assert [_tree_sizes([m]) for m in (tied, reused, looped)] == [None, None, None]  # the general path counts them


def test_indexing_naming_and_counting_a_3000_deep_chain_need_no_recursion():
    model = chain(3000)
    deepest = model
    while "inner" in deepest._modules:
        deepest = deepest.inner
    with recursion_limit(tight_limit()):
        sizes = parameter_sizes([model, deepest])
        alone = parameter_sizes([model])
        graph = ModuleGraph()
        graph.add(model)
        name = graph.relative_name(model, deepest)
        ancestors = graph.ancestors(deepest)
    assert sizes[id(model)] == (3000, 3000 * 4) and sizes[id(deepest)] == (1, 4) and alone == {id(model): (3000, 3000 * 4)}
    assert name == ".".join(["inner"] * 2999) and len(ancestors) == 2999


# -- the table's guides ---------------------------------------------------------------------------------
def test_rows_deeper_than_the_guide_limit_show_the_innermost_guides(monkeypatch):
    tree = build([
        ev("module", "A", 0, 100, type_="A"),
        ev("module", "A.b", 1, 99, type_="B"),
        ev("module", "A.b.c", 2, 98, type_="C"),
        ev("module", "A.b.c.d", 3, 50, type_="D"),
        ev("module", "A.b.c.e", 60, 97, type_="E"),
    ])  # fmt: skip
    monkeypatch.setattr(table_view, "MAX_GUIDES", 2)
    text = table_view.render_table(tree, min_pct=0)
    names = [line.split("|")[1].rstrip() for line in text.splitlines()[3:] if line.startswith("| ")]
    assert names == [
        " profile",
        " └──A",
        "   └──b",
        "     └──c",  # within the limit: every level's guides
        " …   ├──d",  # past it: "… " stands for the levels further out, then the innermost ones
        " …   └──e",
    ]


def test_the_submodules_of_a_compiled_root_are_listed_as_named_modules_lists_them_at_any_depth():
    # After a compiled graph ran, the modules of every root are listed, called or not (a compiled
    # region runs its layers without calling them): a 3000-deep chain must not recurse there.
    from torchprof._capture.module_graph import named_modules

    shared = nn.Linear(2, 2)
    model = nn.Sequential(nn.Sequential(shared, nn.ReLU()), shared, nn.Sequential(nn.Identity()))
    assert list(named_modules(model)) == list(model.named_modules())
    deep = chain(3000)
    with recursion_limit(tight_limit()):
        names = [name for name, _ in named_modules(deep)]
    assert len(names) == 3000 and names[-1] == ".".join(["inner"] * 2999)


@pytest.mark.slow
def test_a_3000_deep_chain_profiles_its_memory_without_recursion_in_torchprof():
    torch.manual_seed(0)
    model = chain(3000)
    # Room for torch's own imports when the profiler starts, far from the 3000 frames a walk of
    # the chain by recursion would need.
    with recursion_limit(tight_limit() + 1000):
        with torchprof.Profiler(memory=True) as prof:
            with recursion_limit(20_000), torch.no_grad():  # the model's own recursion
                model(torch.ones(2))
        breakdown = prof.memory_breakdown()  # stopping read every module's parameters
    assert len(prof.df) > 3000 and breakdown is not None
