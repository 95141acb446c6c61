"""FLOP and MAC formulas from recorded operator shapes.

Every formula takes the op's input shapes (one entry per argument: a tensor's sizes, a list of
sizes for a tensor list, ``[]`` for scalars and non-tensors) and its concrete scalar arguments
(strides, groups, flags; ``None`` where unknown), and returns ``(macs, flops)``. Formulas never
raise on odd input: what they cannot read counts as absent.

Conventions:
- A multiply-add is 1 MAC and 2 FLOPs. Only matmul-like work (the matmul family, convolution,
  attention) has MACs; ``flops = 2 * macs + everything else``. Matmul, convolution and attention
  counts agree with ``torch.utils.flop_counter.FlopCounterMode`` (which counts only those), so
  ``macs`` equals its total divided by two - except where it is wrong: it counts the weight
  gradient of a grouped convolution ``groups`` times over (we count it once), and it misses the
  CPU attention kernels and the ``nn.MultiheadAttention`` fast path (we count them).
- Bias additions inside matmul and convolution are not counted (as FlopCounterMode). Other ops
  cost a fixed number of FLOPs per element, given in the tables below: elementwise math and
  activations 1 (their gradients too), normalisation 5 (mean, variance, normalise, scale, shift),
  softmax 5 (max, subtract, exp, sum, divide), their gradients 10, pooling 1 per window element
  per output, interpolation a multiply-add per neighbour per output element, optimizer updates
  as their single-tensor ops.
- The outermost op that has a formula is counted and the ops it calls are not, so a composite op
  (``scaled_dot_product_attention``, ``_native_multi_head_attention``) is counted once whatever
  backend ran it. Ops with no formula are walked into; an op with no formula that is not known to
  be free (``FREE``, autograd nodes) and has nothing but free ops below it is reported as
  unsupported by the tree, never silently counted as zero.
- Attention is counted dense (as FlopCounterMode): a causal or padding mask does not reduce it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from math import prod
from typing import Any

from .kinds import FREE, NO_ARITHMETIC, SELECTION

Shapes = Sequence[Any]
Formula = Callable[[Shapes, Sequence[Any]], tuple[int, int]]


# -- reading arguments ----------------------------------------------------------------------------
def _dims(shape: Any) -> list[int]:
    """A tensor's sizes; ``[]`` for anything else (a scalar, a tensor list, a missing argument)."""
    if isinstance(shape, (list, tuple)) and all(isinstance(d, int) for d in shape):
        return [int(d) for d in shape]
    return []


def _shape(shapes: Shapes, index: int) -> list[int]:
    return _dims(shapes[index]) if index < len(shapes) else []


def _numel(shape: Any) -> int:
    return prod(_dims(shape))


def _list_numel(shape: Any) -> int:
    """Elements of a tensor list (``[[8, 4], [8]]``), or of a single tensor."""
    if isinstance(shape, (list, tuple)) and shape and all(isinstance(s, (list, tuple)) for s in shape):
        return sum(prod(_dims(s)) for s in shape)
    return _numel(shape)


def _broadcast_numel(shapes: Shapes) -> int:
    """Elements of the result of broadcasting every tensor argument together."""
    # Fast path (most elementwise calls): every tensor argument has the same sizes.
    first: Any = None
    for shape in shapes:
        if shape:
            if first is None:
                first = shape
            elif shape != first:
                break
    else:
        if first is None:
            return 1
        if type(first) is list and all(type(d) is int for d in first):
            return prod(first)
    out: list[int] = []
    for shape in shapes:
        # (Only read: a plain size list is used as it is, not copied.)
        dims = shape if type(shape) is list and all(type(d) is int for d in shape) else _dims(shape)
        if len(dims) > len(out):
            out = [1] * (len(dims) - len(out)) + out
        for k in range(1, len(dims) + 1):
            d = dims[-k]
            if out[-k] == 1 or (d != 1 and d > out[-k]):
                out[-k] = d
    return prod(out) if out else 1


def _arg(concrete: Sequence[Any] | None, index: int, default: Any = None) -> Any:
    if concrete is None or index >= len(concrete):
        return default
    value = concrete[index]
    return default if value is None else value


def _ints(value: Any, ndim: int, default: int) -> list[int]:
    """An int-list argument (``stride=[2, 2]``, ``kernel_size=3``) spread over ``ndim`` dims."""
    if value is None or value == [] or isinstance(value, str):
        return [default] * ndim
    if isinstance(value, (list, tuple)):
        if not all(isinstance(v, (int, float)) for v in value):
            return [default] * ndim
        vals = [int(v) for v in value]
        return vals if len(vals) == ndim else vals * ndim if len(vals) == 1 else [default] * ndim
    if isinstance(value, (int, float)):
        return [int(value)] * ndim
    return [default] * ndim


