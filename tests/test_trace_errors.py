"""Malformed traces: every one is a TraceError naming the event's index and the field, never an
internal exception and never a hang; random damage to a real trace too."""

from __future__ import annotations

import gzip
import json
import random
import re
import sys

import pytest

import torchprof
from conftest import shared_trace
from torchprof import TraceError


def valid_events() -> list:
    """A small trace of every kind of event the reader reads: an op, a launch, a kernel, a memory
    event, torch's span."""
    return [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 10,
         "args": {"External id": 1, "Sequence number": 3, "Input Dims": [[2, 2], [2, 2]]}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 2, "dur": 1,
         "args": {"correlation": 5, "External id": 1}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20, "dur": 5,
         "args": {"correlation": 5, "External id": 1}},
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 3, "s": "t",
         "args": {"Bytes": 64, "Device Type": 0, "Total Allocated": 64}},
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "x", "ts": 0, "dur": 30},
    ]  # fmt: skip


NAN, INF = float("nan"), float("inf")
RAW = object()  # marks a literal written into the JSON text as is
#: 1e400 is out of range read exactly (orjson refuses it, so its digits are read), infinite as a
#: double (the standard parser's fast path, without orjson).
BEYOND_A_DOUBLE = "out of range|infinite|not the number inf"

# (event index, field, value, words the message must hold, a regex): each case changes one field of one
# event of valid_events(); a field inside "args" is written "args.<key>".
MALFORMED = [
    (0, "ts", NAN, "NaN"),
    (0, "ts", INF, "infinite"),
    (0, "ts", -INF, "infinite"),
    (0, "ts", "12", "must be a number, not a string"),
    (0, "ts", None, "not null"),
    (0, "ts", True, "not a boolean"),
    (0, "ts", [1], "not a list"),
    (0, "ts", (RAW, "1e400"), BEYOND_A_DOUBLE),
    (0, "ts", 10**30, "out of range"),
    (0, "dur", NAN, "NaN"),
    (0, "dur", INF, "infinite"),
    (0, "dur", -5, "negative"),
    (0, "dur", -0.001, "negative"),
    (0, "dur", "10", "must be a number"),
    (0, "name", 42, "must be a string, not int"),
    (0, "name", None, "must be a string, not null"),
    (0, "name", ["aten::mm"], "not a list"),
    (0, "cat", ["cpu_op"], "must be a string, not a list"),
    (0, "cat", {"a": 1}, "not an object"),
    (4, "cat", 7, "must be a string"),
    (0, "ph", ["X"], "must be a string"),
    (0, "tid", [1], "not a list"),
    (0, "tid", {"a": 1}, "not an object"),
    (0, "tid", 1.5, "must be an integer or a string, not a number"),
    (0, "pid", [1], "not a list"),
    (0, "args", [1, 2], "must be an object, not a list"),
    (0, "args", "x", "must be an object, not a string"),
    (0, "args.Sequence number", INF, "must be an integer"),
    (0, "args.Sequence number", NAN, "must be an integer"),
    (0, "args.Sequence number", 1e300, "out of range"),
    (0, "args.Sequence number", 10**30, "out of range"),
    (0, "args.Sequence number", (RAW, "1e400"), BEYOND_A_DOUBLE),
    (0, "args.Sequence number", 2.5, "must be an integer"),
    (0, "args.Sequence number", (RAW, "1e999999999"), BEYOND_A_DOUBLE),  # never expanded to a billion digits
    (0, "ts", (RAW, "1e999999999"), BEYOND_A_DOUBLE),
    (0, "dur", (RAW, "-1e999999999"), "negative|infinite|out of range"),
    (0, "args.External id", INF, "must be an integer"),
    (0, "args.External id", "abc", "must be an integer, not a string"),
    (0, "args.External id", 10**25, "out of range"),
    (0, "args.Fwd thread id", [3], "must be an integer"),
    (1, "args.correlation", (RAW, "1e400"), BEYOND_A_DOUBLE),
    (1, "args.correlation", NAN, "must be an integer"),
    (2, "args.correlation", -(10**20), "out of range"),
    (2, "ts", NAN, "NaN"),
    (2, "dur", -1, "negative"),
    (2, "tid", {"stream": 7}, "not an object"),
    (3, "ts", NAN, "NaN"),
    (3, "args.Bytes", INF, "must be an integer"),
    (3, "args.Total Allocated", "64", "must be an integer"),
    (4, "dur", -30, "negative"),
    (4, "ts", INF, "infinite"),
]


