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
        (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a\xff\xfe", "ts": 0, "dur": 1}]}', "not valid JSON"),
        (b'{"traceEvents": [' + b"[" * 200_000 + b"]" * 200_000 + b"]}", "nested too deeply"),
        (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 0, "dur": 1, "args": ' + b'{"a":' * 200_000
         + b"1" + b"}" * 200_000 + b"}]}", "nested too deeply"),
        (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 0, "dur": 1, "args": {"Sequence number": '
         + b"9" * 5000 + b"}}]}", "not valid JSON"),  # beyond Python's digit limit for int()
        (gzip.compress(json.dumps({"traceEvents": valid_events()}).encode())[:-20], "truncated"),
        (gzip.compress(json.dumps({"traceEvents": valid_events()}).encode())[:30], "truncated"),
        (b"\x1f\x8b" + b"garbage" * 10, "cannot read"),
    ],
    ids=["string", "number", "null", "events-object", "events-string", "empty", "utf8", "deep-array", "deep-object",
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