# -- matmul family ----------------------------------------------------------------------------------
def _mm(a: int) -> Formula:
    """[m, k] @ [k, n] with the matrices at arguments ``a`` and ``a + 1``: m*k*n MACs."""

    def formula(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
        x, w = _shape(shapes, a), _shape(shapes, a + 1)
        if len(x) != 2 or len(w) != 2:
            return 0, 0
        macs = x[0] * x[1] * w[1]
        return macs, 2 * macs

    return formula


def _mm_nt(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    # _weight_int8pack_mm(self [m, k], weight [n, k], scales)
    x, w = _shape(shapes, 0), _shape(shapes, 1)
    macs = x[0] * x[1] * w[0] if len(x) == 2 and len(w) == 2 else 0
    return macs, 2 * macs


def _bmm(a: int) -> Formula:
    """[b, m, k] @ [b, k, n] at arguments ``a``, ``a + 1``: b*m*k*n MACs."""

    def formula(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
        x, w = _shape(shapes, a), _shape(shapes, a + 1)
        if len(x) != 3 or len(w) != 3:
            return 0, 0
        macs = x[0] * x[1] * x[2] * w[2]
        return macs, 2 * macs

    return formula


def _mv(a: int) -> Formula:
    """[m, k] @ [k] at argument ``a``: m*k MACs (FlopCounterMode has no formula for it)."""

    def formula(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
        m = _shape(shapes, a)
        macs = prod(m) if len(m) == 2 else 0
        return macs, 2 * macs

    return formula


def _addr(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    # addr(self, vec1 [m], vec2 [n]): the outer product, a multiply-add per element
    macs = _numel(_shape(shapes, 1)) * _numel(_shape(shapes, 2)) if len(shapes) > 2 else 0
    return macs, 2 * macs


def _dot(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    macs = _numel(shapes[0]) if shapes else 0
    return macs, 2 * macs


# -- convolution ----------------------------------------------------------------------------------
def _conv_macs(x: list[int], w: list[int], transposed: bool, stride: Any, padding: Any, dilation: Any) -> int:
    """MACs of one (batched) convolution: batch * C_out * C_in/groups * kernel * output positions.

    The weight is ``[C_out, C_in/groups, k...]`` (``[C_in, C_out/groups, k...]`` when transposed),
    so ``w[0] * w[1]`` is the channel work with groups already divided out. A transposed
    convolution scatters every *input* position through the kernel, so its work is counted per
    input position and stride, padding and output_padding do not change it (as FlopCounterMode).
    """
    if len(x) < 3 or len(w) != len(x):
        return 0
    spatial = len(x) - 2
    kernel = w[2:]
    channels = w[0] * w[1] * prod(kernel)
    if transposed:
        return x[0] * channels * prod(x[2:])
    s = _ints(stride, spatial, 1)
    d = _ints(dilation, spatial, 1)
    if padding == "same":
        # torch pads an odd total on the right before the aten op, then passes the left part.
        p = [d[k] * (kernel[k] - 1) // 2 for k in range(spatial)]
    else:
        p = _ints(padding, spatial, 0)  # "valid" is no padding
    out = [max(0, (x[2 + k] + 2 * p[k] - d[k] * (kernel[k] - 1) - 1) // s[k] + 1) for k in range(spatial)]
    return x[0] * channels * prod(out)


def _convolution(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    # aten::convolution / _convolution(input, weight, bias, stride, padding, dilation, transposed, ...)
    x, w = _shape(shapes, 0), _shape(shapes, 1)
    transposed = bool(_arg(concrete, 6, False))
    macs = _conv_macs(x, w, transposed, _arg(concrete, 3), _arg(concrete, 4), _arg(concrete, 5))
    return macs, 2 * macs


def _convolution_backward(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    # (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    #  output_padding, groups, output_mask). The input gradient is a transposed convolution of
    # grad_output with the weight and the weight gradient a convolution of the input with
    # grad_output: each is exactly as much work as the forward, groups included. output_mask
    # says which were computed: the first layer's input usually needs no gradient.
    x, w = _shape(shapes, 1), _shape(shapes, 2)
    transposed = bool(_arg(concrete, 7, False))
    forward = _conv_macs(x, w, transposed, _arg(concrete, 4), _arg(concrete, 5), _arg(concrete, 6))
    mask = _arg(concrete, 10, [True, True, True])
    if not isinstance(mask, (list, tuple)) or len(mask) < 2:
        mask = [True, True]
    macs = forward * (int(bool(mask[0])) + int(bool(mask[1])))
    return macs, 2 * macs


# -- attention --------------------------------------------------------------------------------------
# Per query row and key column: E multiply-adds for the score q.k, Ev for probability @ v. The
# softmax over the scores costs 5 FLOPs each forward; a backward recomputes the probabilities
# when it does not store them (fused kernels: 5 more) and takes the softmax gradient (10).
SOFTMAX_FLOPS = 5
SOFTMAX_BACKWARD_FLOPS = 10


def _attention_dims(q: list[int], k: list[int], v: list[int]) -> tuple[int, int, int, int, int]:
    """(batch*heads, L, S, E_qk, E_v) for q [..., L, E], k [..., S, E], v [..., S, Ev] (grouped-
    query attention included: k and v may have fewer heads; the work is per query head)."""
    return prod(q[:-2]), q[-2], k[-2], q[-1], v[-1]


def _sdpa_forward(bh: int, L: int, S: int, E: int, Ev: int) -> tuple[int, int]:
    macs = bh * L * S * (E + Ev)  # q @ k^T, then probabilities @ v
    return macs, 2 * macs + SOFTMAX_FLOPS * bh * L * S


def _sdpa_backward_counts(bh: int, L: int, S: int, E: int, Ev: int) -> tuple[int, int]:
    # recompute q @ k^T (E); grad_p = grad_out @ v^T and grad_v = p^T @ grad_out (Ev each);
    # grad_q = grad_s @ k and grad_k = grad_s^T @ q (E each): FlopCounterMode's five matmuls.
    macs = bh * L * S * (3 * E + 2 * Ev)
    return macs, 2 * macs + (SOFTMAX_FLOPS + SOFTMAX_BACKWARD_FLOPS) * bh * L * S


def _sdpa(first: int, backward: bool) -> Formula:
    """Attention with q, k, v at arguments ``first`` .. ``first + 2`` laid out [B, H, L, E]."""

    def formula(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
        q, k, v = _shape(shapes, first), _shape(shapes, first + 1), _shape(shapes, first + 2)
        if min(len(q), len(k), len(v)) < 2:
            return 0, 0
        dims = _attention_dims(q, k, v)
        return _sdpa_backward_counts(*dims) if backward else _sdpa_forward(*dims)

    return formula


def _attention_blhe(first: int, backward: bool, max_k_index: int) -> Formula:
    """The kernels under SDPA on CUDA (``_flash_attention_forward``, ``_efficient_attention_*``)
    take [B, L, H, E]; packed variable-length batches come as [total, H, E], counted as an upper
    bound: every query against the longest key sequence (argument ``max_k_index``)."""

    def formula(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
        q, k, v = _shape(shapes, first), _shape(shapes, first + 1), _shape(shapes, first + 2)
        if len(q) == 4 and len(k) == 4 and len(v) == 4:
            dims = (q[0] * q[2], q[1], k[1], q[3], v[3])
        elif len(q) == 3 and len(k) == 3 and len(v) == 3:
            max_k = _arg(concrete, max_k_index)
            dims = (q[1], q[0], int(max_k) if isinstance(max_k, int) else k[0], q[2], v[2])
        else:
            return 0, 0
        return _sdpa_backward_counts(*dims) if backward else _sdpa_forward(*dims)

    return formula


def _native_mha(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    # _native_multi_head_attention(query [B, L, E], key [B, S, E], value, embed_dim, num_head,
    # qkv_weight, qkv_bias, proj_weight, proj_bias, ...): the nn.MultiheadAttention inference
    # fast path (also inside TransformerEncoderLayer's), one op FlopCounterMode does not see into.
    q, k = _shape(shapes, 0), _shape(shapes, 1)
    if len(q) < 2 or len(k) < 2:
        return 0, 0
    E = q[-1]
    batch = prod(q[:-2])
    L, S = q[-2], k[-2]
    heads = _arg(concrete, 4, 1)
    heads = heads if isinstance(heads, int) and heads > 0 else 1
    projections = batch * (L + 2 * S) * E * E + batch * L * E * E  # q, k, v in; output out
    attention = 2 * batch * L * S * E  # heads split E: heads * (E / heads) = E per score, twice
    macs = projections + attention
    return macs, 2 * macs + SOFTMAX_FLOPS * batch * heads * L * S


# -- recurrent layers -------------------------------------------------------------------------------
def _rnn(weights: slice, backward: bool) -> Formula:
    """A fused RNN/LSTM/GRU kernel (mkldnn one layer per op, cuDNN all layers in one): every
    weight matrix (input-hidden, hidden-hidden, projection) multiplies a vector at every step
    of every sequence, ``prod(input[:-1])`` times whatever the layout ([T, B, I], [B, T, I], or
    packed [sum T, I]). Gates cost 2 FLOPs per element per step (activation, state update), and
    each matrix has a row per gate element. The backward takes the input/hidden and the weight
    gradients: twice the forward."""

    def formula(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
        x = _shape(shapes, 0)
        if len(x) < 2:
            return 0, 0
        steps = prod(x[:-1])
        mats: list[list[int]] = []
        for arg in shapes[weights]:
            if isinstance(arg, (list, tuple)) and arg and all(isinstance(a, (list, tuple)) for a in arg):
                mats += [_dims(a) for a in arg]  # a tensor list (cuDNN)
            else:
                mats.append(_dims(arg))
        mats = [m for m in mats if len(m) == 2]
        macs = steps * sum(m[0] * m[1] for m in mats)
        fl = 2 * macs + steps * sum(m[0] for m in mats)
        return (2 * macs, 2 * fl) if backward else (macs, fl)

    return formula


# -- per-element costs ------------------------------------------------------------------------------
def _per_element(cost: int, which: int | None = None) -> Formula:
    """``cost`` FLOPs per element of the broadcast result (or of argument ``which``)."""

    def formula(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
        if which is not None:
            return 0, cost * _numel(shapes[which]) if which < len(shapes) else 0
        return 0, cost * _broadcast_numel(shapes)

    return formula


def _fused_adam(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    # _fused_adam(w)_(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr,
    # beta1, beta2, weight_decay, ...): per parameter element as the single-tensor update, lerp 2,
    # mul 1, addcmul 2, sqrt 1, div 1, add 1, addcdiv 3, and 1 for weight decay (either kind).
    decay = _arg(concrete, 9, 0)
    cost = 11 + (1 if isinstance(decay, (int, float)) and decay != 0 else 0)
    return 0, cost * _list_numel(shapes[0]) if shapes else 0


def _fused_sgd(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    # _fused_sgd_(params, grads, momentum_buffers, weight_decay, momentum, lr, dampening,
    # nesterov, ...): the step 1, weight decay 1, momentum 2 (mul, add), nesterov 1.
    decay, momentum, nesterov = _arg(concrete, 3, 0), _arg(concrete, 4, 0), _arg(concrete, 7, False)
    cost = 1 + (decay != 0) + 2 * (momentum != 0) + bool(nesterov)
    return 0, cost * _list_numel(shapes[0]) if shapes else 0


def _per_list_element(cost: int) -> Formula:
    """``cost`` FLOPs per element of the first tensor list (``_foreach_*``, fused optimizers)."""

    def formula(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
        return 0, cost * _list_numel(shapes[0]) if shapes else 0

    return formula


# -- pooling ----------------------------------------------------------------------------------------
def _pool_out(size: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    """torch's pooling_output_shape."""
    span = size + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil else 0)) // s + 1
    if ceil and (out - 1) * s >= size + p:
        out -= 1
    return max(0, out)


def _pool(spatial: int, is_max: bool) -> Formula:
    """max_pool{n}d(input, kernel_size, stride, padding, dilation, ceil_mode) and
    avg_pool{n}d(input, kernel_size, stride, padding, ceil_mode, ...): one FLOP per window
    element per output position (a comparison or an addition)."""

    def formula(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
        x = _shape(shapes, 0)
        kernel = _arg(concrete, 1)
        if len(x) < spatial + 1 or kernel is None:
            return 0, 0
        k = _ints(kernel, spatial, 1)
        s = _ints(_arg(concrete, 2) or kernel, spatial, 1)
        p = _ints(_arg(concrete, 3), spatial, 0)
        d = _ints(_arg(concrete, 4), spatial, 1) if is_max else [1] * spatial
        ceil = bool(_arg(concrete, 5 if is_max else 4, False))
        dims = x[-spatial:]
        out = [_pool_out(dims[j], k[j], s[j], p[j], d[j], ceil) for j in range(spatial)]
        return 0, prod(x[:-spatial]) * prod(out) * prod(k)

    return formula


# -- interpolation ----------------------------------------------------------------------------------
def _interpolate(spatial: int, neighbours: int) -> Formula:
    """upsample_{linear1d,bilinear2d,bicubic2d,trilinear3d}(input, output_size, align_corners,
    scale_factors | scales...): a multiply-add per neighbour per output element."""

    def formula(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
        x = _shape(shapes, 0)
        if len(x) < spatial + 1:
            return 0, 0
        size = _arg(concrete, 1)
        scales = _arg(concrete, 3)
        if isinstance(size, (list, tuple)) and len(size) == spatial:
            out = [int(v) for v in size]
        elif isinstance(scales, (list, tuple)) and len(scales) == spatial:
            out = [int(x[-spatial + j] * float(scales[j])) for j in range(spatial)]
        else:
            return 0, 0
        return 0, 2 * neighbours * prod(x[:-spatial]) * prod(out)

    return formula


def _interpolate_backward(neighbours: int) -> Formula:
    # (grad_output, output_size, input_size, ...): each output gradient goes to its neighbours.
    return _per_element(2 * neighbours, 0)


def _grid_sampler(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    # grid_sampler_2d(input [N, C, H, W], grid [N, Ho, Wo, 2], mode, ...): bilinear per output
    x, g = _shape(shapes, 0), _shape(shapes, 1)
    if len(x) != 4 or len(g) != 4:
        return 0, 0
    return 0, 2 * 4 * x[0] * x[1] * g[1] * g[2]


def _grid_sampler_backward(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    # grid_sampler_2d_backward(grad_output, input, grid, ...): per output element and channel,
    # the four corners' gradients scattered back (grad_input) and the four corners read again
    # for the grid's gradient: twice the forward's reads.
    return 0, 2 * _grid_sampler([_shape(shapes, 1), _shape(shapes, 2)], concrete)[1]


FORMULAS: dict[str, Formula] = {
    "aten::mm": _mm(0),
    "aten::addmm": _mm(1),
    "aten::addmm_": _mm(1),
    "aten::_addmm_activation": _mm(1),
    "aten::_scaled_mm": _mm(0),
    "aten::_int_mm": _mm(0),
    "aten::_weight_int8pack_mm": _mm_nt,
    "aten::bmm": _bmm(0),
    "aten::baddbmm": _bmm(1),
    "aten::baddbmm_": _bmm(1),
    "aten::addbmm": _bmm(1),
    "aten::addbmm_": _bmm(1),
    "aten::mv": _mv(0),
    "aten::addmv": _mv(1),
    "aten::addmv_": _mv(1),
    "aten::dot": _dot,
    "aten::addr": _addr,
    "aten::addr_": _addr,
    "aten::vdot": _dot,
    "aten::convolution": _convolution,
    "aten::_convolution": _convolution,
    "aten::convolution_backward": _convolution_backward,
    "aten::scaled_dot_product_attention": _sdpa(0, False),
    "aten::_scaled_dot_product_attention_math": _sdpa(0, False),
    "aten::_scaled_dot_product_flash_attention": _sdpa(0, False),
    "aten::_scaled_dot_product_flash_attention_for_cpu": _sdpa(0, False),
    "aten::_scaled_dot_product_efficient_attention": _sdpa(0, False),
    "aten::_scaled_dot_product_cudnn_attention": _sdpa(0, False),
    "aten::_scaled_dot_product_fused_attention_overrideable": _sdpa(0, False),
    "aten::_scaled_dot_product_flash_attention_backward": _sdpa(1, True),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": _sdpa(1, True),
    "aten::_scaled_dot_product_efficient_attention_backward": _sdpa(1, True),
    "aten::_scaled_dot_product_cudnn_attention_backward": _sdpa(1, True),
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": _sdpa(1, True),
    # (query, key, value, cum_seq_q, cum_seq_k, max_q, max_k, ...) and backward (grad_out, q, k,
    # v, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, ...)
    "aten::_flash_attention_forward": _attention_blhe(0, False, 6),
    "aten::_flash_attention_backward": _attention_blhe(1, True, 9),
    # (query, key, value, bias, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, ...) and
    # backward (grad_out, q, k, v, bias, out, cu_seqlens_q, cu_seqlens_k, max_q, max_k, ...)
    "aten::_efficient_attention_forward": _attention_blhe(0, False, 7),
    "aten::_efficient_attention_backward": _attention_blhe(1, True, 9),
    "aten::_native_multi_head_attention": _native_mha,
    # mkldnn_rnn_layer(input, weight0..3, hx, cx, ...) and its backward(input, weight1..4, ...);
    # _cudnn_rnn(input, weight[], ...), miopen_rnn likewise, and their backwards
    "aten::mkldnn_rnn_layer": _rnn(slice(1, 5), False),
    "aten::mkldnn_rnn_layer_backward": _rnn(slice(1, 5), True),
    "aten::_cudnn_rnn": _rnn(slice(1, 2), False),
    "aten::_cudnn_rnn_backward": _rnn(slice(1, 2), True),
    "aten::miopen_rnn": _rnn(slice(1, 2), False),
    "aten::miopen_rnn_backward": _rnn(slice(1, 2), True),
    "aten::grid_sampler_2d": _grid_sampler,
    "aten::cudnn_grid_sampler": _grid_sampler,
    "aten::grid_sampler_2d_backward": _grid_sampler_backward,
}
#: Ops whose cost follows the layout of their arguments (matmuls, convolutions, attention, RNNs,
#: grid sampling), not the size of one tensor: only their own arguments can count them.
STRUCTURED = frozenset(FORMULAS)
for _d in (1, 2, 3):
    FORMULAS[f"aten::max_pool{_d}d"] = FORMULAS[f"aten::max_pool{_d}d_with_indices"] = _pool(_d, True)
    FORMULAS[f"aten::quantized_max_pool{_d}d"] = FORMULAS[f"aten::mkldnn_max_pool{_d}d"] = _pool(_d, True)
    FORMULAS[f"aten::avg_pool{_d}d"] = _pool(_d, False)
#: Interpolating upsamplers: (spatial dims, neighbours read per output element).
INTERPOLATIONS = {
    "upsample_linear1d": (1, 2), "upsample_bilinear2d": (2, 4), "upsample_bicubic2d": (2, 16),
    "upsample_trilinear3d": (3, 8), "_upsample_bilinear2d_aa": (2, 4), "_upsample_bicubic2d_aa": (2, 16),
}  # fmt: skip
for _name, (_d, _n) in INTERPOLATIONS.items():
    FORMULAS[f"aten::{_name}"] = _interpolate(_d, _n)
    FORMULAS[f"aten::{_name}_backward"] = _interpolate_backward(_n)

# FLOPs per element of the broadcast result: plain elementwise math, comparisons, reductions
# (per input element), losses, and the gradients of activations (which read grad and input).
_ONE_PER_ELEMENT = """
add add_ sub sub_ rsub mul mul_ div div_ true_divide neg neg_ abs abs_ reciprocal reciprocal_ sign
maximum minimum fmax fmin max min clamp clamp_ clamp_min clamp_min_ clamp_max clamp_max_
relu relu_ relu6 threshold threshold_ threshold_backward hardtanh hardtanh_ hardtanh_backward
leaky_relu leaky_relu_ leaky_relu_backward elu elu_ elu_backward selu selu_ celu celu_ prelu
_prelu_kernel rrelu rrelu_with_noise rrelu_with_noise_backward
gelu gelu_ gelu_backward silu silu_ silu_backward mish mish_ mish_backward
sigmoid sigmoid_ sigmoid_backward tanh tanh_ tanh_backward hardsigmoid hardsigmoid_ hardsigmoid_backward
hardswish hardswish_ hardswish_backward softplus softplus_backward glu glu_backward
log_sigmoid_forward log_sigmoid_backward hardshrink hardshrink_backward softshrink softshrink_backward
logit logit_backward xlogy xlogy_ special_xlog1py hypot copysign heaviside
exp exp_ exp2 exp2_ expm1 expm1_ log log_ log2 log2_ log10 log10_ log1p log1p_ sqrt sqrt_ rsqrt rsqrt_
pow pow_ square float_power
sin sin_ cos cos_ tan tan_ asin acos atan atan2 sinh cosh asinh acosh atanh erf erf_ erfc erfinv
floor floor_ ceil ceil_ round round_ trunc trunc_ frac
eq ne lt le gt ge eq_ ne_ lt_ le_ gt_ ge_ logical_and logical_or logical_not logical_xor
bitwise_and bitwise_or bitwise_xor bitwise_not fmod fmod_ remainder remainder_ floor_divide
bitwise_and_ bitwise_or_ bitwise_xor_ bitwise_not_ logical_and_ logical_or_ logical_not_ logical_xor_
tan_ asin_ acos_ atan_ atan2_ sinh_ cosh_ asinh_ acosh_ atanh_ erfc_ erfinv_ hypot_ copysign_ heaviside_
floor_divide_ true_divide_ square_ float_power_ logit_ sgn_
isnan isinf isfinite nan_to_num nan_to_num_ masked_fill masked_fill_ sgn sign_
sum mean amax amin aminmax argmax argmin cumsum cumsum_ cumprod prod logsumexp all any nansum _is_any_true _is_all_true
logcumsumexp cummax cummin
native_dropout_backward
mse_loss mse_loss_backward l1_loss smooth_l1_loss smooth_l1_loss_backward huber_loss huber_loss_backward
binary_cross_entropy binary_cross_entropy_backward binary_cross_entropy_with_logits soft_margin_loss
soft_margin_loss_backward kl_div
adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d _adaptive_avg_pool2d _adaptive_avg_pool3d
_adaptive_avg_pool2d_backward _adaptive_avg_pool3d_backward adaptive_avg_pool3d_backward
adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d adaptive_max_pool2d_backward
adaptive_max_pool3d_backward
scatter_add scatter_add_ index_add index_add_ scatter_reduce scatter_reduce_ index_reduce index_reduce_
count_nonzero _masked_scale multi_margin_loss multilabel_margin_loss_forward polygamma_
angle clip clip_ conj_physical conj_physical_ _conj_physical deg2rad deg2rad_ rad2deg rad2deg_ digamma digamma_ frac_ frexp
gcd gcd_ lcm lcm_ i0 i0_ igamma igamma_ igammac igammac_ isneginf isposinf signbit ldexp ldexp_ lgamma lgamma_
logaddexp logaddexp2 mvlgamma mvlgamma_ nextafter nextafter_ polygamma sinc sinc_ special_entr special_erfcx
special_i0e special_i1 special_i1e special_log_ndtr special_ndtri special_ndtr special_zeta special_airy_ai
special_bessel_j0 special_bessel_j1 special_bessel_y0 special_bessel_y1 special_modified_bessel_i0
special_modified_bessel_i1 special_modified_bessel_k0 special_modified_bessel_k1 special_scaled_modified_bessel_k0
special_scaled_modified_bessel_k1 special_spherical_bessel_j0 special_chebyshev_polynomial_t
special_chebyshev_polynomial_u special_chebyshev_polynomial_v special_chebyshev_polynomial_w
special_shifted_chebyshev_polynomial_t special_shifted_chebyshev_polynomial_u special_shifted_chebyshev_polynomial_v
special_shifted_chebyshev_polynomial_w special_hermite_polynomial_h special_hermite_polynomial_he
special_laguerre_polynomial_l special_legendre_polynomial_p
__and__ __iand__ __or__ __ior__ __xor__ __ixor__ __lshift__ __ilshift__ __rshift__ __irshift__
bitwise_left_shift bitwise_left_shift_ bitwise_right_shift bitwise_right_shift_
"""
# Gradients of gathers (pooling maxima, nearest upsampling, embeddings, padding): one addition
# per incoming output gradient (argument 0), scattered back. col2im (``nn.Fold``, and im2col's
# gradient) and unfold_backward (``Tensor.unfold``'s gradient) are the same: every element of
# the patches (argument 0) is added into the place it came from, overlapping patches summing.
_ONE_PER_OUTPUT_GRADIENT = """
col2im unfold_backward
max_pool1d_with_indices_backward max_pool2d_with_indices_backward max_pool3d_with_indices_backward
upsample_nearest1d_backward upsample_nearest2d_backward upsample_nearest3d_backward
_upsample_nearest_exact1d_backward _upsample_nearest_exact2d_backward _upsample_nearest_exact3d_backward
embedding_backward embedding_dense_backward reflection_pad1d_backward reflection_pad2d_backward
reflection_pad3d_backward replication_pad1d_backward replication_pad2d_backward replication_pad3d_backward
"""
# ...or one per input element (argument 1) where every input gathers its windows' gradients.
_ONE_PER_INPUT_GRADIENT = "avg_pool1d_backward avg_pool2d_backward avg_pool3d_backward"
# A loss over class scores [N, C] reads one score per target (argument 1; 2 in backward).
_PER_TARGET = {"nll_loss": 1, "nll_loss_forward": 1, "nll_loss2d_forward": 1, "nll_loss_nd": 1,
               "nll_loss_backward": 2, "nll_loss2d_backward": 2}  # fmt: skip
_TWO_PER_ELEMENT = "addcmul addcmul_ lerp lerp_ var std var_mean std_mean norm linalg_vector_norm frobenius_norm _add_relu _add_relu_"
# weight_norm's weight from (v, g): the norm of v (a square and an add per element), then v
# scaled by g / norm (one per element); ``_TEN_PER_INPUT``'s backward holds its gradient.
_THREE_PER_ELEMENT = "addcdiv addcdiv_ _weight_norm_interface renorm renorm_"
# Normalisation and softmax cost per element of their input (argument 0), not of their weights.
_FIVE_PER_INPUT = """
batch_norm native_batch_norm _batch_norm_impl_index cudnn_batch_norm miopen_batch_norm
_native_batch_norm_legit _native_batch_norm_legit_no_training _native_batch_norm_legit_functional
_batch_norm_with_update _batch_norm_with_update_functional _batch_norm_no_update
layer_norm native_layer_norm group_norm native_group_norm instance_norm rms_norm _fused_rms_norm
softmax _softmax log_softmax _log_softmax _safe_softmax _masked_softmax
"""
# weight_norm's backward (grad_w, v, g, norms): g's gradient (a product and a sum per element),
# v's (a product, a scale and a subtraction per element).
_FIVE_PER_INPUT_GRADIENT = "_weight_norm_interface_backward"
_TEN_PER_INPUT = """
native_batch_norm_backward cudnn_batch_norm_backward miopen_batch_norm_backward batch_norm_backward
native_layer_norm_backward native_group_norm_backward _fused_rms_norm_backward
_softmax_backward_data _log_softmax_backward_data _masked_softmax_backward
"""
_FOREACH = {
    1: """add add_ sub sub_ mul mul_ div div_ neg neg_ abs abs_ reciprocal reciprocal_ sign sign_
          maximum maximum_ minimum minimum_ clamp_min clamp_min_ clamp_max clamp_max_ exp exp_ log log_
          sqrt sqrt_ rsqrt rsqrt_ pow pow_ sigmoid sigmoid_ tanh tanh_ expm1 expm1_ log1p log1p_
          sin sin_ cos cos_ floor floor_ ceil ceil_ round round_ trunc trunc_ frac frac_ erf erf_""",
    2: "addcmul addcmul_ lerp lerp_ norm",
    3: "addcdiv addcdiv_",
}

for _cost, _names, _which in ((1, _ONE_PER_ELEMENT, None), (1, _ONE_PER_OUTPUT_GRADIENT, 0), (1, _ONE_PER_INPUT_GRADIENT, 1),
                              (2, _TWO_PER_ELEMENT, None), (3, _THREE_PER_ELEMENT, None),
                              (5, _FIVE_PER_INPUT, 0), (5, _FIVE_PER_INPUT_GRADIENT, 0), (10, _TEN_PER_INPUT, 0)):  # fmt: skip
    for _name in _names.split():
        FORMULAS.setdefault("aten::" + _name, _per_element(_cost, _which))
for _name, _which in _PER_TARGET.items():
    FORMULAS["aten::" + _name] = _per_element(1, _which)
#: Losses counted per target (one class score read per target), not per score.
PER_TARGET = frozenset("aten::" + _name for _name in _PER_TARGET)
for _cost, _names in _FOREACH.items():
    for _name in _names.split():
        FORMULAS["aten::_foreach_" + _name] = _per_list_element(_cost)
for _name in ("_fused_adam_", "_fused_adam", "_fused_adamw_", "_fused_adamw"):
    FORMULAS["aten::" + _name] = _fused_adam
FORMULAS["aten::_fused_sgd_"] = FORMULAS["aten::_fused_sgd"] = _fused_sgd


def _grouped_mm(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    """``_grouped_mm(a, b, offs, bias, out_dtype)``: one matmul per group (a mixture of experts'
    experts), the groups of a 2D operand cut along one dimension by ``offs``. Every row of that
    dimension belongs to a group (as transformers' experts lay tokens out), so the sum over the
    groups is the product of the sizes: [M, K] @ [G, K, N] -> M*K*N; [G, M, K] @ [K, N] ->
    M*K*N; [M, K] @ [K, N] cut along K (a weight gradient) -> M*K*N; [G, M, K] @ [G, K, N] as bmm."""
    a, b = _shape(shapes, 0), _shape(shapes, 1)
    if len(a) == 2 and len(b) == 3:
        macs = a[0] * a[1] * b[2]
    elif len(a) == 3 and len(b) == 2:
        macs = a[1] * a[2] * b[1]
    elif len(a) == 2 and len(b) == 2:
        macs = a[0] * a[1] * b[1]
    elif len(a) == 3 and len(b) == 3:
        macs = a[0] * a[1] * a[2] * b[2]
    else:
        return 0, 0
    return macs, 2 * macs


# EmbeddingBag's modes: 0 sum, 1 mean, 2 max.
_BAG_MEAN, _BAG_MAX = 1, 2


def _embedding_bag(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    """``_embedding_bag(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
    per_sample_weights, include_last_offset, padding_idx)``: every index reads a row of D and adds
    it into its bag (1 FLOP per element; a multiply-add with per-sample weights, which only the
    sum mode takes); mean divides each bag's D sums by its size; max compares instead of adding."""
    weight, indices = _shape(shapes, 0), _shape(shapes, 1)
    if len(weight) != 2 or not indices:
        return 0, 0
    looked_up = prod(indices) * weight[1]
    if _shape(shapes, 6):  # per-sample weights
        return looked_up, 2 * looked_up
    flops = looked_up
    if _arg(concrete, 4, 0) == _BAG_MEAN:
        offsets = _shape(shapes, 2)
        bags = (offsets[0] - int(bool(_arg(concrete, 7, False)))) if len(offsets) == 1 else indices[0]
        flops += max(bags, 0) * weight[1]
    return 0, flops


def _embedding_bag_backward(grad: int, indices: int, mode_at: int, weights: int) -> Formula:
    """The weight gradient of an EmbeddingBag: each index adds its bag's gradient row (D) into
    the weight's (times its per-sample weight, a multiply-add; divided by the bag's size in mean
    mode, one more); in max mode only each bag's maximum gets it. Arguments at ``grad`` [B, D],
    ``indices``, ``mode_at`` and ``weights`` (per-sample)."""

    def formula(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
        g, idx = _shape(shapes, grad), _shape(shapes, indices)
        if len(g) != 2 or not idx:
            return 0, 0
        mode = _arg(concrete, mode_at, 0)
        if mode == _BAG_MAX:
            return 0, g[0] * g[1]
        looked_up = prod(idx) * g[1]
        if _shape(shapes, weights):
            return looked_up, 2 * looked_up
        return 0, looked_up * (2 if mode == _BAG_MEAN else 1)

    return formula


def _embedding_bag_weights_backward(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    """``_embedding_bag_per_sample_weights_backward(grad, weight, indices, ...)``: each
    per-sample weight's gradient is the dot product of its bag's gradient row with its row."""
    g, idx = _shape(shapes, 0), _shape(shapes, 2)
    if len(g) != 2 or not idx:
        return 0, 0
    macs = prod(idx) * g[1]
    return macs, 2 * macs


def _dropout(train: int) -> Formula:
    """Dropout in training scales what it keeps: 1 FLOP per element, whichever kernel applies the
    mask (CPU's composite, the fused one); drawing the mask is not arithmetic. Out of training,
    or with p = 0, it is the identity: 0."""

    def formula(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
        if _arg(concrete, train, True) is False or _arg(concrete, 1, None) == 0:
            return 0, 0
        return 0, _numel(shapes[0]) if shapes else 0

    return formula


def _where(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    """``where(condition, x, y)`` picks one element per position: 1 FLOP each, as every
    elementwise op; ``where(condition)`` alone is ``nonzero`` (indices): 0."""
    if len(shapes) < 3:
        return 0, 0
    return 0, _broadcast_numel(shapes)


FORMULAS["aten::where"] = _where


def _index_put(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    """``index_put(self, indices, values, accumulate)``: with ``accumulate`` (indexing's
    gradient) each value is added in, 1 FLOP per element, as every gather's gradient; without,
    values are only written: 0."""
    return (0, _numel(shapes[2])) if len(shapes) > 2 and _arg(concrete, 3, False) is True else (0, 0)


for _name in ("index_put", "index_put_", "_index_put_impl_", "_unsafe_index_put"):
    FORMULAS["aten::" + _name] = _index_put
# (self, mask, indices, values): a masked index's gradient, always accumulating
FORMULAS["aten::_unsafe_masked_index_put_accumulate"] = _per_element(1, 3)
FORMULAS["aten::_grouped_mm"] = FORMULAS["aten::grouped_mm"] = _grouped_mm
for _name in ("_embedding_bag", "_embedding_bag_forward_only", "embedding_bag"):
    FORMULAS["aten::" + _name] = _embedding_bag
# _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, maximum_indices,
# num_weights, scale_grad_by_freq, mode, sparse, per_sample_weights, padding_idx); the dense one
# has no offsets nor sparse, the sparse one no maximum_indices nor sparse (mode 7, weights 8).
FORMULAS["aten::_embedding_bag_backward"] = _embedding_bag_backward(0, 1, 8, 10)
FORMULAS["aten::_embedding_bag_dense_backward"] = _embedding_bag_backward(0, 1, 7, 8)
FORMULAS["aten::_embedding_bag_sparse_backward"] = _embedding_bag_backward(0, 1, 7, 8)
FORMULAS["aten::_embedding_bag_per_sample_weights_backward"] = _embedding_bag_weights_backward
for _name in ("dropout", "dropout_", "feature_dropout", "feature_dropout_", "native_dropout", "_fused_dropout"):
    FORMULAS["aten::" + _name] = _dropout(2)


def _no_arithmetic(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    return 0, 0


# (setdefault: an op that moves data but computes when asked to - ``repeat`` is both free and
# bookkeeping - keeps a formula of its own if it has one.)
for _name in NO_ARITHMETIC | SELECTION | FREE:
    FORMULAS.setdefault(_name, _no_arithmetic)
#: Ops counted as zero, with whatever they call: no work of theirs makes an op above them counted.
ZERO_COST = frozenset(name for name, formula in FORMULAS.items() if formula is _no_arithmetic)

#: Ops whose formulas count MACs (matmuls, convolutions, attention, RNNs): an op of unknown
#: cost makes a row's MACs unknown only if it is one of these (its other FLOPs have no MACs).
WITH_MACS = frozenset(name for name in FORMULAS if re.search(r"mm|mv|dot|convolution|attention|rnn", name))


#: Positions of the int-list arguments (stride, padding, ..., masks) each op's formula reads:
#: the live profiler's event tree does not keep int lists, so these ops' arguments are read from
#: its complete record of them (kineto's event list; a trace file has them inline).
LIST_ARGS: dict[str, tuple[int, ...]] = {
    "aten::convolution": (3, 4, 5),
    "aten::_convolution": (3, 4, 5),
    "aten::convolution_backward": (4, 5, 6, 10),
    **{f"aten::{kind}_pool{d}d{suffix}": (1, 2, 3) for kind in ("max", "avg") for d in (1, 2, 3)
       for suffix in ("", "_with_indices") if not (kind == "avg" and suffix)},
    **{f"aten::{name}": (1,) for name in INTERPOLATIONS},
}  # fmt: skip


def lacks_list_args(name: str, concrete: Sequence[Any] | None) -> bool:
    """True when an op's formula needs int-list arguments that were not recorded."""
    wanted = LIST_ARGS.get(name)
    if not wanted:
        return False
    if not concrete:
        return True
    return any(j >= len(concrete) or concrete[j] is None for j in wanted)
