"""How a compiled graph's FLOPs are counted from what Inductor recorded, on graphs shaped as
Inductor builds them for CUDA (met on a live H200, torch 2.11): ``addmm`` is split into ``mm``
and a bias add, and neither part keeps the eager call's sequence number."""

from __future__ import annotations

from torchprof._records import CompiledGraph, CompiledKernel, CompiledNode
from torchprof._tree.flops.compiled import CompiledFlops

LINEAR1 = [("L['self'].linear1", "Linear")]
LINEAR2 = [("L['self'].linear2", "Linear")]


def total(graph: CompiledGraph) -> tuple[int, int, list[str]]:
    plan = CompiledFlops({graph.key: graph})._plan(graph.compile_id)
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


def test_a_matmul_fused_into_a_later_add_counts_both_as_eager_does():
    # A weight shared by an embedding and a linear head (tied, as GPT-2's): Inductor fuses the
    # head's weight-gradient mm with the add that accumulates the two gradients into one addmm,
    # which keeps only the add's provenance (no sequence number, no module).
    nodes = {
        "mm_2": CompiledNode("aten::mm", [[32, 128], [128, 64]], [None, None], LINEAR1, source="aten::mm", seq=59, bwd=True),
        "addmm_default": CompiledNode("aten::addmm", [[128, 64], [128, 32], [32, 64]], [None] * 3, [], source="aten::add", seq=-1, bwd=True),
    }
    kernels = [CompiledKernel("aten::mm", True, ["mm_2"]), CompiledKernel("aten::addmm", True, ["addmm_default"])]
    macs, flops, unknown = total(CompiledGraph("0/0", True, nodes, kernels))
    assert macs == 32 * 128 * 64 + 128 * 32 * 64
    assert flops == 2 * macs + 128 * 64  # both matmuls, and the gradients' sum
    assert unknown == []


def test_a_fused_bias_add_counts_on_the_matmuls_output_not_its_widest_argument():
    # x @ w + b written by hand: eager runs mm and an add over the [M, N] output; Inductor's
    # addmm keeps the add's provenance. The add counts M*N, not the [M, K] input's size.
    nodes = {"addmm": CompiledNode("aten::addmm", [[16], [8, 512], [512, 16]], [None] * 3, LINEAR1, source="aten::add", seq=3, bwd=False)}
    macs, flops, _ = total(CompiledGraph("0/0", False, nodes, [CompiledKernel("aten::addmm", True, ["addmm"])]))
    assert macs == 8 * 512 * 16 and flops == 2 * macs + 8 * 16


def test_an_embedding_gradient_counts_one_addition_per_incoming_gradient_as_eager_does():
    # torch 2.14 decomposes embedding_dense_backward into a masked, accumulating index put of the
    # incoming [2, 16, 64] gradient into the [128, 64] weight: eager counts 2*16*64, not 128*64.
    wte = [("L['self'].wte", "Embedding")]
    nodes = {
        "full": CompiledNode("aten::full", [[], []], [[128, 64], 0.0], wte, source="aten::embedding_dense_backward", seq=7, bwd=True),
        "put": CompiledNode("aten::_unsafe_masked_index_put_accumulate", [[128, 64], [2, 16, 1], [[2, 16]], [2, 16, 64]], [None] * 4, wte,
                            source="aten::embedding_dense_backward", seq=7, bwd=True),
    }  # fmt: skip
    _, flops, unknown = total(CompiledGraph("0/0", True, nodes, [CompiledKernel("cpp_fused_embedding_dense_backward_0", False, ["full", "put"])]))
    assert flops == 2 * 16 * 64 and unknown == []