def _literal(value):
    return value[1] if isinstance(value, tuple) and value[0] is RAW else json.dumps(value)


def malformed_text(index: int, field: str, value) -> str:
    events = valid_events()
    target, key = (events[index]["args"], field[5:]) if field.startswith("args.") else (events[index], field)
    target[key] = "@@VALUE@@"
    return json.dumps({"traceEvents": events}).replace('"@@VALUE@@"', _literal(value))


@pytest.fixture(params=["orjson", "json"])
def parser(request, monkeypatch):
    """Each case with orjson installed and without it (the standard parser then reads the file)."""
    if request.param == "json":
        monkeypatch.setitem(sys.modules, "orjson", None)
    return request.param


def test_the_valid_base_trace_loads(tmp_path, parser):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": valid_events()}))
    df = torchprof.load_trace(path).df
    assert list(df.name) == ["t", "aten::mm", "cudaLaunchKernel", "gemm"]


@pytest.mark.parametrize("index, field, value, words", MALFORMED, ids=[f"{i}-{f}-{_literal(v)[:12]}" for i, f, v, _ in MALFORMED])
def test_a_malformed_field_is_a_trace_error_naming_the_event_and_the_field(tmp_path, parser, index, field, value, words):
    path = tmp_path / "t.json"
    path.write_text(malformed_text(index, field, value))
    with pytest.raises(TraceError) as info:
        torchprof.load_trace(path)
    message = str(info.value)
    assert f"event {index} of traceEvents" in message
    assert repr(field.removeprefix("args.")) in message
    assert re.search(words, message), message
    assert str(path) in message


@pytest.mark.parametrize(
    "events, words",
    [
        ([5], "event 0 of traceEvents: is int, not an object"),
        ([valid_events()[0], "X"], "event 1 of traceEvents: is a string, not an object"),
        ([valid_events()[0], ["X", 1]], "event 1 of traceEvents: is a list, not an object"),
        ([valid_events()[0], None], "event 1 of traceEvents: is null, not an object"),
        ([{k: v for k, v in valid_events()[0].items() if k != "ts"}], "event 0 of traceEvents: has no 'ts'"),
        ([valid_events()[0], {k: v for k, v in valid_events()[3].items() if k != "ts"}], "event 1 of traceEvents: has no 'ts'"),
    ],
)
def test_an_event_that_is_not_an_object_or_lacks_its_time_is_named(tmp_path, parser, events, words):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with pytest.raises(TraceError, match=words):
        torchprof.load_trace(path)


