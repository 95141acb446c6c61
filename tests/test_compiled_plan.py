"""How a compiled graph's FLOPs are counted from what Inductor recorded, on graphs shaped as
Inductor builds them for CUDA (met on a live H200, torch 2.11): ``addmm`` is split into ``mm``
and a bias add, and neither part keeps the eager call's sequence number."""

from __future__ import annotations

from torchprof._records import CompiledGraph, CompiledKernel, CompiledNode
from torchprof._tree.compiled import CompiledRegions

LINEAR1 = [("L['self'].linear1", "Linear")]
LINEAR2 = [("L['self'].linear2", "Linear")]


def total(graph: CompiledGraph) -> tuple[int, int, list[str]]:
    plan = CompiledRegions({graph.key: graph}, {})._plan(graph.compile_id)
    macs = sum(v[0] for v in plan.values())
    flops = sum(v[1] for v in plan.values())
    return macs, flops, [op for v in plan.values() for op in v[2]]


def split_addmm(name: str, x: list[int], w: list[int], modules) -> dict[str, CompiledNode]:
    return {
        f"mm_{name}": CompiledNode("aten::mm", [x, w], [None, None], modules, source="aten::addmm", seq=-1),
        f"add_{name}": CompiledNode("aten::add", [[w[1]], [x[0], w[1]]], [None, None], modules, source="aten::addmm", seq=-1),
    }


def test_a_split_addmm_counts_its_matmul_once_and_no_bias_as_eager_does():
    nodes = {**split_addmm("a", [2048, 512], [512, 2048], LINEAR1), **split_addmm("b", [2048, 2048], [2048, 512], LINEAR2)}
    kernels = [CompiledKernel("aten::mm", True, ["mm_a"]), CompiledKernel("triton_poi_fused_add_0", False, ["add_a"]),
               CompiledKernel("aten::mm", True, ["mm_b"]), CompiledKernel("triton_poi_fused_add_1", False, ["add_b"])]  # fmt: skip
    macs, flops, unknown = total(CompiledGraph("0/0", False, nodes, kernels))
    assert macs == 2 * 2048 * 512 * 2048 and flops == 2 * macs and unknown == []


def test_two_split_addmms_in_one_layer_count_each_of_their_matmuls():
    nodes = {**split_addmm("a", [64, 32], [32, 16], LINEAR1), **split_addmm("b", [64, 16], [16, 8], LINEAR1)}
    kernels = [CompiledKernel("aten::mm", True, ["mm_a"]), CompiledKernel("aten::mm", True, ["mm_b"])]
    macs, _, _ = total(CompiledGraph("0/0", False, nodes, kernels))
    assert macs == 64 * 32 * 16 + 64 * 16 * 8


def test_a_matmul_like_call_whose_matmul_is_gone_is_unknown_not_guessed():
    nodes = {"add_a": CompiledNode("aten::add", [[16], [64, 16]], [None, None], LINEAR1, source="aten::addmm", seq=-1)}
    macs, flops, unknown = total(CompiledGraph("0/0", False, nodes, [CompiledKernel("triton_poi_fused_add_0", False, ["add_a"])]))
    assert (macs, flops) == (0, 0) and unknown == ["aten::addmm"]
