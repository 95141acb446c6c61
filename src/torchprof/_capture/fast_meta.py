"""Kernels that stand in for torch's own on the meta device while a replay runs: shape-only
ones for speed, and ones that run what the real device runs where the meta device runs other ops.

Speed (:func:`fast_meta_kernels`):

torch registers Python meta kernels (its ``_refs`` decompositions, run through ``prims``) for
elementwise ops over its C++ ones: about 150 µs an op, which made most of a replay's time (a
single-tensor AdamW step over 200 parameters alone runs 2,500 of them). While a replay runs,
these ops get a kernel that makes the output directly in the simple case (floating tensors of
one size and layout, dense, and plain numbers), and hands anything else to torch's own kernel;
batch norm's forward and backward get outputs of the right sizes.
The profiler records each op before dispatch reaches a kernel, so the FLOPs (counted from the
recorded inputs) do not change; the kernels are put back when the replay ends. What a stand-in
runs to make its outputs (``aten::empty`` and the like) is not recorded: the op's event is the
op, as on the real device, where no such event is inside it (a third of a replay's events were
these, each formatted and read when the replay's profile stops).

The real device's ops (the tree keeps a replay's FLOPs only where its ops are the run's):
attention takes the CPU's own choice of kernel (:func:`attention_as_on_cpu`); ``x[mask] = v``
and ``masked_scatter``'s backward run what the CPU runs (:func:`index_put_as_on_cpu`); a
reshape that the CPU and CUDA make an alias is one (:func:`reshape_as_on_device`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

#: Elementwise ops whose output has the input's sizes, strides and dtype (floating inputs).
_SAME = """
add.Tensor add.Scalar sub.Tensor sub.Scalar mul.Tensor mul.Scalar div.Tensor div.Scalar div.Tensor_mode rsub.Scalar
maximum minimum pow.Tensor_Scalar pow.Tensor_Tensor neg exp exp2 log log2 log1p expm1 sqrt rsqrt reciprocal abs sign
sigmoid tanh sin cos erf relu gelu silu mish hardswish hardsigmoid elu leaky_relu softplus clamp clamp_min clamp_max
sigmoid_backward tanh_backward threshold_backward gelu_backward silu_backward mish_backward hardswish_backward
hardsigmoid_backward elu_backward leaky_relu_backward softplus_backward lerp.Scalar lerp.Tensor addcmul addcdiv
"""
#: ... and comparisons, whose output is boolean.
_BOOL = "eq.Tensor eq.Scalar ne.Tensor ne.Scalar lt.Tensor lt.Scalar le.Tensor le.Scalar gt.Tensor gt.Scalar ge.Tensor ge.Scalar"

_lock = threading.Lock()
_ops: list[tuple[str, Any, str]] | None = None  # (name, torch's meta kernel, kind of stand-in)


#: Batch norm's meta kernels are Python decompositions too (half a DenseNet's replay).
_BATCH_NORM = "native_batch_norm native_batch_norm_backward"
#: Reductions over dimensions (a gradient summed back to a broadcast parameter's sizes: one per
#: such parameter in every backward).
_REDUCE = "sum.dim_IntList mean.dim"


def _python_meta_ops() -> list[tuple[str, Any, str]]:
    """The ops above whose meta kernel is torch's Python one, with that kernel (the fallback)
    and the kind of stand-in: ``same`` (the input's sizes and dtype), ``bool``, or batch norm's."""
    import torch
    from torch._decomp import global_decomposition_table

    found = []
    for names, kind in ((_SAME, "same"), (_BOOL, "bool"), (_BATCH_NORM, ""), (_REDUCE, "reduce")):
        for name in names.split():
            base, _, overload = name.partition(".")
            packet = getattr(torch.ops.aten, base, None)
            op = getattr(packet, overload or "default", None) if packet is not None else None
            if op is None:
                continue
            kernel = next((global_decomposition_table[table][op] for table in ("meta", "post_autograd", "pre_autograd")
                           if op in global_decomposition_table[table]), None)  # fmt: skip
            if kernel is not None and "_meta_registrations" in torch._C._dispatch_dump(op.name()).split("Meta: ", 1)[-1].split("\n", 1)[0]:
                found.append((op.name().split("::", 1)[1], kernel, kind or base))
    return found


def _unrecorded(make: Callable[..., Any]) -> Callable[..., Any]:
    """``make`` run with torch's RecordFunction off on this thread: the ops it dispatches to
    make the stand-in's outputs are no events (the op being dispatched, already entered, is)."""
    import torch

    enable = getattr(torch._C._autograd, "_enable_record_function", None)
    if enable is None:  # a torch without the switch: the outputs' ops are recorded, as before
        return make

    def unrecorded(*args: Any, **kwargs: Any) -> Any:
        enable(False)
        try:
            return make(*args, **kwargs)
        finally:
            enable(True)  # on during a replay: its profiler records through it

    return unrecorded


def _kernel(fallback: Callable[..., Any], kind: str) -> Callable[..., Any]:
    import torch

    if kind == "native_batch_norm":
        return _meta_only(fallback, _unrecorded(_batch_norm))
    if kind == "native_batch_norm_backward":
        return _meta_only(fallback, _unrecorded(_batch_norm_backward))
    if kind == "reduce":
        return _reduction(fallback)
    floating = frozenset({torch.float32, torch.float64, torch.float16, torch.bfloat16})
    tensor, meta = torch.Tensor, torch.device("meta")
    channels_last = torch.channels_last
    boolean = torch.bool if kind == "bool" else None
    # The sizes each pair of sizes broadcasts to, worked out once per pair (a replay's calls
    # repeat a few pairs thousands of times); the kernel lives as long as one replay.
    broadcasts: dict[tuple[Any, Any], tuple[int, ...] | None] = {}

    def kernel(*args: Any, **kwargs: Any) -> Any:
        first = None
        shape: Any = None  # the broadcast sizes, where the tensors' sizes differ
        for a in (*args, *kwargs.values()) if kwargs else args:
            if isinstance(a, tensor):
                if not a.is_meta or a.dtype not in floating:
                    return fallback(*args, **kwargs)
                if a.dim() == 0:
                    continue  # a number as a tensor: the sized tensor's dtype wins within floating types
                if first is None:
                    first = a
                elif a.dtype != first.dtype:
                    return fallback(*args, **kwargs)
                elif a.shape != first.shape or a.stride() != first.stride():
                    if not (a.is_contiguous() and first.is_contiguous()):
                        return fallback(*args, **kwargs)  # broadcasting keeps a layout only as torch works it out
                    pair = (shape if shape is not None else first.shape, a.shape)
                    shape = broadcasts.get(pair, pair)
                    if shape is pair:
                        shape = broadcasts[pair] = _broadcast(*pair)
                    if shape is None:
                        return fallback(*args, **kwargs)
            elif not isinstance(a, (bool, int, float, str)) and a is not None:
                return fallback(*args, **kwargs)
        if first is None:
            return fallback(*args, **kwargs)
        dtype = boolean if boolean is not None else first.dtype
        if shape is None and not (first.is_contiguous() or first.is_contiguous(memory_format=channels_last)):
            return fallback(*args, **kwargs)  # (both of each differing pair are dense: checked above)
        if switch is not None:
            switch(False)  # the ops that make the output are no events (see _unrecorded)
        try:
            if shape is not None:
                return empty(shape, dtype=dtype, device=meta)
            return empty_strided(first.shape, first.stride(), dtype=dtype, device=meta)
        finally:
            if switch is not None:
                switch(True)

    empty, empty_strided = torch.empty, torch.empty_strided
    switch = getattr(torch._C._autograd, "_enable_record_function", None)
    return kernel


def _reduction(fallback: Callable[..., Any]) -> Callable[..., Any]:
    """``sum``/``mean`` over dimensions of a dense floating tensor, into its own dtype: a dense
    tensor of the reduced sizes (as torch's kernel makes); anything else goes to torch's."""
    import torch

    floating = frozenset({torch.float32, torch.float64, torch.float16, torch.bfloat16})
    tensor, meta = torch.Tensor, torch.device("meta")
    empty = torch.empty
    switch = getattr(torch._C._autograd, "_enable_record_function", None)
    # The reduced sizes per (sizes, dims, keepdim), worked out once each (the kernel lives as
    # long as one replay); None: torch's kernel decides (an error, a dimension twice).
    reduced_sizes: dict[tuple[Any, Any, bool], list[int] | None] = {}

    def kernel(x: Any, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
        if (not isinstance(x, tensor) or not x.is_meta or x.dtype not in floating or dtype not in (None, x.dtype)
                or x.dim() == 0 or not x.is_contiguous() or type(keepdim) is not bool):  # fmt: skip
            return fallback(x, dim, keepdim, dtype=dtype)
        try:
            key = (x.shape, tuple(dim) if isinstance(dim, (list, tuple)) else dim, keepdim)
            shape = reduced_sizes[key]
        except KeyError:
            shape = reduced_sizes[key] = _reduced(x.shape, dim, keepdim)
        except TypeError:  # a dimension that is no plain value
            shape = None
        if shape is None:
            return fallback(x, dim, keepdim, dtype=dtype)
        if switch is not None:
            switch(False)  # making the output is no event (see _unrecorded)
        try:
            return empty(shape, dtype=x.dtype, device=meta)
        finally:
            if switch is not None:
                switch(True)

    return kernel


def _reduced(sizes: Any, dim: Any, keepdim: bool) -> list[int] | None:
    """The sizes of a reduction over ``dim`` (None, ``[]``: every dimension); None where torch's
    own kernel must decide (a dimension out of range or twice, one that is no int)."""
    rank = len(sizes)
    if dim is None or (isinstance(dim, (list, tuple)) and not dim):
        reduced = set(range(rank))
    elif isinstance(dim, (list, tuple)) and all(type(d) is int and -rank <= d < rank for d in dim):
        reduced = {d % rank for d in dim}
        if len(reduced) != len(dim):
            return None  # a dimension twice: torch's error
    else:
        return None
    if keepdim:
        return [1 if i in reduced else n for i, n in enumerate(sizes)]
    return [n for i, n in enumerate(sizes) if i not in reduced]


def _broadcast(a: Any, b: Any) -> tuple[int, ...] | None:
    """The sizes two sizes broadcast to; None where they do not."""
    out = []
    for x, y in zip(reversed((1,) * (len(b) - len(a)) + tuple(a)), reversed((1,) * (len(a) - len(b)) + tuple(b))):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(reversed(out))


def _meta_only(fallback: Callable[..., Any], stand_in: Callable[..., Any]) -> Callable[..., Any]:
    import torch

    def kernel(*args: Any, **kwargs: Any) -> Any:
        if kwargs or not all(not isinstance(a, torch.Tensor) or a.is_meta for a in args):
            return fallback(*args, **kwargs)
        return stand_in(*args)

    return kernel


def _batch_norm(x: Any, weight: Any, bias: Any, mean: Any, var: Any, training: bool, *_: Any) -> Any:
    """Outputs of the right sizes: FLOPs come from the op's recorded inputs, and nothing reads
    the saved statistics but the backward, whose stand-in makes outputs of the right sizes."""
    channels = x.shape[1] if x.dim() > 1 else 0
    stats = (channels,) if training else (0,)
    return _like(x), x.new_empty(stats), x.new_empty(stats)


def _batch_norm_backward(grad: Any, x: Any, weight: Any, *rest: Any) -> Any:
    import torch

    mask = rest[-1]
    grad_weight = torch.empty(x.shape[1], dtype=x.dtype, device=x.device) if x.dim() > 1 else None
    return (_like(x) if mask[0] else None,
            grad_weight if mask[1] and weight is not None else None,
            grad_weight.clone() if mask[2] and grad_weight is not None else None)  # fmt: skip


def _like(x: Any) -> Any:
    import torch

    return torch.empty_like(x)


def _override(lib: Any, name: str, kernel: Callable[..., Any]) -> None:
    """Put one stand-in in place of torch's Python meta kernel. Some torch releases (2.11) refuse
    to override a Python kernel unless told ``allow_override`` (2.14 allows it by default); one
    still refused keeps torch's own kernel: right, only slower."""
    try:
        lib.impl(name, kernel, allow_override=True)
    except TypeError:  # a torch without the keyword, which overrides freely
        lib.impl(name, kernel)
    except RuntimeError:
        pass


@contextlib.contextmanager
def fast_meta_kernels() -> Iterator[None]:
    """While the block runs (a replay), the shape-only kernels stand in for torch's Python meta
    kernels; torch's are in place again after, whatever happens."""
    global _ops
    import warnings

    import torch

    with _lock:
        if _ops is None:
            try:
                _ops = _python_meta_ops()
            except Exception:  # noqa: BLE001 - a torch laid out otherwise: no stand-ins, just slower
                _ops = []
    lib = None
    try:
        if _ops:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch warns that a kernel is overridden: that is the point
                lib = torch.library.Library("aten", "IMPL", "Meta")
                for name, fallback, kind in _ops:
                    _override(lib, name, _kernel(fallback, kind))
        yield
    finally:
        if lib is not None:
            lib._destroy()


def _cpu_attention() -> Callable[..., Any]:
    """``scaled_dot_product_attention`` on meta tensors as the CPU runs it: the meta device's
    choice of kernel is always the math one (its matmuls, softmax and their backward), where the
    CPU takes its flash kernel whenever the inputs allow, so a replay's ops and autograd nodes
    differed from the run's and every attention layer's FLOPs were unknown. The CPU's own choice
    (made from sizes, strides and dtypes alone) picks the kernel; the flash kernel then runs on
    the meta tensors, its boolean mask converted as torch's CPU path converts it. Anything else
    runs torch's own composite (``decompose``)."""
    import torch

    aten = torch.ops.aten
    composite = aten.scaled_dot_product_attention.default
    choose = aten._fused_sdp_choice.default
    flash = aten._scaled_dot_product_flash_attention_for_cpu.default
    cpu = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
    flash_choice = int(torch.nn.attention.SDPBackend.FLASH_ATTENTION.value)
    tensor = torch.Tensor

    def kernel(query: Any, key: Any, value: Any, attn_mask: Any = None, dropout_p: float = 0.0, is_causal: bool = False,
               *, scale: Any = None, enable_gqa: bool = False) -> Any:  # fmt: skip
        chosen = None
        if all(isinstance(t, tensor) and t.is_meta for t in (query, key, value)):
            try:
                chosen = choose.redispatch(cpu, query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)
            except Exception:  # noqa: BLE001 - torch's composite decides (and raises what the run would have)
                chosen = None
        if chosen != flash_choice:
            return composite.decompose(query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)
        if attn_mask is not None and attn_mask.dtype == torch.bool:
            attn_mask = torch.where(attn_mask, torch.scalar_tensor(0.0, dtype=query.dtype, device=query.device), float("-inf"))
        return flash(query, key, value, dropout_p, is_causal, attn_mask=attn_mask, scale=scale)[0]

    return kernel


def attention_as_on_cpu() -> contextlib.AbstractContextManager[None]:
    """While the block runs (the replay of a model that ran on the CPU), attention on meta
    tensors takes the CPU's kernel (:func:`_cpu_attention`); torch's own is back after, whatever
    happens. A torch laid out otherwise keeps its own (the math kernel: that layer's FLOPs stay
    unknown, as before)."""
    return _kernels_in_place("AutogradMeta", lambda: {"scaled_dot_product_attention": _cpu_attention()})


def _view_strides(sizes: Any, strides: Any, shape: list[int]) -> list[int] | None:
    """The strides a view of ``sizes``/``strides`` as ``shape`` has without a copy; None where it
    needs one. torch's ``computeStride`` (what its reshape asks), step for step."""
    if not sizes:
        return [1] * len(shape)
    numel = 1
    for n in sizes:
        numel *= n
    if numel == 0:
        if list(sizes) == shape:
            return list(strides)
        out = [0] * len(shape)
        for d in range(len(shape) - 1, -1, -1):
            out[d] = 1 if d == len(shape) - 1 else max(shape[d + 1], 1) * out[d + 1]
        return out
    out = [0] * len(shape)
    view_d = len(shape) - 1
    chunk_base_stride = strides[-1]
    tensor_numel = view_numel = 1
    for tensor_d in range(len(sizes) - 1, -1, -1):
        tensor_numel *= sizes[tensor_d]
        if tensor_d == 0 or (sizes[tensor_d - 1] != 1 and strides[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or shape[view_d] == 1):
                out[view_d] = view_numel * chunk_base_stride
                view_numel *= shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = strides[tensor_d - 1]
                tensor_numel = view_numel = 1
    return None if view_d != -1 else out


def _inferred(shape: Any, numel: int) -> list[int] | None:
    """``shape`` with its one ``-1`` worked out; None where torch's own kernel must decide (an error)."""
    if not isinstance(shape, (list, tuple)) or not all(type(n) is int and n >= -1 for n in shape) or list(shape).count(-1) > 1:
        return None
    known = 1
    for n in shape:
        if n != -1:
            known *= n
    if -1 not in shape:
        return list(shape) if known == numel else None
    if known == 0 or numel % known:
        return None
    return [numel // known if n == -1 else n for n in shape]


def _device_reshapes() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """``reshape`` and ``flatten`` on meta tensors as a device's tensor runs them: a tensor that
    is not contiguous but can be viewed in the new sizes becomes a ``_reshape_alias`` (its backward
    a ``ReshapeAliasBackward0``) on the CPU and CUDA, where torch's composite makes a ``view`` for
    a meta tensor (one it treats as a tensor subclass). The gradient sums autograd does in those
    backward nodes were then found under other nodes than in the run, and left unknown (Longformer,
    LED, any einsum over a transposed operand). Everything else runs torch's own composite."""
    import torch

    aten = torch.ops.aten
    reshape, flatten, alias = aten.reshape.default, aten.flatten.using_ints, aten._reshape_alias.default
    tensor = torch.Tensor

    def as_alias(x: Any, shape: list[int] | None) -> Any:
        if shape is None:
            return None
        strides = _view_strides(tuple(x.shape), x.stride(), shape)
        return None if strides is None else alias(x, shape, strides)

    def reshape_kernel(x: Any, shape: Any) -> Any:
        if isinstance(x, tensor) and x.is_meta and x.layout == torch.strided and not x.is_contiguous():
            made = as_alias(x, _inferred(shape, x.numel()))
            if made is not None:
                return made
        return reshape.decompose(x, shape)

    def flatten_kernel(x: Any, start_dim: int = 0, end_dim: int = -1) -> Any:
        if (isinstance(x, tensor) and x.is_meta and x.layout == torch.strided and x.dim() > 0 and not x.is_contiguous()
                and type(start_dim) is int and type(end_dim) is int and -x.dim() <= start_dim < x.dim()
                and -x.dim() <= end_dim < x.dim() and start_dim % x.dim() < end_dim % x.dim()):  # fmt: skip
            start, end = start_dim % x.dim(), end_dim % x.dim()
            merged = 1
            for n in x.shape[start:end + 1]:
                merged *= n
            made = as_alias(x, [*x.shape[:start], merged, *x.shape[end + 1:]])
            if made is not None:
                return made
        return flatten.decompose(x, start_dim, end_dim)

    return reshape_kernel, flatten_kernel


def _cpu_index_puts() -> dict[str, Callable[..., Any]]:
    """``index_put_``, its ``_index_put_impl_`` and ``index_put`` on meta tensors as the CPU runs
    them: ``x[mask] = value`` with one boolean mask and a one-element value is a ``masked_fill_``
    inside ``_index_put_impl_`` on the CPU (its ``canDispatchToMaskedFill``), out of place a
    ``clone`` and that; a meta tensor's runs nothing inside, so the fill (Longformer's attention
    mask, and the same op again in its backward) was listed as unknown. And
    ``masked_scatter_backward``, which on the CPU counts its mask (a ``sum`` inside
    ``masked_select``) where the meta kernel makes its output alone (LLaVA's image features
    merged into the text's). Anything else runs torch's own meta kernels (their Python ones,
    which check nothing the run did not)."""
    import torch
    from torch._decomp import global_decomposition_table

    aten = torch.ops.aten
    put_, put, impl = aten.index_put_.default, aten.index_put.default, aten._index_put_impl_.default
    own_put_, own_put = global_decomposition_table["meta"][put_], global_decomposition_table["meta"][put]
    tensor = torch.Tensor

    def mask_of(x: Any, indices: Any, values: Any, accumulate: Any) -> Any:
        """The mask the CPU fills through (its ``canDispatchToMaskedFill``), or None."""
        if (accumulate or not isinstance(x, tensor) or not x.is_meta or not isinstance(values, tensor) or values.numel() != 1
                or not (values.is_meta or values.device.type == "cpu")):  # fmt: skip
            return None
        mask, before = None, 0
        for index in indices:
            if index is None:
                before += 1
                continue
            if mask is not None or not isinstance(index, tensor) or index.dtype != torch.bool or not index.is_meta:
                return None  # (a byte mask: torch's own way, unknown as before)
            if before + index.dim() > x.dim() or any(index.shape[j] != x.shape[before + j] for j in range(index.dim())):
                return None  # torch's own error
            mask = index
            before += index.dim()
        if mask is None:
            return None
        for _ in range(before, x.dim()):
            mask = mask.unsqueeze(-1)
        return mask

    def index_put_kernel(x: Any, indices: Any, values: Any, accumulate: bool = False) -> Any:
        if mask_of(x, indices, values, accumulate) is None:
            return own_put_(x, indices, values, accumulate)
        return impl(x, indices, values, accumulate, False)

    def impl_kernel(x: Any, indices: Any, values: Any, accumulate: bool = False, unsafe: bool = False) -> Any:
        mask = mask_of(x, indices, values, accumulate)
        if mask is not None:
            # The value read (``item``) is no work; a meta tensor has none: any of its dtype's kind.
            x.masked_fill_(mask, False if x.dtype == torch.bool else 0.0 if x.is_floating_point() or x.is_complex() else 0)
        return x  # (what torch's meta kernel returns)

    def index_put_out_of_place(x: Any, indices: Any, values: Any, accumulate: bool = False) -> Any:
        if mask_of(x, indices, values, accumulate) is None:
            return own_put(x, indices, values, accumulate)
        return put_(x.clone(memory_format=torch.preserve_format), indices, values, accumulate)

    def select_counting(x: Any, mask: Any) -> Any:
        # Only inside masked_scatter_backward below, whose output's sizes are known: what the
        # CPU's masked_select runs before it reads its count (the mask counted, a sum); what it
        # returns is never read. Anywhere else its output's size is the data's: torch's error.
        if not getattr(_counting, "on", False):
            raise NotImplementedError("aten::masked_select: attempted to run this operator with Meta tensors, "
                                      "its output's size is its mask's count")  # fmt: skip
        if tuple(mask.shape) != tuple(x.shape):  # (expand_outplace: both, where the sizes differ)
            shape = torch.broadcast_shapes(mask.shape, x.shape)
            mask, x = mask.expand(shape), x.expand(shape)
        mask.sum()
        return x.new_empty((0,))

    def masked_scatter_backward(grad: Any, mask: Any, sizes: Any) -> Any:
        if not (isinstance(grad, tensor) and grad.is_meta and isinstance(mask, tensor) and mask.is_meta):
            return own_scatter_backward(grad, mask, sizes)
        _counting.on = True
        try:
            aten.masked_select.default(grad, mask)
        finally:
            _counting.on = False
        return grad.new_empty(sizes)  # (the CPU's: the selected values, padded, viewed in ``sizes``)

    own_scatter_backward = global_decomposition_table["meta"][aten.masked_scatter_backward.default]
    return {"index_put_": index_put_kernel, "_index_put_impl_": impl_kernel, "index_put": index_put_out_of_place,
            "masked_select": select_counting, "masked_scatter_backward": masked_scatter_backward}  # fmt: skip


#: Set while a replay's ``masked_scatter_backward`` runs its ``masked_select`` (one thread's).
_counting = threading.local()


@contextlib.contextmanager
def _kernels_in_place(key: str, make: Callable[[], dict[str, Callable[..., Any]]]) -> Iterator[None]:
    """While the block runs, the kernels ``make`` returns (op name -> kernel) stand in for
    torch's own at dispatch key ``key``; torch's own are back after, whatever happens. A torch
    laid out otherwise keeps its own (FLOPs those ops change stay unknown, as before)."""
    import warnings

    import torch

    lib = None
    try:
        try:
            kernels = make()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch warns that a kernel is overridden: that is the point
                lib = torch.library.Library("aten", "IMPL", key)
                for name, kernel in kernels.items():
                    _override(lib, name, kernel)  # (one a torch refuses keeps torch's own: unknown, as before)
        except Exception:  # noqa: BLE001 - see the docstring
            if lib is not None:
                lib._destroy()
                lib = None
        yield
    finally:
        if lib is not None:
            lib._destroy()


def reshape_as_on_device() -> contextlib.AbstractContextManager[None]:
    """While the block runs (the meta replay of a model that ran on the CPU or CUDA), ``reshape``
    and ``flatten`` of meta tensors make what the device makes (:func:`_device_reshapes`)."""

    def make() -> dict[str, Callable[..., Any]]:
        reshape_kernel, flatten_kernel = _device_reshapes()
        return {"reshape": reshape_kernel, "flatten.using_ints": flatten_kernel}

    return _kernels_in_place("AutogradMeta", make)


def index_put_as_on_cpu() -> contextlib.AbstractContextManager[None]:
    """While the block runs (the meta replay of a model that ran on the CPU), ``x[mask] = value``
    on meta tensors runs what the CPU runs (:func:`_cpu_index_puts`)."""
    return _kernels_in_place("Meta", _cpu_index_puts)
