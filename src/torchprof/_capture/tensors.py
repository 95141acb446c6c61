"""Tensors whose role allocation events cannot tell: parameters, their gradients and optimizer
state, by the address of their storage (what torch's memory events carry), for the breakdown of a
memory peak (:func:`torchprof._tree.memory.breakdown`).

Two cheap looks, only with ``memory=True``: a global optimizer step post-hook (one call per
``optimizer.step()``, reading the ``.grad`` and the state of each parameter it updates, at the
end of its ``Optimizer.step#`` range), and the parameters and gradients of the profiled root
modules when the profiler stops. torch's own memory profiler finds the same roles by walking
the op graph of a profile with stacks, which costs far more.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from .._records import KnownTensor
from .module_graph import named_modules


def _device_key(tensor: Any) -> int:
    device = tensor.device
    return -1 if device.type == "cpu" else (device.index or 0)


def _storage(tensor: Any) -> tuple[int, int, int] | None:
    """``(device key, address, bytes)`` of a tensor's storage; None for tensors without one."""
    try:
        storage = tensor.untyped_storage()
        addr, nbytes = storage.data_ptr(), storage.nbytes()
    except (RuntimeError, NotImplementedError, AttributeError):  # meta, sparse or fake tensors
        return None
    if not addr or not nbytes:
        return None
    return _device_key(tensor), addr, nbytes


class TensorWatch:
    """Collects :class:`~torchprof._records.KnownTensor` records while a session runs."""

    def __init__(self) -> None:
        # (category, device, address, bytes, seen at or None, id of the parameter it belongs to)
        self._seen: list[tuple[str, int, int, int, int | None, int]] = []
        self._param_of: dict[int, str] = {}  # id(parameter) -> path of the module that owns it
        self._handle: Any = None
        self._recording: Any = lambda: False

    def install(self) -> None:
        from torch.autograd import _profiler_enabled  # type: ignore[attr-defined]
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self._recording = _profiler_enabled
        self._handle = register_optimizer_step_post_hook(self._after_step)

    def remove(self) -> None:
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.remove()

    def _after_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        # The hook runs inside torch's "Optimizer.step#..." range, after the update; the time is
        # on the profiler's clock (Unix ns), so each address is matched to the allocation alive
        # at that moment.
        if not self._recording():
            return  # a schedule's wait or warm-up step: nothing of it is recorded
        now = time.time_ns()
        add = self._seen.append
        state = optimizer.state
        for group in optimizer.param_groups:
            for p in group["params"]:
                grad = p.grad
                if grad is not None and (where := _storage(grad)) is not None:
                    add(("gradient", *where, now, id(p)))
                for value in state.get(p, {}).values():
                    if hasattr(value, "untyped_storage") and (where := _storage(value)) is not None:
                        add(("optimizer_state", *where, now, id(p)))

    def at_stop(self, roots: Iterable[tuple[Any, str]]) -> None:
        """The parameters and gradients of the profiled root modules as the profiler stopped,
        and which module owns each parameter (for the breakdown by layer)."""
        add = self._seen.append
        for root, label in roots:
            for name, module in named_modules(root):  # no recursion: chains may be thousands deep
                path = f"{label}.{name}" if name else label
                for p in module._parameters.values():
                    if p is None or id(p) in self._param_of:
                        continue
                    self._param_of[id(p)] = path
                    if (where := _storage(p)) is not None:
                        add(("parameter", *where, None, id(p)))
                    if p.grad is not None and (where := _storage(p.grad)) is not None:
                        add(("gradient", *where, None, id(p)))

    def collect(self) -> list[KnownTensor]:
        """Every tensor seen, with the module of its parameter where known."""
        names = self._param_of
        return [KnownTensor(category, device, addr, nbytes, seen, names.get(param))
                for category, device, addr, nbytes, seen, param in self._seen]  # fmt: skip
