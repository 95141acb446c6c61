"""An independent FLOP count per layer, to check torchprof's against: no profiler, no recorded shapes.

Every aten op the step dispatches is seen by a ``TorchDispatchMode`` with its real arguments,
counted by torchprof's formulas (so the two counts share the conventions, and differ only where
the recording, the arguments read or the attribution differ) and put on a layer:

- in forward, on the innermost module running (global forward hooks), by ``named_modules()``
  paths under the root's class name; a module no model holds, made inside a running forward,
  is ``<caller>.(<Class>)``;
- in backward, on the module whose forward created the autograd node being run
  (``torch._C._current_autograd_node()``): each module's forward hook claims the nodes created
  during its call (sequence numbers from its start on) that its outputs reach and no module
  inside it claimed; a node no module claimed (the loss, the optimizer, gradient accumulation)
  is on no layer, counted only in the whole step.

Composite functions that torchprof counts as one op whatever backend runs them (attention) are
caught above the dispatcher, by a ``TorchFunctionMode``, and counted by their formula once.
``FlopCounterMode`` gives a second opinion on the MACs with formulas that are not ours.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

try:
    from torchprof._tree.flops.formulas import FORMULAS, ZERO_COST
    from torchprof._tree.flops.kinds import is_free
except ImportError:  # (before the FLOP path was a package: to measure that design)
    from torchprof._tree.flops import FORMULAS, is_free  # type: ignore[no-redef]

    ZERO_COST = frozenset()

F = torch.nn.functional


def _sdpa_args(query: Any, key: Any, value: Any, attn_mask: Any = None, dropout_p: float = 0.0, is_causal: bool = False,
               scale: Any = None, enable_gqa: bool = False) -> list[Any]:  # fmt: skip
    return [query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa]


def _dropout_args(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> list[Any]:
    return [input, p, training]


#: Functions counted above the dispatcher, by the formula of the op the profiler records for them
#: outermost (these decompose before the dispatcher, into other ops on each backend): the aten
#: op's name and its arguments from the function's.
_COMPOSITES: dict[Any, tuple[str, Callable[..., list[Any]]]] = {
    F.scaled_dot_product_attention: ("aten::scaled_dot_product_attention", _sdpa_args),
    F.dropout: ("aten::dropout", _dropout_args),
    F.dropout1d: ("aten::feature_dropout", _dropout_args),
    F.dropout2d: ("aten::feature_dropout", _dropout_args),
    F.dropout3d: ("aten::feature_dropout", _dropout_args),
}


def _arguments(func: Any, args: tuple, kwargs: dict) -> tuple[list[Any], list[Any]]:
    """(shapes, concrete) in schema order, as the profiler records an op's inputs."""
    schema = func._schema
    values: list[Any] = []
    for j, arg in enumerate(schema.arguments):
        if j < len(args):
            values.append(args[j])
        elif arg.name in kwargs:
            values.append(kwargs[arg.name])
        elif arg.has_default_value():
            values.append(arg.default_value)
        else:
            values.append(None)
    return _split(values)


def _split(values: list[Any]) -> tuple[list[Any], list[Any]]:
    shapes: list[Any] = []
    concrete: list[Any] = []
    for v in values:
        if isinstance(v, torch.Tensor):
            shapes.append(list(v.shape))
            concrete.append(None)
        elif isinstance(v, (list, tuple)) and v and all(isinstance(t, torch.Tensor) or t is None for t in v):
            shapes.append([list(t.shape) if t is not None else [] for t in v])
            concrete.append(None)
        else:
            shapes.append([])
            concrete.append(list(v) if isinstance(v, tuple) else v)
    return shapes, concrete


