"""Global ``nn.Module`` forward hooks that wrap every module call in a named profiler range.

The range name carries the module's path and class (``nn.Module: ResNet.layer1.0.conv1 [Conv2d]``),
so the trace alone says which layer issued each op, in our tree and in Perfetto alike.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .._records import ModuleInfo, module_range_name

if TYPE_CHECKING:
    import torch


class ModuleTracker:
    """Installs the hooks, names module calls by path, and always takes the hooks away again.

    Paths follow ``named_modules()``: a module is named relative to the innermost module being
    run that contains it (so a module shared by two parents appears under the one that called
    it); a module with no running ancestor is named relative to a known root, and otherwise
    becomes a root itself, labelled by ``labels`` (e.g. its variable name) or its class name.
    """

    def __init__(
        self,
        model: torch.nn.Module | None = None,
        labels: Mapping[Any, str] | Callable[[Any], str | None] | None = None,
        record_inputs: bool = False,
    ) -> None:
        self.model = model
        self.only = {id(m) for m in model.modules()} if model is not None else None
        # A callable is asked when a root is first seen, so modules created inside the profiled
        # block itself (a notebook cell) can still be named after their variable.
        if callable(labels):
            self._label_of: Callable[[Any], str | None] = labels
        else:
            by_id = {id(m): name for m, name in (labels or {}).items()}
            self._label_of = lambda module: by_id.get(id(module))
        self.record_inputs = record_inputs
        self.modules: dict[str, ModuleInfo] = {}
        self._objects: dict[str, Any] = {}  # path -> module, for parameter counts at the end
        self._local = threading.local()
        self._names: dict[tuple[int, int], tuple[str, str]] = {}  # (id(parent), id(module)) -> (path, range name)
        self._relative: dict[int, dict[int, str]] = {}
        self._roots: dict[int, tuple[Any, str]] = {}  # id(root) -> (root, label); holding the root keeps its id unique
        self._handles: list[Any] = []
        self._op_args: dict[str, dict[str, Any] | None] = {}
        if model is not None:
            self._add_root(model)

    # -- install / remove ---------------------------------------------------------------------
    def install(self) -> None:
        from torch._C._profiler import _RecordFunctionFast
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

        self._range = _RecordFunctionFast
        try:
            self._handles.append(register_module_forward_pre_hook(self._enter))
            self._handles.append(register_module_forward_hook(self._exit, always_call=True))
        except BaseException:
            self.remove()
            raise

    def remove(self) -> None:
        """Remove the hooks and close any range left open (a module that raised mid-forward)."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        stack = getattr(self._local, "stack", None)
        while stack:
            _, _, rf = stack.pop()
            rf.__exit__(None, None, None)
        self._collect_infos()

    @property
    def installed(self) -> bool:
        return bool(self._handles)

    # -- the hooks (hot path) -----------------------------------------------------------------
    def _enter(self, module: Any, args: Any) -> None:
        if self.only is not None and id(module) not in self.only:
            return
        try:
            stack = self._local.stack
        except AttributeError:
            stack = self._local.stack = []
        parent = stack[-1][0] if stack else None
        key = (id(parent), id(module))
        named = self._names.get(key)
        if named is None:
            named = self._name(module, stack, args)
        rf = self._range(named[1], args) if self.record_inputs else self._range(named[1])
        rf.__enter__()
        stack.append((module, named[0], rf))

    def _exit(self, module: Any, args: Any, output: Any) -> None:
        if self.only is not None and id(module) not in self.only:
            return
        stack = getattr(self._local, "stack", None)
        if not stack:
            return
        # A child that raised may have been skipped by torch (hooks registered after the call
        # started, or an exception swallowed above it): unwind to this module.
        if stack[-1][0] is not module and not any(entry[0] is module for entry in stack):
            return
        while stack:
            entry = stack.pop()
            entry[2].__exit__(None, None, None)
            if entry[0] is module:
                break

    # -- naming -------------------------------------------------------------------------------
    def _name(self, module: Any, stack: list, args: Any = ()) -> tuple[str, str]:
        path = None
        for parent, parent_path, _ in reversed(stack):
            rel = self._relative_name(parent, module)
            if rel:
                path = f"{parent_path}.{rel}"
                break
        if path is None:
            for root, label in self._roots.values():
                if root is module:
                    path = label
                    break
                rel = self._relative_name(root, module)
                if rel:
                    path = f"{label}.{rel}"
                    break
        if path is None:
            path = self._add_root(module)
        named = (path, module_range_name(path, type(module).__name__))
        self._names[(id(stack[-1][0]) if stack else id(None), id(module))] = named
        self._objects.setdefault(path, module)
        if path not in self._op_args:
            self._op_args[path] = layer_op_args(module, args)
        return named

    def _relative_name(self, parent: Any, module: Any) -> str | None:
        table = self._relative.get(id(parent))
        if table is None:
            table = {id(m): name for name, m in parent.named_modules() if name}
            self._relative[id(parent)] = table
        return table.get(id(module))

    def _add_root(self, module: Any) -> str:
        label = self._label_of(module) or type(module).__name__
        if getattr(module, "_is_replica", False):
            # nn.DataParallel runs a copy of the model per device on its own thread: show it as
            # a replica of its class (its parameters are the original's, never counted again).
            label = f"{type(module).__name__} (replica)"
        taken = {label for _, label in self._roots.values()}
        if label in taken:
            n = 2
            while f"{label}#{n}" in taken:
                n += 1
            label = f"{label}#{n}"
        self._roots[id(module)] = (module, label)
        self._objects.setdefault(label, module)
        return label

    def _collect_infos(self) -> None:
        counted: dict[int, tuple[int, int]] = {}
        for path, module in self._objects.items():
            if path in self.modules:
                continue
            sizes = counted.get(id(module))
            if sizes is None:
                params = list(module.parameters())
                sizes = (sum(p.numel() for p in params), sum(p.numel() * p.element_size() for p in params))
                counted[id(module)] = sizes
            root = self._roots.get(id(module))
            self.modules[path] = ModuleInfo(type=type(module).__name__, params=sizes[0], param_bytes=sizes[1],
                                            op_args=self._op_args.get(path), root=root is not None and root[1] == path,
                                            replica=bool(getattr(module, "_is_replica", False)))  # fmt: skip

    def collect(self) -> dict[str, ModuleInfo]:
        """Module facts gathered so far (also mid-run, for a schedule's completed cycle)."""
        self._collect_infos()
        return self.modules


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
