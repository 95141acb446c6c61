"""Which ops cost no FLOPs, and which no formula can count: the conventions beside the formulas.

An op is one of:

- counted: it has a formula (:data:`~torchprof._tree.flops.formulas.FORMULAS`); the ops it calls
  are part of it and not counted again;
- free (:data:`FREE`): it moves, views, allocates, fills or indexes memory, so 0 is the truth,
  and so is what it calls to do it (``masked_select`` counts its mask with a ``sum``,
  ``repeat_interleave`` its offsets with a ``cumsum``: index arithmetic, not the model's);
- zero by convention, covering what it calls: it orders or selects data by comparing it
  (:data:`SELECTION`: ``sort``, ``topk``, ``unique``, ``histc``...), whose comparisons depend
  on its algorithm and on the data, not on the shapes; or its insides are bookkeeping, not the
  model's arithmetic (:data:`NO_ARITHMETIC`: ``repeat``'s index adds, DDP's bucket averaging);
- unknown: anything else with no op of a formula below it, and the ops of :data:`DATA_DEPENDENT`
  whatever they call. Its rows read NaN and it is listed (``prof.unsupported_ops``).

Elementwise comparisons and selections (``eq``, ``where``, ``relu``, ``clamp``, ``max``) are not
here: each is one operation per element, counted 1 FLOP per element by the formulas.
"""

from __future__ import annotations

import re

from ..._vocab import COMPILED_BOOKKEEPING, COMPILED_REGION_PREFIX, DISPATCH_RANGES

#: Ops that order or select data by comparing it: 0 FLOPs by convention (the comparisons an
#: ordering makes depend on its algorithm and the data; a selection moves what it selects), and
#: what they call is part of them. Routing in a mixture of experts is made of these.
SELECTION = frozenset(
    "aten::" + name
    for name in """
sort argsort msort topk kthvalue median nanmedian mode unique _unique _unique2 unique_consecutive
unique_dim unique_dim_consecutive searchsorted bucketize histc histogram bincount equal
value_selecting_reduction_backward
""".split()
)

#: Data movement whose CPU kernel computes on small index tensors with aten ops of its own
#: (``repeat`` adds offsets): counted as zero, and what runs inside is not the model's
#: arithmetic. DDP's reducer averages each gradient bucket over the ranks (``mul_out``, a mul
#: inside) and copies it back: part of the all-reduce, whose sums are not the model's FLOPs (as
#: collectives).
#: FSDP2 packs each group's shards into one buffer before an all-gather and unpacks them after
#: (its ``fsdp::`` ops): copies.
NO_ARITHMETIC = frozenset({"aten::repeat", "torch::distributed::reducer::mul_out", "torch.distributed.ddp.reducer::copy_bucket_to_grad",
                           "fsdp::all_gather_copy_in", "fsdp::split_with_sizes_copy", "fsdp::chunk_cat"})  # fmt: skip

