"""FLOP and MAC formulas from recorded operator shapes.

Every formula takes the op's input shapes (one list per argument, ``[]`` for scalars and
non-tensors) and its concrete scalar arguments (strides, groups, flags; ``None`` where unknown),
and returns ``(macs, flops)``.

Conventions:
- A multiply-add is 1 MAC and 2 FLOPs. Only matmul-like work (matmul, convolution, attention)
  has MACs; ``flops = 2 * macs + everything else``. Matmul and convolution counts agree with
  ``torch.utils.flop_counter.FlopCounterMode`` (which counts only those), so ``macs`` equals its
  total divided by two.
- Bias additions are not counted (as FlopCounterMode). Other ops cost a fixed number of FLOPs per
  element, given in the tables below: elementwise math 1, normalisation 5 (mean, variance,
  normalise, scale, shift), softmax 5 (max, subtract, exp, sum, divide).
- The outermost op that has a formula is counted and the ops it calls are not, so a composite op
  (``scaled_dot_product_attention``, ``_native_multi_head_attention``) is counted once whatever
  backend ran it. Ops with no formula are walked into; leaves with no formula that are not known
  to be free are reported as unsupported, never silently counted as zero.
"""

from __future__ import annotations

from math import prod
from typing import Any, Callable, Sequence

Shapes = Sequence[Any]
Formula = Callable[[Shapes, Sequence[Any]], tuple[int, int]]


def _dims(shape: Any) -> list[int]:
    return [int(d) for d in shape] if isinstance(shape, (list, tuple)) else []


def _numel(shape: Any) -> int:
    return prod(_dims(shape))


def _broadcast_numel(shapes: Shapes) -> int:
    """Elements of the result of broadcasting every tensor argument together."""
    out: list[int] = []
    for shape in shapes:
        dims = _dims(shape)
        if len(dims) > len(out):
            out = [1] * (len(dims) - len(out)) + out
        for k in range(1, len(dims) + 1):
            d = dims[-k]
            if out[-k] == 1 or d != 1 and d > out[-k]:
                out[-k] = d
    return prod(out) if out else 1


def _arg(concrete: Sequence[Any] | None, index: int, default: Any = None) -> Any:
    if concrete is None or index >= len(concrete):
        return default
    value = concrete[index]
    return default if value is None else value


def _pair(value: Any, ndim: int, default: int) -> list[int]:
    if value is None or value == []:
        return [default] * ndim
    if isinstance(value, (list, tuple)):
        vals = [int(v) for v in value]
        return vals * ndim if len(vals) == 1 else vals
    return [int(value)] * ndim


# -- matmul family ------------------------------------------------------------------------------
def _mm(shapes: Shapes, concrete: Sequence[Any], a: int = 0) -> tuple[int, int]:
    x, w = _dims(shapes[a]), _dims(shapes[a + 1])
    if len(x) != 2 or len(w) != 2:
        return 0, 0
    macs = x[0] * x[1] * w[1]
    return macs, 2 * macs


def _bmm(shapes: Shapes, concrete: Sequence[Any], a: int = 0) -> tuple[int, int]:
    x, w = _dims(shapes[a]), _dims(shapes[a + 1])
    if len(x) != 3 or len(w) != 3:
        return 0, 0
    macs = x[0] * x[1] * x[2] * w[2]
    return macs, 2 * macs


def _mv(shapes: Shapes, concrete: Sequence[Any], a: int = 0) -> tuple[int, int]:
    m = _dims(shapes[a])
    macs = prod(m) if len(m) == 2 else 0
    return macs, 2 * macs


