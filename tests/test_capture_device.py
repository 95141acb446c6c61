"""The live-capture CUDA path, fed with synthetic kineto device events (no GPU here).

A real CPU profile provides the op tree; fake kernel and runtime events, shaped like kineto's
``_KinetoEvent`` and linked to real ops by correlation id as kineto links them on a GPU, are
added to ``result.events()``. This checks the join the live path does on real A100 runs.
"""

from __future__ import annotations

import pytest
import torch

import torchprof
from torchprof._capture.kineto import result_columns
from torchprof._tree.builder import TreeBuilder


class FakeDeviceEvent:
    def __init__(self, name, activity, start_ns, end_ns, correlation, linked, stream=7):
        self._v = {"name": name, "activity": activity, "start": start_ns, "end": end_ns, "corr": correlation, "linked": linked, "stream": stream}

    def name(self):
        return self._v["name"]

    def activity_type(self):
        return self._v["activity"]

    def start_ns(self):
        return self._v["start"]

    def end_ns(self):
        return self._v["end"]

    def correlation_id(self):
        return self._v["corr"]

    def linked_correlation_id(self):
        return self._v["linked"]

    def device_resource_id(self):
        return self._v["stream"]


class ResultWithGpu:
    """A real kineto result plus device events, as the result of a CUDA run would have."""

    def __init__(self, result, device_events):
        self._result = result
        self._device = device_events

    def experimental_event_tree(self):
        return self._result.experimental_event_tree()

    def events(self):
        return list(self._result.events()) + self._device


def test_kernels_and_runtime_calls_join_the_ops_that_launched_them(mlp):
    x = torch.randn(4, 8)
    with torchprof.Profiler(name="run") as prof:
        mlp(x).sum().backward()
    result = prof.torch_profile.profiler.kineto_results
    ops = []
    stack = list(result.experimental_event_tree())
    while stack:
        e = stack.pop()
        ops.append(e)
        stack.extend(e.children)
    fwd = next(e for e in ops if e.name == "aten::addmm" and e.parent.name == "aten::linear")
    bwd = next(e for e in ops if e.name == "aten::mm")  # inside AddmmBackward0
    device = [
        FakeDeviceEvent("cudaLaunchKernel", "cuda_runtime", fwd.start_time_ns + 1, fwd.start_time_ns + 2, 901, fwd.correlation_id),
        FakeDeviceEvent("sgemm_fwd", "kernel", fwd.end_time_ns + 10, fwd.end_time_ns + 5010, 901, fwd.correlation_id),
        FakeDeviceEvent("cudaLaunchKernel", "cuda_runtime", bwd.start_time_ns + 1, bwd.start_time_ns + 2, 902, bwd.correlation_id),
        FakeDeviceEvent("sgemm_bwd", "kernel", bwd.end_time_ns + 10, bwd.end_time_ns + 3010, 902, bwd.correlation_id),
        FakeDeviceEvent("Memcpy HtoD", "gpu_memcpy", 5, 1005, 903, 0),
    ]
    builder = TreeBuilder(label="run", modules=prof.recording.modules, cuda=True)
    builder.add(result_columns(ResultWithGpu(result, device), device=True))
    from torchprof._views.frame import to_dataframe

    df = to_dataframe(builder.finish())
    kernel_rows = df[df.kind == "kernel"]
    assert set(kernel_rows.name) == {"sgemm_fwd", "sgemm_bwd", "Memcpy HtoD"}
    fwd_kernel = kernel_rows[kernel_rows.name == "sgemm_fwd"].iloc[0]
    assert fwd_kernel.parent.endswith("aten::linear/aten::addmm") and fwd_kernel.self_cuda_us == pytest.approx(5.0)
    bwd_kernel = kernel_rows[kernel_rows.name == "sgemm_bwd"].iloc[0]
    assert bool(bwd_kernel.is_backward)
    layer = bwd_kernel.parent.split("/")[0]
    assert df.loc[layer, "kind"] == "module" and df.loc[layer, "bwd_cuda_us"] >= 3.0
    assert df.loc["run", "cuda_us"] == pytest.approx(5.0 + 3.0 + 1.0)
    runtime = df[df.name == "cudaLaunchKernel"]
    assert len(runtime) == 2 and (runtime.kind == "op").all()
