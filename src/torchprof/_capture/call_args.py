"""What a module call's arguments say, read by the hooks at a layer's first call: the arguments
the profiler may record, their shapes, and a convolution's or pooling's int arguments that the
live profiler drops.
"""

from __future__ import annotations

from typing import Any

_SCALARS = (bool, int, float, str, type(None))


def recordable(args: tuple, tensor: type) -> tuple:
    """A module's arguments as the profiler may record them (``shapes=True``): tensors, lists of
    tensors and plain scalars as they are, anything else as None.

    The profiler turns every recorded input into a TorchScript value, and for an object of the
    user's own class (torchvision's ``ImageList``) that means compiling the class with
    TorchScript: 10 ms inside the profile, a stray ``defaults`` op (the function TorchScript runs
    to evaluate default arguments) and the class registered as a script class. Such an object
    has no shape to show anyway. All-tensor arguments, the common case, pass unchanged.
    """
    if all(isinstance(a, tensor) for a in args):
        return args
    return tuple(a if isinstance(a, (tensor, *_SCALARS))
                 or (isinstance(a, (list, tuple)) and all(isinstance(t, tensor) for t in a)) else None
                 for a in args)  # fmt: skip


def input_shapes(args: Any) -> list:
    """Sizes of a call's positional arguments, as the profiler records a range's inputs: a
    tensor's sizes, a list of sizes for a list of tensors, ``[]`` for anything else."""
    import torch

    def dims(value: Any) -> list:
        try:
            return [d if type(d) is int else str(d) for d in value.shape]
        except Exception:  # noqa: BLE001 - a strided nested tensor has no sizes: shown as none
            return []

    def sizes(value: Any) -> list:
        if isinstance(value, torch.Tensor):
            return dims(value)
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
            return [dims(v) for v in value]
        return []

    return [sizes(a) for a in args]


def layer_op_args(module: Any, args: Any) -> dict[str, Any] | None:
    """The arguments a convolution or pooling layer passes to its aten op, in aten's order.

    The live profiler's op records keep tensors and scalars but drop int lists (stride,
    padding), which FLOP counting needs; the module knows them. The padding is the one the aten
    op receives: none when the layer pads the input itself (``padding_mode`` other than zeros),
    and for ``padding="same"`` the left part torch passes on (it pads an odd remainder itself).
    For a convolution also which gradients backward computes (``output_mask``): the input's only
    if it requires grad, which only a call in grad mode can tell (otherwise it is left unknown,
    and taken from the profiler's complete record).
    """
    import torch
    from torch import nn

    if isinstance(module, nn.modules.conv._ConvNd):
        first = args[0] if args else None
        weight, bias = module.weight, module.bias
        spatial = len(module.kernel_size)
        padding: Any = module.padding
        if module.padding_mode != "zeros":
            padding = [0] * spatial
        elif padding == "same":
            padding = [d * (k - 1) // 2 for d, k in zip(module.dilation, module.kernel_size)]
        elif padding == "valid":
            padding = [0] * spatial
        mask = None
        if torch.is_grad_enabled() and isinstance(first, torch.Tensor):
            mask = [first.requires_grad, bool(weight is not None and weight.requires_grad),
                    bool(bias is not None and bias.requires_grad)]  # fmt: skip
        return {
            "convolution": [None, None, None, list(module.stride), list(padding), list(module.dilation),
                            bool(module.transposed), list(module.output_padding), module.groups],
            "output_mask": mask,
        }  # fmt: skip
    if isinstance(module, (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d)):
        stride = module.stride if module.stride is not None else module.kernel_size
        return {"max_pool": [None, module.kernel_size, stride, module.padding, module.dilation, module.ceil_mode]}
    if isinstance(module, (nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d)):
        stride = module.stride if module.stride is not None else module.kernel_size
        return {"avg_pool": [None, module.kernel_size, stride, module.padding, module.ceil_mode, module.count_include_pad]}
    return None