def _dot(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    macs = _numel(shapes[0])
    return macs, 2 * macs


def _addbmm(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    return _bmm(shapes, concrete, 1)


# -- convolution --------------------------------------------------------------------------------
def _conv_macs(x: list[int], w: list[int], transposed: bool, stride: Any, padding: Any, dilation: Any) -> int:
    """MACs of one convolution: batch * C_out * C_in/groups * kernel * (output positions), where
    a transposed convolution's work is counted per *input* position (as FlopCounterMode)."""
    if len(x) < 3 or len(w) < 3:
        return 0
    spatial = len(x) - 2
    kernel = w[2:]
    if transposed:
        positions = prod(x[2:])
        # weight is [C_in, C_out/groups, k...]: each input element meets C_out/groups * k weights
        return x[0] * w[0] * w[1] * prod(kernel) * positions
    s = _pair(stride, spatial, 1)
    d = _pair(dilation, spatial, 1)
    if padding == "same":  # output keeps the input's size (stride is 1 by definition)
        out = list(x[2:])
    else:
        p = _pair(0 if padding == "valid" else padding, spatial, 0)
        out = [max(0, (x[2 + k] + 2 * p[k] - d[k] * (kernel[k] - 1) - 1) // s[k] + 1) for k in range(spatial)]
    return x[0] * w[0] * w[1] * prod(kernel) * prod(out)


def _convolution(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    # aten::convolution / _convolution(input, weight, bias, stride, padding, dilation, transposed, ...)
    x, w = _dims(shapes[0]), _dims(shapes[1])
    transposed = bool(_arg(concrete, 6, False))
    macs = _conv_macs(x, w, transposed, _arg(concrete, 3), _arg(concrete, 4), _arg(concrete, 5))
    return macs, 2 * macs


def _convolution_backward(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    # (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
    #  output_padding, groups, output_mask): the input and the weight gradient each cost as much
    # as the forward convolution.
    x, w = _dims(shapes[1]), _dims(shapes[2])
    transposed = bool(_arg(concrete, 7, False))
    forward = _conv_macs(x, w, transposed, _arg(concrete, 4), _arg(concrete, 5), _arg(concrete, 6))
    mask = _arg(concrete, 10, [True, True, True])
    macs = forward * (int(bool(mask[0])) + int(bool(mask[1])))
    return macs, 2 * macs


# -- attention ----------------------------------------------------------------------------------
def _attention_dims(q: list[int], k: list[int], v: list[int]) -> tuple[int, int, int, int, int]:
    """(batch*heads, L, S, E_qk, E_v) for q [..., L, E], k [..., S, E], v [..., S, Ev]."""
    return prod(q[:-2]), q[-2], k[-2], q[-1], v[-1]


def _sdpa(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    q, k, v = _dims(shapes[0]), _dims(shapes[1]), _dims(shapes[2])
    if min(len(q), len(k), len(v)) < 2:
        return 0, 0
    bh, L, S, E, Ev = _attention_dims(q, k, v)
    macs = bh * L * S * E + bh * L * S * Ev  # q @ k^T, then probabilities @ v
    return macs, 2 * macs + 5 * bh * L * S  # + softmax over the scores


def _sdpa_backward(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    # (grad_out, q, k, v, ...): recompute scores, then grad_v, grad_p, grad_q, grad_k
    q, k, v = _dims(shapes[1]), _dims(shapes[2]), _dims(shapes[3])
    if min(len(q), len(k), len(v)) < 2:
        return 0, 0
    bh, L, S, E, Ev = _attention_dims(q, k, v)
    macs = bh * L * S * (3 * E + 2 * Ev)
    return macs, 2 * macs + 5 * bh * L * S


def _native_mha(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    # _native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias,
    # proj_weight, proj_bias, ...): the MultiheadAttention inference fast path.
    q, k = _dims(shapes[0]), _dims(shapes[1])
    if len(q) < 2 or len(k) < 2:
        return 0, 0
    E = q[-1]
    batch = prod(q[:-2])
    L, S = q[-2], k[-2]
    projections = batch * (L + 2 * S) * E * E + batch * L * E * E  # q, k, v in; output out
    attention = 2 * batch * L * S * E  # heads split E, so heads * (E / heads) = E
    heads = int(_arg(concrete, 4, 1) or 1)
    macs = projections + attention
    return macs, 2 * macs + 5 * batch * heads * L * S


# -- per-element costs ----------------------------------------------------------------------------
def _per_element(cost: int, which: int | None = None) -> Formula:
    """``cost`` FLOPs per element of the broadcast result (or of argument ``which``)."""

    def formula(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
        if which is not None:
            return 0, cost * _numel(shapes[which]) if which < len(shapes) else 0
        return 0, cost * _broadcast_numel(shapes)

    return formula


def _pool(shapes: Shapes, concrete: Sequence[Any]) -> tuple[int, int]:
    # max/avg_pool(input, kernel_size, stride, padding, dilation?, ceil_mode...): one FLOP per
    # window element per output position.
    x = _dims(shapes[0])
    if len(x) < 3:
        return 0, 0
    kernel = _arg(concrete, 1)
    if kernel is None:
        return 0, _numel(x)
    spatial = len(kernel) if isinstance(kernel, (list, tuple)) and len(kernel) > 1 else min(2, len(x) - 2)
    k = _pair(kernel, spatial, 1)
    s = _pair(_arg(concrete, 2) or k, spatial, 1)
    p = _pair(_arg(concrete, 3), spatial, 0)
    lead, dims = x[: len(x) - spatial], x[len(x) - spatial :]
    out = [max(0, (dims[j] + 2 * p[j] - k[j]) // s[j] + 1) for j in range(spatial)]
    return 0, prod(lead) * prod(out) * prod(k)


FORMULAS: dict[str, Formula] = {
    "aten::mm": _mm,
    "aten::addmm": lambda s, c: _mm(s, c, 1),
    "aten::_addmm_activation": lambda s, c: _mm(s, c, 1),
    "aten::bmm": _bmm,
    "aten::baddbmm": lambda s, c: _bmm(s, c, 1),
    "aten::addbmm": _addbmm,
    "aten::mv": _mv,
    "aten::addmv": lambda s, c: _mv(s, c, 1),
    "aten::dot": _dot,
    "aten::vdot": _dot,
    "aten::convolution": _convolution,
    "aten::_convolution": _convolution,
    "aten::convolution_backward": _convolution_backward,
    "aten::scaled_dot_product_attention": _sdpa,
    "aten::_scaled_dot_product_attention_math": _sdpa,
    "aten::_scaled_dot_product_flash_attention": _sdpa,
    "aten::_scaled_dot_product_flash_attention_for_cpu": _sdpa,
    "aten::_scaled_dot_product_efficient_attention": _sdpa,
    "aten::_scaled_dot_product_cudnn_attention": _sdpa,
    "aten::_scaled_dot_product_flash_attention_backward": _sdpa_backward,
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": _sdpa_backward,
    "aten::_scaled_dot_product_efficient_attention_backward": _sdpa_backward,
    "aten::_scaled_dot_product_cudnn_attention_backward": _sdpa_backward,
    "aten::_native_multi_head_attention": _native_mha,
    "aten::max_pool1d": _pool,
    "aten::max_pool2d": _pool,
    "aten::max_pool3d": _pool,
    "aten::max_pool2d_with_indices": _pool,
    "aten::max_pool3d_with_indices": _pool,
    "aten::avg_pool1d": _pool,
    "aten::avg_pool2d": _pool,
    "aten::avg_pool3d": _pool,
}

_ONE_PER_ELEMENT = """
add add_ sub sub_ rsub mul mul_ div div_ neg neg_ abs abs_ reciprocal reciprocal_ sign
maximum minimum fmax fmin max min clamp clamp_ clamp_min clamp_min_ clamp_max clamp_max_
relu relu_ relu6 threshold threshold_ threshold_backward hardtanh hardtanh_ hardtanh_backward
leaky_relu leaky_relu_ leaky_relu_backward elu elu_ elu_backward selu celu prelu
gelu gelu_ gelu_backward silu silu_ silu_backward mish mish_ mish_backward
sigmoid sigmoid_ sigmoid_backward tanh tanh_ tanh_backward hardsigmoid hardsigmoid_backward
hardswish hardswish_ hardswish_backward softplus softplus_backward glu glu_backward
exp exp_ exp2 expm1 log log_ log2 log10 log1p sqrt sqrt_ rsqrt rsqrt_ pow pow_ square
sin cos tan asin acos atan atan2 sinh cosh erf erfc erfinv floor ceil round trunc frac
eq ne lt le gt ge eq_ ne_ lt_ le_ gt_ ge_ logical_and logical_or logical_not logical_xor
bitwise_and bitwise_or bitwise_xor bitwise_not fmod remainder floor_divide
isnan isinf isfinite nan_to_num where masked_fill masked_fill_ sgn
sum mean amax amin argmax argmin cumsum cumprod prod logsumexp all any nansum
dropout_ native_dropout native_dropout_backward feature_dropout
embedding_dense_backward mse_loss mse_loss_backward l1_loss smooth_l1_loss huber_loss
nll_loss nll_loss_forward nll_loss_backward nll_loss2d_forward nll_loss2d_backward
binary_cross_entropy binary_cross_entropy_with_logits
adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d _adaptive_avg_pool2d
_adaptive_avg_pool2d_backward adaptive_max_pool2d adaptive_max_pool2d_backward
max_pool2d_with_indices_backward max_pool3d_with_indices_backward avg_pool2d_backward
upsample_nearest2d upsample_bilinear2d upsample_nearest2d_backward upsample_bilinear2d_backward
_upsample_bilinear2d_aa grid_sampler_2d
"""
_TWO_PER_ELEMENT = "addcmul addcmul_ lerp lerp_ var std var_mean std_mean norm linalg_vector_norm frobenius_norm"
_THREE_PER_ELEMENT = "addcdiv addcdiv_ _fused_adam _fused_adamw"
_FIVE_PER_ELEMENT = """
batch_norm native_batch_norm _batch_norm_impl_index cudnn_batch_norm miopen_batch_norm
_native_batch_norm_legit _native_batch_norm_legit_no_training _native_batch_norm_legit_functional
layer_norm native_layer_norm group_norm native_group_norm instance_norm rms_norm _fused_rms_norm
softmax _softmax log_softmax _log_softmax _safe_softmax _masked_softmax
"""
_TEN_PER_ELEMENT = """
native_batch_norm_backward cudnn_batch_norm_backward batch_norm_backward native_layer_norm_backward
native_group_norm_backward _fused_rms_norm_backward
_softmax_backward_data _log_softmax_backward_data _masked_softmax_backward
"""

for _cost, _names in ((1, _ONE_PER_ELEMENT), (2, _TWO_PER_ELEMENT), (3, _THREE_PER_ELEMENT), (5, _FIVE_PER_ELEMENT), (10, _TEN_PER_ELEMENT)):
    for _name in _names.split():
        # Normalisation and softmax cost per element of their input, not of their weights.
        which = 0 if _cost >= 5 else None
        FORMULAS.setdefault("aten::" + _name, _per_element(_cost, which))

#: Positions of the int-list arguments (stride, padding, ..., masks) each op's formula reads.
LIST_ARGS: dict[str, tuple[int, ...]] = {
    "aten::convolution": (3, 4, 5),
    "aten::_convolution": (3, 4, 5),
    "aten::convolution_backward": (4, 5, 6, 10),
    **{f"aten::{kind}_pool{d}d{suffix}": (1, 2, 3) for kind in ("max", "avg") for d in (1, 2, 3)
       for suffix in ("", "_with_indices")},
}  # fmt: skip


def lacks_list_args(name: str, concrete: Sequence[Any] | None) -> bool:
    """True when an op's formula needs int-list arguments that were not recorded."""
    wanted = LIST_ARGS.get(name)
    if not wanted:
        return False
    if not concrete:
        return True
    return any(j >= len(concrete) or concrete[j] is None for j in wanted)


def args_from_layer(name: str, concrete: Sequence[Any] | None, op_args: dict[str, Any]) -> list[Any] | None:
    """Fill an op's missing arguments from the hyper-parameters of the layer that ran it."""
    base = list(concrete or [])
    if name in ("aten::convolution", "aten::_convolution") and "convolution" in op_args:
        layout = op_args["convolution"]
        base += [None] * (len(layout) - len(base))
        return [b if b is not None else layout[j] for j, b in enumerate(base)]
    if name == "aten::convolution_backward" and "convolution" in op_args:
        conv = op_args["convolution"]
        layout = [None, None, None, None, *conv[3:9], op_args.get("output_mask")]
        base += [None] * (len(layout) - len(base))
        return [b if b is not None else layout[j] for j, b in enumerate(base)]
    if "pool" in op_args and name in LIST_ARGS and "pool" in name:
        layout = op_args["pool"]
        base += [None] * (len(layout) - len(base))
        return [b if b is not None else layout[j] for j, b in enumerate(base)]
    return None


#: Ops that move, view, allocate or fill memory: no arithmetic, so zero FLOPs is the truth.
FREE = frozenset(
    "aten::" + name
    for name in """
empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like ones ones_like full
full_like new_zeros new_ones new_full fill_ zero_ copy_ _copy_from _copy_from_and_resize clone
contiguous to _to_copy detach detach_ view view_as reshape _reshape_alias _unsafe_view flatten
unflatten squeeze squeeze_ unsqueeze unsqueeze_ t transpose transpose_ permute expand expand_as
as_strided as_strided_ slice select narrow split split_with_sizes chunk unbind cat stack hstack
vstack index index_select gather scatter scatter_ index_put_ _index_put_impl_ masked_select
embedding item _local_scalar_dense resolve_conj resolve_neg lift_fresh alias set_ resize_
_has_compatible_shallow_copy_type result_type is_nonzero is_same_size arange linspace randn rand
randint randperm normal_ uniform_ bernoulli_ bernoulli random_ exponential_ cauchy_ one_hot
repeat repeat_interleave tile roll flip pad constant_pad_nd reflection_pad2d replication_pad2d
_nested_tensor_from_mask unfold im2col col2im diagonal triu tril _pin_memory pin_memory
_foreach_zero_ record_stream _reshape_copy new_empty_strided _unsafe_index lift isin
""".split()
) | frozenset({"detach", "detach_", "aten::dropout", "aten::feature_dropout_"})


def is_free(name: str) -> bool:
    """True when an op is known to do no floating-point arithmetic."""
    return name in FREE
