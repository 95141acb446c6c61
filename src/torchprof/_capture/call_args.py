"""What a module call's arguments say, read by the hooks at a layer's first call (``shapes=True``):
the arguments the profiler may record, and their shapes.
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