class ReferenceCount:
    """``with ReferenceCount(model) as ref: step()``, then ``ref.rows()``: path -> (macs, flops) of
    everything that ran inside each layer's calls (NaN where an op of unknown cost ran in one)
    and ``ref.total``: the whole step's."""

    def __init__(self, root: torch.nn.Module, label: str | None = None) -> None:
        self.label = label or type(root).__name__
        self.names = {id(m): (f"{self.label}.{n}" if n else self.label) for n, m in root.named_modules()}
        self._roots = {self.label}
        self.counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.unknown: dict[str, set[str]] = defaultdict(set)
        self.all = [0, 0]
        self.all_unknown: set[str] = set()
        self._stack: list[tuple[str, int, tuple[str, ...]]] = []  # (path, first sequence number, the paths it counts in)
        self._owner: dict[Any, tuple[str, ...]] = {}
        self._in_composite = 0
        self._handles: list[Any] = []

    # -- attribution ---------------------------------------------------------------------------------
    def _path(self, module: Any) -> str:
        path = self.names.get(id(module))
        if path is None:
            if self._stack:  # made inside a running forward: a row under its caller
                path = self.names[id(module)] = f"{self._stack[-1][0]}.({type(module).__name__})"
            else:  # another root, named as torchprof names roots: its class, then #2, #3...
                path, n = type(module).__name__, 2
                while path in self._roots:
                    path, n = f"{type(module).__name__}#{n}", n + 1
                self._roots.add(path)
                self.names.update({id(m): (f"{path}.{name}" if name else path) for name, m in module.named_modules()})
        return path

    def _enter(self, module: Any, args: Any) -> None:
        path = self._path(module)
        self.counts[path]  # (a layer that ran, even with nothing counted)
        chain = self._stack[-1][2] if self._stack else ()
        if chain and not path.startswith(chain[-1] + "."):
            # A layer its caller does not hold by name (one two blocks share): it counts in the
            # module that names it (the nearest running one its path is under), not in its caller.
            owners = [j for j, p in enumerate(chain) if path.startswith(p + ".")]
            if owners:
                chain = chain[: owners[-1] + 1]
        self._stack.append((path, torch._C._autograd._get_sequence_nr(), (*chain, path)))

    def _leave(self, module: Any, args: Any, output: Any) -> None:
        if not self._stack:
            return
        _, start, chain = self._stack.pop()
        # Through nodes a module inside claimed too: what this one made before calling it lies behind them.
        todo = [t.grad_fn for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        seen: set[Any] = set()
        while todo:
            node = todo.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            if node._sequence_nr() < start or type(node).__name__ == "AccumulateGrad":
                continue
            self._owner.setdefault(node, chain)
            todo.extend(next_node for next_node, _ in node.next_functions)

    def _chain(self) -> tuple[str, ...]:
        node = torch._C._current_autograd_node()
        if node is not None:
            return self._owner.get(node, ())
        return self._stack[-1][2] if self._stack else ()

    def count(self, name: str, shapes: list[Any], concrete: list[Any]) -> None:
        node = torch._C._current_autograd_node()
        if name in _DDP_AVERAGING and type(node).__name__ == "AccumulateGrad" and _ddp_running():
            return  # DDP's reducer averaging a gradient over the ranks: communication's, by convention not counted
        chain = set(self._chain())
        formula = FORMULAS.get(name)
        if formula is not None:
            macs, flops = formula(shapes, concrete)
            self.all[0] += macs
            self.all[1] += flops
            for path in chain:
                self.counts[path][0] += macs
                self.counts[path][1] += flops
        elif not is_free(name) and not name.startswith("profiler::"):  # (record_function's ops: ranges to torchprof)
            self.all_unknown.add(name)
            for path in chain:
                self.unknown[path].add(name)

    # -- the modes -----------------------------------------------------------------------------------
    def __enter__(self) -> ReferenceCount:
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

        self._handles = [register_module_forward_pre_hook(self._enter), register_module_forward_hook(self._leave)]
        self._dispatch = _Dispatch(self)
        self._function = _Function(self)
        self._function.__enter__()
        self._dispatch.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._dispatch.__exit__(*exc)
        self._function.__exit__(*exc)
        for handle in self._handles:
            handle.remove()

    # -- results -------------------------------------------------------------------------------------
    @property
    def total(self) -> tuple[float, float]:
        """(MACs, FLOPs) of everything the block ran; NaN where an op of unknown cost ran."""
        if self.all_unknown:
            return float("nan"), float("nan")
        return float(self.all[0]), float(self.all[1])

    def rows(self) -> dict[str, tuple[float, float]]:
        nan = float("nan")
        return {path: (nan, nan) if self.unknown.get(path) else (float(c[0]), float(c[1])) for path, c in self.counts.items()}


#: What DDP's reducer runs on each gradient as it averages it (under the parameter's AccumulateGrad).
_DDP_AVERAGING = frozenset({"aten::div_", "aten::mul_", "aten::mul", "aten::div"})


def _ddp_running() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized()


class _Dispatch(TorchDispatchMode):
    def __init__(self, ref: ReferenceCount) -> None:
        super().__init__()
        self.ref = ref

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if not self.ref._in_composite:
            shapes, concrete = _arguments(func, args, kwargs)
            self.ref.count(func._schema.name, shapes, concrete)
        return func(*args, **kwargs)


class _Function(TorchFunctionMode):
    def __init__(self, ref: ReferenceCount) -> None:
        super().__init__()
        self.ref = ref

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        composite = _COMPOSITES.get(func)
        if composite is None and f"aten::{getattr(func, '__name__', '')}" in ZERO_COST and not self.ref._in_composite:
            # A function whose op costs nothing with what it calls (one_hot checks its range
            # with an aminmax): the profiler records the op around what it called.
            self.ref._in_composite += 1
            try:
                return func(*args, **kwargs)
            finally:
                self.ref._in_composite -= 1
        if composite is None or self.ref._in_composite or composite[0] not in FORMULAS:
            return func(*args, **kwargs)
        name, arguments = composite
        self.ref.count(name, *_split(arguments(*args, **kwargs)))
        self.ref._in_composite += 1
        try:
            out = func(*args, **kwargs)
        finally:
            self.ref._in_composite -= 1
        return out