def test_a_functional_fill_costs_nothing_as_its_in_place_form():
    # Functionalization turns an in-place fill_ (T5's and BART's shift of the labels into
    # decoder inputs) into fill: it writes a constant and does no arithmetic.
    nodes = {"fill": CompiledNode("aten::fill", [[2, 1], []], [None, 0], [], source="aten::fill", seq=-1, bwd=False),
             "zero": CompiledNode("aten::zero", [[2, 8]], [None], [], source="aten::zero", seq=-1, bwd=False)}  # fmt: skip
    macs, flops, unknown = total(CompiledGraph("0/0", False, nodes, [CompiledKernel("cpp_fused_fill_0", False, ["fill", "zero"])]))
    assert (macs, flops, unknown) == (0, 0, [])


def test_attention_without_autograd_counts_once_and_its_outputs_read_cost_nothing():
    # Under torch.no_grad() no node has a sequence number: attention's node and the getitem that
    # reads its first output are one call (inference of a compiled ViT listed attention as unknown).
    attn = [("L['self'].attention", "ViTSelfAttention")]
    q = [2, 4, 17, 16]
    nodes = {
        "sdpa": CompiledNode("aten::_scaled_dot_product_flash_attention_for_cpu", [q, q, q, [], [], [], []], [None, None, None, 0.0, False, None, 0.25],
                             attn, source="aten::_scaled_dot_product_flash_attention_for_cpu", seq=-1, bwd=False),
        "getitem_2": CompiledNode("getitem", [[q, [2, 4, 17]], []], [None, 0], attn, source="aten::_scaled_dot_product_flash_attention_for_cpu", seq=-1,
                                  bwd=False),
    }  # fmt: skip
    macs, _, unknown = total(CompiledGraph("0/0", False, nodes, [CompiledKernel("aten::_scaled_dot_product_flash_attention_for_cpu", True, ["sdpa"])]))
    assert unknown == [] and macs == 2 * 2 * 4 * 17 * 17 * 16


def test_a_decomposed_op_without_autograd_counts_once_per_eager_call():
    # Under torch.no_grad() no node has a sequence number; the nodes a layer norm decomposes into
    # share the eager call they came from (Dynamo's graph node), and count as that one call.
    # Two layer norms of one module stay two calls. (A compiled inference counted each node of a
    # decomposition as a whole call: 2x eager on Linear-LayerNorm-GELU-LayerNorm.)
    ln = [("L['self'].ln", "LayerNorm")]
    x = [4, 16]

    def layer_norm(tag: str, origin: str) -> dict[str, CompiledNode]:
        return {f"{op}_{tag}": CompiledNode(f"aten::{op}", [x, x], [None, None], ln, source="aten::native_layer_norm", origin=origin)
                for op in ("var_mean", "sub", "rsqrt", "mul", "add")}  # fmt: skip

    nodes = {**layer_norm("a", "g1:input_2"), **layer_norm("b", "g1:input_4")}
    kernels = [CompiledKernel("cpp_fused_native_layer_norm_0", False, list(nodes))]
    _, flops, unknown = total(CompiledGraph("0/0", False, nodes, kernels))
    assert unknown == [] and flops == 2 * 5 * 4 * 16  # eager: 5 per element, per call
    # Once autograd has run in the process, every node of a graph traced without it carries the
    # same (stale) sequence number, and no partitioner's tag: the numbers say nothing there.
    for node in nodes.values():
        node.seq = 213
    assert total(CompiledGraph("0/0", False, nodes, kernels))[1] == 2 * 5 * 4 * 16


def test_a_module_dynamo_saw_as_a_positional_argument_is_named_as_eager():
    # A decorated forward (Hugging Face's) is compiled as a wrapper given ``self`` positionally:
    # Dynamo names the model ``L['args'][0]``, and its rows read "Qwen2ForCausalLM.[0].model".
    from torchprof._tree.compiled import _relative, _root_token

    assert _relative("L['args'][0].model.layers._modules['0'].mlp") == "model.layers.0.mlp"
    assert _relative("L['args'][0]") == ""
    assert _root_token("L['args'][0].lm_head") == "L['args'][0]" != _root_token("L['args'][1].lm_head")
    assert _relative("L['self']._modules['0']") == "0"