#: Ops that move, view, allocate, fill or index memory: no arithmetic, so zero FLOPs is the truth
#: (for what they call too: counted as zero, covering it).
FREE = frozenset(
    "aten::" + name
    for name in """
empty empty_like empty_strided empty_permuted new_empty new_empty_strided zeros zeros_like ones ones_like
full full_like new_zeros new_ones new_full scalar_tensor fill_ fill zero_ zero copy_ copy _copy_from
_copy_from_and_resize clone contiguous to _to_copy type_as detach detach_ view view_as reshape
_reshape_alias _unsafe_view flatten unflatten squeeze squeeze_ unsqueeze unsqueeze_ t t_ transpose
transpose_ permute movedim moveaxis swapaxes swapdims mT mH adjoint expand expand_as broadcast_to
broadcast_tensors as_strided as_strided_ slice select narrow split split_with_sizes unsafe_split
unsafe_split_with_sizes tensor_split chunk unbind cat concat concatenate _cat stack hstack vstack dstack
index index_select gather scatter scatter_ index_fill index_fill_
index_copy index_copy_ masked_select masked_scatter masked_scatter_ take put_ nonzero
embedding item _local_scalar_dense resolve_conj resolve_neg conj _conj _neg_view lift_fresh lift
lift_fresh_copy alias set_ resize_ resize_as_ _resize_output_ _has_compatible_shallow_copy_type
result_type is_nonzero is_same_size size stride numel dim is_pinned _assert_async
_assert_tensor_metadata arange linspace logspace randn rand randint randperm normal normal_ uniform_
bernoulli_ bernoulli random_ exponential_ cauchy_ geometric_ log_normal_ multinomial one_hot
repeat repeat_interleave tile roll flip fliplr flipud rot90 pad constant_pad_nd reflection_pad1d
reflection_pad2d reflection_pad3d replication_pad1d replication_pad2d replication_pad3d
pixel_shuffle pixel_unshuffle channel_shuffle native_channel_shuffle _pad_circular _pad_enum
_nested_tensor_from_mask to_padded_tensor unfold im2col diagonal triu triu_ tril tril_ _pin_memory pin_memory
_foreach_zero_ _foreach_copy_ record_stream _reshape_copy _unsafe_index isin
upsample_nearest1d upsample_nearest2d upsample_nearest3d _upsample_nearest_exact1d
_upsample_nearest_exact2d _upsample_nearest_exact3d
select_backward slice_backward index_select_backward as_strided_scatter slice_scatter select_scatter
diagonal_scatter view_as_real view_as_complex _to_dense to_dense
meshgrid atleast_1d atleast_2d atleast_3d cartesian_prod diag diag_embed block_diag fill_diagonal_
_shape_as_tensor numpy_T matrix_H align_to rename refine_names _unsafe_split_with_sizes unsafe_chunk
cudnn_is_acceptable _use_cudnn_rnn_flatten_weight _cudnn_rnn_flatten_weight is_contiguous
_values _indices values indices _nnz is_coalesced _coalesced_ dense_dim sparse_dim crow_indices col_indices
ccol_indices row_indices _sparse_coo_tensor_with_dims_and_tensors _sparse_coo_tensor_unsafe sparse_coo_tensor
_pack_padded_sequence _pad_packed_sequence _pack_padded_sequence_backward
reshape_as view_as_copy expand_copy permute_copy transpose_copy t_copy unsqueeze_copy squeeze_copy slice_copy
select_copy split_copy split_with_sizes_copy unbind_copy alias_copy as_strided_copy diagonal_copy
unfold_copy _unsafe_view_copy column_stack row_stack take_along_dim narrow_copy _reshape_from_tensor
new_tensor tensor _empty_affine_quantized empty_quantized _efficientzerotensor _make_dep_token
index_fill_ max_unpool2d max_unpool3d
_unsafe_masked_index nonzero_static argwhere nonzero_numpy
_cast_Float _cast_Half _cast_Long _cast_Int _cast_Byte _cast_Char _cast_Short _cast_Double
_autocast_to_reduced_precision _autocast_to_full_precision _debug_has_internal_overlap
lift_fresh_copy _lazy_clone _propagate_xla_data _nested_tensor_size _nested_tensor_strides
_nested_view_from_buffer _nested_get_values _nested_get_offsets _nested_get_lengths
real imag positive masked_scatter_backward masked_select_backward diagonal_backward tril_indices triu_indices eye
rand_like randint_like randn_like uniform normal_functional exponential geometric log_normal cauchy poisson
_standard_gamma _philox_key_fold_in _philox_key_split _philox_normal_ _philox_uniform_
storage_offset sym_size sym_stride sym_numel sym_storage_offset is_complex is_non_overlapping_and_dense
is_strides_like_format _assert_scalar _functional_assert_async _functional_sym_constrain_range
_functional_sym_constrain_range_for_size sym_constrain_range sym_constrain_range_for_size _print shallow_copy_data_
resize resize_as view_copy _list_to_tensor pad_sequence _chunk_cat complex _nested_tensor_from_tensor_list
_nested_view_from_buffer_copy _jagged_to_padded_dense_forward _padded_dense_to_jagged_forward
_fw_primal _make_dual _nested_view_from_jagged _sparse_broadcast_to _test_autograd_multiple_dispatch_view
dsplit hsplit vsplit linalg_diagonal ravel slice_inverse
""".split()
) | frozenset({"detach", "detach_"})

#: Ops whose arithmetic depends on the data, not on the shapes, so no formula can count it:
#: listed as unknown whatever ops they call (non-maximum suppression computes an IoU for each
#: kept box against the boxes left: from n - 1 to n(n - 1)/2 of them, as the boxes overlap).
#: Coalescing a sparse tensor sums its duplicate entries: as many additions as it has duplicates.
DATA_DEPENDENT = frozenset({"torchvision::nms", "aten::coalesce", "aten::_coalesce"})

#: The autograd Functions FSDP2 wraps a module's outputs in, to run its hooks in backward (their
#: forward passes tensors on as they are).
_FSDP_FUNCTIONS = frozenset({"RegisterPostBackwardFunction"})

#: Queries libraries run when they are imported (torchvision asks its kernels' CUDA version): no
#: tensor in, no arithmetic, and not the user's work.
_LIBRARY_QUERIES = frozenset({"torchvision::_cuda_version", "torchaudio::cuda_version", "torchvision::_is_tracing"})

#: Ranges that are not arithmetic: graph-capture bookkeeping, and collectives, which move data
#: between processes (the sums an all-reduce does are not the model's FLOPs).
_FREE_NAMES = frozenset({"record_param_comms"}) | COMPILED_BOOKKEEPING | DISPATCH_RANGES | _FSDP_FUNCTIONS | _LIBRARY_QUERIES
_FREE_PREFIXES = ("c10d::", "nccl:", "gloo:", COMPILED_REGION_PREFIX)

#: Autograd graph nodes (``AddBackward0``, ``ExpandBackward0``, a custom Function's
#: ``MyFnBackward``, ``torch::autograd::AccumulateGrad``): their arithmetic runs in the aten ops
#: they call, so one with no op below it only passed gradients on (or reshaped them) - unless it
#: launched GPU kernels itself, which the tree checks (``is_autograd_node``).
_AUTOGRAD_NODE = re.compile(r"^(?:\w+Backward\d*|torch::autograd::\w+)$")


def is_autograd_node(name: str) -> bool:
    return _AUTOGRAD_NODE.match(name) is not None


def is_free(name: str) -> bool:
    """True when an op is known to do no floating-point arithmetic of its own."""
    return name in FREE or name in _FREE_NAMES or name.startswith(_FREE_PREFIXES) or is_autograd_node(name)
