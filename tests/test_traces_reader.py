"""The trace reader reads the common complete event inline and hands every other one to its
general path (``_EventReader.add``): what it reads must be what the general path reads, event for
event, on every kind of event a trace holds and every odd field."""

from __future__ import annotations

import json

import pytest

import torchprof
from torchprof._records import module_range_name
from torchprof._traces.reader import _EventReader, columns_from_events

COLUMNS = ("name", "kind", "tid", "start", "end", "seq", "fwd_tid", "ext_id", "link", "corr", "nbytes", "on_cuda",
           "mem_total", "mem_addr", "mem_device")  # fmt: skip


def x(cat, name, ts, dur=None, *, pid=1, tid=1, **fields):
    e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, **fields}
    if dur is not None:
        e["dur"] = dur
    return e


def mixed_events(huge_id: bool = False) -> list:
    """One step of every kind of event kineto writes, with the odd fields a file may hold."""
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
        x("Trace", "PyTorch Profiler (0)", 0, 10_000, pid="Spans", tid="PyTorch Profiler"),
        x("user_annotation", "ProfilerStep#1", 10, 900),
        x("cpu_op", module_range_name("net.fc", "Linear"), 11, 300),
        x("cpu_op", "aten::linear", 12, 200, args={"External id": 4, "Sequence number": 7, "Input Dims": [[2, 3], [4, 3]],
                                                   "Concrete Inputs": ["", ""]}),
        x("cpu_op", "aten::t", 13, 5),  # no args
        x("cpu_op", "aten::view", 14, 1, args=None),  # args: null
        x("cpu_op", "aten::empty", 15),  # no dur: an instant range
        x("cpu_op", "aten::addmm", 20.125, 40.5, args={"External id": 5, "Sequence number": 8}),  # pinned µs
        x("cpu_op", "aten::mul", 61, 2, args={"Sequence number": 3.0}),  # a whole double: an integer
        x("cuda_runtime", "cudaLaunchKernel", 62, 6, args={"external id": 5, "correlation": 11, "cbid": 211}),
        x("cuda_runtime", "cudaLaunchKernel", 70, 3, args={"External id": 0, "external id": 5, "correlation": 12}),
        x("kernel", "sgemm", 80, 30, pid=0, tid="stream 7", args={"External id": 5, "correlation": 11, "device": 0}),
        x("kernel", "sgemm", 111, 30, pid=0, tid=7, args={"External id": 5, "correlation": 12, "Input Dims": [[4]]}),
        {"ph": "s", "id": 11, "pid": 1, "tid": 1, "ts": 62, "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": 11, "pid": 0, "tid": 7, "ts": 80, "cat": "ac2g", "name": "ac2g", "bp": "e"},
        x("gpu_user_annotation", "fc", 80, 30, pid=0, tid=7),  # a category not read
        x("a_category_nobody_knows", "what", 81, 1),
        x(None, "no category", 82, 1),
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 83, "s": "t",
         "args": {"Total Reserved": 4096, "Total Allocated": 2048, "Bytes": 2048, "Addr": 140000, "Device Id": 0,
                  "Device Type": 1}},
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": 84, "s": "t",
         "args": {"Total Allocated": 0, "Bytes": -64, "Addr": 150000, "Device Id": -1, "Device Type": 0}},
        {"ph": "i", "cat": None, "name": "marker", "pid": 1, "tid": 1, "ts": 85},
        x("python_function", "nn.Module: Linear_0", 86, 20),
        x("python_function", "train.py(12): step", 87, 10),
        x("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0", 300, 50, tid=2,
          args={"Sequence number": 8, "Fwd thread id": 1}),
        x("cpu_op", "aten::mm", 301, 10, pid=None, tid=None),  # null thread: pid 0, tid 0
        x("cpu_op", "aten::mm", 312, 10, tid="2"),  # a thread named by a string is another thread
        x("cpu_op", "aten::mm", 323, 10, tid=2),
        x("Operator", "aten::add_", 400, 5),  # kineto before 2022
    ]
    if huge_id:  # kineto's ids are uint64: the columns then hold any integer, from this event on
        events.insert(14, x("kernel", "copy", 150, 4, pid=0, tid=7, args={"External id": 2**63 + 5, "correlation": 2**64 - 1}))
    return events * 3


def read_one_by_one(events):
    reader = _EventReader()
    for i, e in enumerate(events):
        reader._add_one(e, i)
    reader.seen = len(events)
    return reader.finish()


def as_lists(cols):
    return {name: list(getattr(cols, name)) for name in COLUMNS} | {"inputs": [cols.inputs(i) for i in range(len(cols))]}


@pytest.mark.parametrize("huge_id", [False, True], ids=["int64", "beyond-int64"])
def test_every_event_reads_as_the_general_path_reads_it(huge_id):
    events = mixed_events(huge_id)
    cols, facts = columns_from_events(events)
    ref, ref_facts = read_one_by_one(events)
    assert as_lists(cols) == as_lists(ref)
    assert facts == ref_facts and cols.span == ref.span == (0, 10_000_000)
    # The odd fields as the general path has always read them.
    assert cols.start[cols.name.index("aten::addmm")] == 20_125 and cols.end[cols.name.index("aten::addmm")] == 60_625
    assert cols.seq[cols.name.index("aten::mul")] == 3
    assert [cols.inputs(i) is not None for i, name in enumerate(cols.name) if name in ("aten::linear", "sgemm")] == [True, False, False] * 3
    assert cols.tid[cols.name.index("aten::mm")] == (0, 0)
    assert len({cols.tid[i] for i, name in enumerate(cols.name) if name == "aten::mm"}) == 3
    if huge_id:
        assert 2**64 - 1 in cols.corr and 2**63 + 5 in cols.link


def test_a_kernel_whose_ids_are_beyond_int64_is_still_under_the_op_that_launched_it(tmp_path):
    big = 2**64 - 3
    events = [x("cpu_op", "aten::small", 0, 10, args={"External id": 1}),
              x("cuda_runtime", "cudaLaunchKernel", 1, 2, args={"External id": 1, "correlation": 2}),
              x("kernel", "small_kernel", 5, 4, pid=0, tid=7, args={"External id": 1, "correlation": 2}),
              x("cpu_op", "aten::big", 20, 10, args={"External id": big}),
              x("cuda_runtime", "cudaLaunchKernel", 21, 2, args={"External id": big, "correlation": big + 1}),
              x("kernel", "big_kernel", 25, 6, pid=0, tid=7, args={"External id": big, "correlation": big + 1}),
              x("cpu_op", "aten::after", 40, 10)]  # fmt: skip
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    df = torchprof.load_trace(path).df
    assert df.loc["aten::big", "cuda_us"] == 6 and df.loc["aten::small", "cuda_us"] == 4
    assert df.loc["aten::after", "cpu_us"] == 10