@pytest.mark.parametrize(
    "content, words",
    [
        (b'"hello"', "has no 'traceEvents' list (a string at the top)"),
        (b"5", "has no 'traceEvents' list (int at the top)"),
        (b"null", "has no 'traceEvents' list (null at the top)"),
        (b'{"traceEvents": {"0": {}}}', "a 'traceEvents' that is not a list"),
        (b'{"traceEvents": "[]"}', "a 'traceEvents' that is not a list"),
        (b"", "not valid JSON"),
        (b'{"traceEvents": [' + b"[" * 200_000 + b"]" * 200_000 + b"]}", "nested too deeply"),
        (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 0, "dur": 1, "args": ' + b'{"a":' * 200_000
         + b"1" + b"}" * 200_000 + b"}]}", "nested too deeply"),
        (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 0, "dur": 1, "args": {"Sequence number": '
         + b"9" * 5000 + b"}}]}", "not valid JSON"),  # beyond Python's digit limit for int()
        (gzip.compress(json.dumps({"traceEvents": valid_events()}).encode())[:-20], "truncated"),
        (gzip.compress(json.dumps({"traceEvents": valid_events()}).encode())[:30], "truncated"),
        (b"\x1f\x8b" + b"garbage" * 10, "cannot read"),
    ],
    ids=["string", "number", "null", "events-object", "events-string", "empty", "deep-array", "deep-object",
         "long-int", "gzip-tail", "gzip-head", "gzip-garbage"],
)  # fmt: skip
def test_a_malformed_file_is_a_trace_error_saying_what_is_wrong(tmp_path, parser, content, words):
    path = tmp_path / "t.json"
    path.write_bytes(content)
    with pytest.raises(TraceError, match=words.replace("(", r"\(").replace(")", r"\)")):
        torchprof.load_trace(path)


@pytest.mark.parametrize(
    "block, field",
    [
        ([1, 2], "'torchprof' must be an object"),
        ({"modules": [1]}, "'torchprof.modules' must be an object"),
        ({"modules": {"Net": "Linear"}}, "'torchprof.modules' entry 'Net'"),
        ({"modules": {"Net": ["Net", -1, 0]}}, "'torchprof.modules' entry 'Net'"),
        ({"modules": {"Net": ["Net", 1.5, 0]}}, "'torchprof.modules' entry 'Net'"),
        ({"modules": {"Net": [3, 1, 0]}}, "'torchprof.modules' entry 'Net'"),
        ({"wall_us": "fast"}, "'torchprof.wall_us' must be a time"),
        ({"wall_us": -3}, "'torchprof.wall_us' must be a time"),
        ({"wall_us": [1]}, "'torchprof.wall_us' must be a time"),
        ({"label": 5}, "'torchprof.label' must be a string"),
        ({"recorded": "yes"}, "'torchprof.recorded' must be an object of true/false flags"),
        ({"recorded": {"flops": "no"}}, "'torchprof.recorded' must be an object of true/false flags"),
    ],
)
def test_a_torchprof_block_with_wrong_types_is_a_trace_error_naming_the_field(tmp_path, parser, block, field):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": valid_events(), "torchprof": block}))
    with pytest.raises(TraceError, match=field.replace(".", r"\.")):
        torchprof.load_trace(path)


def test_nan_in_the_torchprof_block_wall_time_is_named(tmp_path, parser):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": valid_events(), "torchprof": {"wall_us": NAN}}))
    with pytest.raises(TraceError, match=r"'torchprof\.wall_us' must be a time in µs, not the number nan"):
        torchprof.load_trace(path)


# -- random damage ------------------------------------------------------------------------------------
WEIRD = [None, True, -1, 0, 2**70, -(2**70), 1.5, NAN, INF, -INF, "", "x", "nn.Module: a [B]", [], [1, "a"], {}, {"a": []},
         (RAW, "1e400"), (RAW, "-0.0"), (RAW, "1711234567890123.4567")]  # fmt: skip


def _damaged(text: str, rng: random.Random) -> bytes:
    """One random damage: flipped bytes, a cut, a duplicated or deleted slice."""
    data = bytearray(text.encode())
    how = rng.randrange(4)
    if how == 0:
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif how == 1:
        del data[rng.randrange(len(data)) :]
    elif how == 2:
        a = rng.randrange(len(data))
        b = min(len(data), a + rng.randint(1, 200))
        data[a:a] = data[a:b]
    else:
        a = rng.randrange(len(data))
        del data[a : a + rng.randint(1, 50)]
    return bytes(data)


def _with_weird_value(data: dict, rng: random.Random) -> str:
    """The trace with one field of one event (or of its args) set to a weird value."""
    events = data["traceEvents"]
    e = events[rng.randrange(len(events))]
    target = e["args"] if isinstance(e.get("args"), dict) and e["args"] and rng.random() < 0.5 else e
    key = rng.choice([*target.keys(), "ts", "dur", "name", "cat", "tid", "args"])
    old = target.get(key)
    target[key] = "@@VALUE@@"
    text = json.dumps(data).replace('"@@VALUE@@"', _literal(rng.choice(WEIRD)))
    target[key] = old
    return text


@pytest.mark.parametrize("how", ["bytes", "values"])
@pytest.mark.parametrize("name, keep", [("a100-triton-kernel.json.gz", None), ("cpu-gloo-rank34.json.gz", None),
                                        ("a100-alexnet-forward.json.gz", 150)])  # fmt: skip
def test_random_damage_to_a_real_trace_only_ever_raises_trace_error(tmp_path, how, name, keep):
    """Fixed seed, 300 damaged copies per trace: kernels and launches (triton, the first 150
    events of alexnet), gloo regions; each loads and renders, or is a TraceError."""
    with gzip.open(shared_trace(name)) as f:
        data = json.load(f)
    if keep is not None:
        data["traceEvents"] = data["traceEvents"][:keep]
    text = json.dumps(data)
    rng = random.Random(7)
    outcomes = {"loaded": 0, "TraceError": 0}
    target = tmp_path / "damaged.json"
    for _ in range(300):
        target.write_bytes(_damaged(text, rng) if how == "bytes" else _with_weird_value(data, rng).encode())
        try:
            prof = torchprof.load_trace(target)
            prof.df, prof.summary, prof.table()  # the views of what loaded work too
            outcomes["loaded"] += 1
        except TraceError:
            outcomes["TraceError"] += 1
    # both outcomes happen: the damage is neither always fatal nor always harmless
    assert outcomes["loaded"] > 5 and outcomes["TraceError"] > 5, outcomes


# -- saved profiles (prof.save) ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def saved_profile(tmp_path_factory):
    """A real profile (memory on, two scheduled steps) as prof.save() writes it: the JSON value."""
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    with torchprof.Profiler(memory=True, schedule=torch.profiler.schedule(wait=0, warmup=1, active=2)) as prof:
        for _ in range(3):
            net(torch.randn(2, 4)).sum().backward()
            prof.step()
    path = tmp_path_factory.mktemp("saved") / "good.json"
    prof.save(str(path))
    return json.loads(path.read_text())


def _set(data, where, value):
    """``data`` with the value at ``where`` (a path of keys and indices) replaced."""
    *head, last = where
    target = data
    for key in head:
        target = target[key]
    target[last] = value
    return data


# (what is damaged, the value, words the message must hold: the field with its row, and what was expected)
DAMAGED_PROFILES = [
    (("parent_index", 3), 999, "parent_index[3] is 999: expected a row before row 3"),
    (("parent_index", 3), -1, "parent_index[3] is -1"),
    (("parent_index", 0), 0, "parent_index[0] is 0: expected -1"),
    (("parent_index",), [], "parent_index is []"),
    (("parent_index", 2), "1", "parent_index[2] is '1': expected a whole number"),
    (("columns", "kind", 2), "gizmo", "columns.kind[2] is 'gizmo': expected one of module, region, op, kernel"),
    (("columns", "name", 2), 7, "columns.name[2] is 7: expected text"),
    (("columns", "name", 2), None, "columns.name[2] is None: expected text"),
    (("path_scope", 2), 5, "'path_scope' of row 2 must be -1 or an earlier row, not 5"),  # format 2: paths as scope + label
    (("module_base", 2), 7, "'module_base' of row 2 must be -2, -1 or an earlier module row, not 7"),
    (("columns", "calls", 2), 1e30, "columns.calls[2] is 1e+30: expected a whole number from 0"),
    (("columns", "calls", 2), -3, "columns.calls[2] is -3"),
    (("columns", "calls", 2), 2**63, "columns.calls[2] is 9223372036854775808"),
    (("columns", "calls", 2), True, "columns.calls[2] is True"),
    (("columns", "cpu_us", 1), "fast", "columns.cpu_us[1] is 'fast': expected a finite number or null"),
    (("columns", "cpu_us", 1), [1], "columns.cpu_us[1] is [1]"),
    (("columns", "depth", 2), 7, "columns.depth[2] is 7: expected its parent's depth + 1"),
    (("columns", "is_backward", 2), 1, "columns.is_backward[2] is 1: expected true or false"),
    (("columns", "type", 2), 5, "columns.type[2] is 5: expected text or null"),
    (("columns", "calls"), "many", "columns.calls is 'many': expected a list of"),
    (("has_memory",), "yes", "has_memory is 'yes': expected true or false"),
    (("event_count",), -1, "event_count is -1"),
    (("unsupported_ops", "aten::sum"), "2", "unsupported_ops['aten::sum'] is '2'"),
    (("steps", 0, "wall_us"), "slow", "steps[0].wall_us is 'slow'"),
    (("memory", "timeline", "cpu", "phase", 0), 9, "memory.timeline['cpu'].phase[0] is 9: expected a phase code"),
    (("memory", "timeline", "cpu", "row", 1), 10**6, "memory.timeline['cpu'].row[1] is 1000000: expected a row of the tree"),
    (("memory", "devices", "cpu", "row"), -2, "memory.devices['cpu'].row is -2"),
    (("memory", "devices", "cpu", "phase"), "lunch", "memory.devices['cpu'].phase is 'lunch'"),
    (("memory", "devices", "cpu", "breakdown", 0, 0), "snacks", "memory.devices['cpu'].breakdown[0][0] is 'snacks'"),
    (("capture", "label"), 3, "capture.label is 3: expected text"),
    (("capture", "modules", "info", 0, 1), -1, "capture.modules.info[0][1] is -1"),
    (("capture", "modules", "info", 0), "Linear", "capture.modules.info[0] is 'Linear'"),
]


@pytest.mark.parametrize(("where", "value", "words"), DAMAGED_PROFILES)
def test_a_damaged_saved_profile_is_a_trace_error_naming_the_field_and_row(tmp_path, saved_profile, where, value, words):
    """Before, such files loaded and failed later in a view (IndexError, KeyError, TypeError) or,
    for calls of 1e30, showed -9.2e18 calls."""
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(_set(json.loads(json.dumps(saved_profile)), where, value)))
    with pytest.raises(TraceError) as caught:
        torchprof.load(path)
    assert f"{path} is damaged: " in str(caught.value)
    assert words in str(caught.value)


def test_a_nan_literal_in_a_saved_profile_is_named_as_such(tmp_path, saved_profile):
    """Not "expected a torch.profiler chrome trace": it is a saved profile, badly written."""
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(saved_profile).replace('"cpu_us": [', '"cpu_us": [NaN, ', 1))
    with pytest.raises(TraceError, match=r"not valid JSON .*expected a profile written by prof\.save\(\)"):
        torchprof.load(path)
    data = json.loads(json.dumps(saved_profile))
    data["columns"]["cpu_us"][1] = float("nan")  # read by a parser that takes NaN (no orjson): named too
    from torchprof._tree.storage import from_json

    with pytest.raises(TraceError, match=r"columns\.cpu_us\[1\] is nan: expected a finite number"):
        from_json(data, "x.json")


def test_the_command_line_says_what_is_damaged_in_one_line(tmp_path, saved_profile, capsys):
    from torchprof import _cli

    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(_set(json.loads(json.dumps(saved_profile)), ("columns", "kind", 2), "gizmo")))
    assert _cli.main([str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"torchprof: error: {path} is damaged: columns.kind[2] is 'gizmo': expected one of module, region, op, kernel\n"


def test_random_damage_to_a_saved_profile_only_ever_raises_trace_error(tmp_path, saved_profile):
    """Fixed seed, 200 copies with one value anywhere in the file set to a weird one: each loads
    and every view of it works, or it is a TraceError."""
    rng = random.Random(11)
    leaves: list[tuple] = []
    stack: list[tuple] = [((), saved_profile)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            stack.extend(((*where, k), v) for k, v in value.items())
        elif isinstance(value, list) and value:
            stack.extend(((*where, i), v) for i, v in enumerate(value[:4]))  # a few rows of each list
        elif where:
            leaves.append(where)
    weird = [None, -1, 0, 1e30, -1e30, 2**70, "x", "", True, [], {}, [1, 2], 0.5, "module", "profile", 10**6]
    outcomes = {"loaded": 0, "TraceError": 0}
    path = tmp_path / "damaged.json"
    for _ in range(200):
        data = _set(json.loads(json.dumps(saved_profile)), rng.choice(leaves), rng.choice(weird))
        path.write_text(json.dumps(data))
        try:
            prof = torchprof.load(path)
        except TraceError:
            outcomes["TraceError"] += 1
            continue
        prof.df, prof.summary, prof.table(min_pct=0), prof.steps
        prof.memory_timeline(), prof.memory_breakdown(by="layer"), prof.memory_breakdown()
        outcomes["loaded"] += 1
    assert outcomes["loaded"] > 5 and outcomes["TraceError"] > 5, outcomes


@pytest.mark.parametrize("damage", ["none", "truncated", "gzip-twice"])
def test_a_gzipped_trace_leaves_no_file_open_whether_it_loads_or_not(tmp_path, damage):
    # load_trace of every rank of a job, or a notebook reading traces all day, ran out of file
    # descriptors one by one: the gzip reader closed its stream, never the file under it.
    import gc
    import warnings

    packed = gzip.compress(json.dumps({"traceEvents": valid_events()}).encode())
    content = {"none": packed, "truncated": packed[:-20], "gzip-twice": gzip.compress(packed)}[damage]
    path = tmp_path / "t.json.gz"
    path.write_bytes(content)
    gc.collect()  # what earlier tests in this process left (a kernel client's sockets) is not ours to see
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        try:
            torchprof.load_trace(path)
        except TraceError:
            assert damage != "none"
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)], [str(w.message) for w in caught]


@pytest.mark.parametrize("given", [None, 5, b"trace.json", [None]], ids=["None", "int", "bytes", "list-of-None"])
def test_load_trace_of_something_that_is_no_path_says_what_it_takes(given):
    # It was "'NoneType' object is not iterable", from inside the reader.
    with pytest.raises(TypeError, match=r"load_trace takes the path of a trace \(str or os.PathLike\)"):
        torchprof.load_trace(given)
