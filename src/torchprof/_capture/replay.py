"""FLOPs without ``record_shapes``: note each root module call's arguments (sizes, not data) while
the profile runs, and afterwards run a copy of the module on the meta device, on arguments of those
sizes, under a short shape-recording profile.

Why: torch's ``record_shapes=True`` applies to every op and costs most of its overhead when the
profile stops (it formats every op's shapes): 1.5x the wall time of a bare ``torch.profiler`` on
small-op models. The module hooks, by contrast, see each layer's inputs for almost nothing. A meta
copy computes no data, so the replay costs what the ops' shape functions cost, once per distinct
call signature, after the profiled block, not inside it.

The replay's events are plain :class:`~torchprof._records.ReplayRun` records; the tree stage
(``_tree/replayed.py``) counts their FLOPs and checks them against the real run's tree, node by
node, before using them. What cannot be replayed (a module whose forward reads tensor values, a
module compiled by ``torch.compile``, code outside any module) keeps its FLOPs unknown.
"""

from __future__ import annotations

import contextlib
import copy
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from .._records import ReplayRun
from .hooks import PASS_THROUGH
from .swaps import config_patched, entered
from .swaps import user_state_kept as _user_state_kept  # streams, warnings, random states

#: Distinct call signatures replayed per root module at most (a model fed many input sizes).
MAX_SIGNATURES = 16
#: Wrappers whose forward runs ``self.module`` on its own arguments (replayed through it).
_WRAPPERS = ("DistributedDataParallel", "DataParallel")
#: Leaf values kept by value in a signature; anything else is kept by identity.
_PLAIN = (type(None), bool, int, float, str, complex)


@dataclass(frozen=True)
class TensorSpec:
    """What the replay needs of a tensor argument: never its data."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: Any
    requires_grad: bool
    device: Any


@dataclass(frozen=True)
class _Same:
    """A tensor argument that is the same tensor as an earlier one (``mha(x, x, x)``)."""

    leaf: int


@dataclass
class Signature:
    """One distinct way a root module was called, and how many times."""

    spec: Any  # the pytree spec of (args, kwargs)
    leaves: list[Any]  # TensorSpec for tensors, the object itself otherwise
    grad: bool
    training: bool
    autocast: tuple[tuple[str, Any], ...] = ()
    """``(device type, dtype)`` of each autocast context the call ran in."""
    count: int = 0
    returned: int = 0
    """Calls that returned (a call that raised is not replayed: its forward ran only partly)."""
    grad_outputs: set[int] = field(default_factory=set)
    """Which tensors of the output (by pytree leaf) a gradient reached in the real run: the
    replay's backward starts from those alone (a loss on one output runs only its backward)."""


@dataclass
class RootCalls:
    """Every call of one root module during the run, by signature."""

    module: Any
    path: str
    signatures: dict[tuple, Signature] = field(default_factory=dict)
    skip: str | None = None
    """Why this root is not replayed (too many signatures, arguments unseen)."""
    compiled: bool = False
    """Run through ``torch.compile``: its FLOPs come from the compiled graphs, not a replay."""


class CallRecorder:
    """Notes the arguments of root module calls (the hooks call :meth:`root_call`)."""

    def __init__(self) -> None:
        import torch
        from torch.utils import _pytree

        self._tensor = torch.Tensor
        self._flatten = _pytree.tree_flatten
        self._grad_enabled = torch.is_grad_enabled
        self._inference = torch.is_inference_mode_enabled
        self._autocast = torch.is_autocast_enabled
        self._autocast_dtype = torch.get_autocast_dtype
        self._module = torch.nn.Module
        self._strided = torch.strided
        self.roots: dict[str, RootCalls] = {}
        self._handles: list[Any] = []

    def root_call(self, module: Any, path: str, args: Any, compiled: bool) -> Any:
        """Note one call of a root module; returns its signature (None: not replayed), or
        :data:`PASS_THROUGH` for a call whose ``forward`` was replaced for that call alone (Lightning
        runs ``training_step`` through a wrapper's forward this way): a copy replayed later would
        not run it, so the module calls it makes are replayed instead."""
        patched = getattr(module, "__dict__", {}).get("forward")
        if patched is not None and getattr(patched, "__self__", None) is not module:
            return PASS_THROUGH
        inner = getattr(module, "module", None)
        if type(module).__name__ in _WRAPPERS and isinstance(inner, self._module):
            # DDP and DataParallel run the wrapped module on the same arguments: replaying the
            # wrapper would copy its process group and run its collectives; the model has none.
            module, path = inner, f"{path}.module"
        calls = self.roots.get(path)
        if calls is None:
            calls = self.roots[path] = RootCalls(module, path)
        if calls.module is not module:
            calls.skip = "two modules were profiled under one path"
        if compiled:
            calls.compiled = True
        if calls.skip is not None or calls.compiled:
            return None
        kwargs = _caller_kwargs(module)
        if kwargs is None:
            calls.skip = "its keyword arguments could not be seen"
            return None
        try:
            leaves, spec = self._flatten((tuple(args), kwargs))
        except Exception:  # noqa: BLE001 - an argument pytree cannot walk: no replay, FLOPs unknown
            calls.skip = "its arguments could not be read"
            return None
        tensor = self._tensor
        autocast = tuple((dt, self._autocast_dtype(dt)) for dt in ("cpu", "cuda") if self._autocast(dt))
        key: list[Any] = [self._grad_enabled() and not self._inference(), bool(getattr(module, "training", False)),
                          str(spec), autocast]  # fmt: skip
        kept: list[Any] = []
        first: dict[int, int] = {}  # id(tensor) -> its first leaf: one tensor passed twice is one tensor again
        for n, leaf in enumerate(leaves):
            if isinstance(leaf, tensor):
                same = first.setdefault(id(leaf), n)
                if same != n:
                    key.append(("same", same))
                    kept.append(_Same(same))
                    continue
                ts = TensorSpec(tuple(leaf.shape), tuple(leaf.stride()) if leaf.layout == self._strided else (),
                                leaf.dtype, bool(leaf.requires_grad), leaf.device)  # fmt: skip
                key.append(ts)
                kept.append(ts)
            else:
                key.append((type(leaf), leaf) if type(leaf) in _PLAIN else (type(leaf), id(leaf)))
                kept.append(leaf)
        signature_key = tuple(key)
        sig = calls.signatures.get(signature_key)
        if sig is None:
            if len(calls.signatures) >= MAX_SIGNATURES:
                calls.skip = f"called with more than {MAX_SIGNATURES} distinct argument sizes"
                return None
            sig = calls.signatures[signature_key] = Signature(spec, kept, key[0], key[1], autocast)
        sig.count += 1
        return sig

    def root_output(self, sig: Signature, output: Any) -> None:
        """Watch which output tensors of a root call a gradient reaches (a tensor hook that
        changes nothing, each output watched until its first gradient)."""
        if sys.exc_info()[1] is not None:
            return  # torch runs this hook in its handler of an exception the forward raised
        sig.returned += 1
        if not sig.grad:
            return
        try:
            leaves = self._flatten(output)[0]
        except Exception:  # noqa: BLE001 - an output pytree cannot walk: its backward stays unknown
            return
        for n, leaf in enumerate(leaves):
            if isinstance(leaf, self._tensor) and leaf.requires_grad and n not in sig.grad_outputs:
                self._handles.append(leaf.register_hook(_Reached(sig.grad_outputs, n)))

    def remove_hooks(self) -> None:
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.remove()


class _Reached:
    """A tensor hook noting that a gradient reached output ``n`` (returns None: the gradient is
    left as it is)."""

    def __init__(self, reached: set[int], n: int) -> None:
        self.reached, self.n = reached, n

    def __call__(self, grad: Any) -> None:
        self.reached.add(self.n)


def _caller_kwargs(module: Any) -> dict[str, Any] | None:
    """The keyword arguments of the module call whose forward pre-hook is running: global
    pre-hooks get the positional ones only, and ``nn.Module._call_impl`` holds both."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return None
        if frame.f_code.co_name in ("inner", "_call_impl"):
            local = frame.f_locals
            if local.get("self") is module and isinstance(local.get("kwargs"), dict):
                return dict(local["kwargs"])
        frame = frame.f_back
    return None


def replay(roots: list[RootCalls], session_type: Any, options_type: Any, fake: bool = False) -> list[ReplayRun]:
    """Run each root's distinct signatures on a copy of it on the meta device (or, with ``fake``,
    on fake tensors of the real devices), under a shape-recording profile.

    The user's state is left as it was: the copy shares no tensor with the model, its hooks are
    removed, Python's, NumPy's and torch's random states are restored, and what the forward
    prints or warns is swallowed. ``session_type``/``options_type``: the capture session to run
    each replay under (``CaptureSession``, which runs this module: passed in, not imported)."""
    from .hooks import named_modules

    runs: list[ReplayRun] = []
    for root in roots:
        modules = [m for _, m in named_modules(root.module)]
        if root.compiled or any(type(m).__name__ == "OptimizedModule" or m.__dict__.get("_compiled_call_impl") is not None
                                for m in modules):  # fmt: skip
            continue  # its FLOPs (or its compiled parts') come from the compiled graphs' maps
        if root.skip is not None:
            runs.append(ReplayRun(path=root.path, count=0, error=root.skip))
            continue
        try:
            tensors = _Tensors(fake)
            copied = tensor_copy(root.module, tensors, modules)
            tensors.batch_norm = any(type(m).__name__.startswith("BatchNorm") for m in modules)
        except Exception as exc:  # noqa: BLE001 - a model that cannot be copied: FLOPs unknown, said why
            runs.append(ReplayRun(path=root.path, count=0, error=f"it could not be copied without its data ({type(exc).__name__}: {exc})"))
            continue
        for sig in root.signatures.values():
            if sig.returned < sig.count:
                runs.append(ReplayRun(path=root.path, count=sig.count, error="a call of it raised an exception"))
                continue
            runs.append(_replay_one(copied, tensors, root.path, sig, options_type, session_type))
    return runs


class _Tensors:
    """Makes the replay's data-free tensors: meta tensors, or fake tensors of the real device."""

    def __init__(self, fake: bool) -> None:
        import torch

        self._torch = torch
        self.mode: Any = None
        self.batch_norm = False
        """The module has batch norm layers: their meta kernels get the fast stand-in."""
        if fake:
            from torch._subclasses.fake_tensor import FakeTensorMode

            self.mode = FakeTensorMode(allow_non_fake_inputs=False)

    def like(self, t: Any) -> Any:
        """A data-free tensor with ``t``'s sizes, strides, dtype and device (a parameter stays one)."""
        torch = self._torch
        if self.mode is not None:
            made = self.mode.from_tensor(t.detach())
        else:
            made = self._meta(tuple(t.shape), tuple(t.stride()) if t.layout == torch.strided else (), t.dtype)
        if isinstance(t, torch.nn.Parameter):
            return torch.nn.Parameter(made, requires_grad=t.requires_grad)
        return made.requires_grad_(True) if t.requires_grad and t.is_leaf else made

    def _meta(self, shape: tuple[int, ...], stride: tuple[int, ...], dtype: Any) -> Any:
        """A meta tensor of these sizes and strides (no strides: a non-strided layout's, dense)."""
        torch = self._torch
        if stride:
            return torch.empty_strided(shape, stride, dtype=dtype, device="meta")
        return torch.empty(shape, dtype=dtype, device="meta")

    def of(self, spec: TensorSpec) -> Any:
        meta = made = self._meta(spec.shape, spec.stride, spec.dtype)
        if self.mode is not None:
            made = self.mode.fake_tensor_converter.from_meta_and_device(self.mode, meta, spec.device)
        if spec.requires_grad and (made.is_floating_point() or made.is_complex()):
            made.requires_grad_(True)
        return made

    def active(self) -> Any:
        if self.mode is not None:
            return self.mode
        return _fast_meta_batch_norm() if self.batch_norm else contextlib.nullcontext()


def _fast_meta_batch_norm() -> Any:
    """Batch norm's meta kernels are Python decompositions (half a DenseNet's replay): outputs
    of the right sizes are all the replay needs, since FLOPs come from the recorded inputs of
    the op the profiler records before dispatch reaches them."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten

    def forward(x: Any, weight: Any, bias: Any, mean: Any, var: Any, training: bool, *_: Any) -> Any:
        channels = x.shape[1] if x.dim() > 1 else 0
        stats = (channels,) if training else (0,)
        return torch.empty_like(x), x.new_empty(stats), x.new_empty(stats)

    def backward(grad: Any, x: Any, weight: Any, *rest: Any) -> Any:
        mask = rest[-1]
        grad_weight = torch.empty(x.shape[1], dtype=x.dtype, device=x.device) if x.dim() > 1 else None
        return (torch.empty_like(x) if mask[0] else None,
                grad_weight if mask[1] and weight is not None else None,
                grad_weight.clone() if mask[2] and grad_weight is not None else None)  # fmt: skip

    fast: dict[Any, Callable[..., Any]] = {aten.native_batch_norm.default: forward,
                                           aten.native_batch_norm_backward.default: backward}

    class FastBatchNorm(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kernel = fast.get(func)
            if kernel is not None and all(not isinstance(a, torch.Tensor) or a.is_meta for a in args):
                return kernel(*args, **(kwargs or {}))
            return func(*args, **(kwargs or {}))

    return FastBatchNorm()


def _replay_one(copied: Any, tensors: _Tensors, path: str, sig: Signature, options_type: Any, session_type: Any) -> ReplayRun:
    import torch
    from torch.utils import _pytree

    # Every module it calls is tracked, not only the copy's own: a forward may make one (a loss).
    session = session_type(options_type(shapes=True, flops=True, labels={copied: path}), lambda *_: None)
    error: str | None = None
    with _user_state_kept():
        if bool(copied.training) != sig.training:
            copied.train(sig.training)
        leaves: list[Any] = []
        for leaf in sig.leaves:
            leaves.append(tensors.of(leaf) if isinstance(leaf, TensorSpec) else leaves[leaf.leaf] if isinstance(leaf, _Same) else leaf)
        args, kwargs = _pytree.tree_unflatten(leaves, sig.spec)
        # One try from the start on: a Ctrl-C landing anywhere after start() still stops the
        # session (stop() is a no-op on a session that never started) and restores SIGINT.
        started = False
        try:
            session.start()
            started = True
            with entered() as modes:  # each left however the replay ends (swaps.py)
                modes.enter_context(tensors.active())
                modes.enter_context(torch.set_grad_enabled(sig.grad))
                for device_type, dtype in sig.autocast:
                    modes.enter_context(torch.autocast(device_type, dtype=dtype))
                if "torch._dynamo" in sys.modules:
                    # A function compiled inside the forward runs eagerly: compiling it for fake
                    # inputs would take seconds, and its graphs are counted from their own maps.
                    modes.enter_context(config_patched(sys.modules["torch._dynamo"].config, disable=True))
                out = copied(*args, **kwargs)
                if sig.grad_outputs:
                    outs = _backward_roots([t for n, t in enumerate(_pytree.tree_leaves(out)) if n in sig.grad_outputs
                                            and isinstance(t, torch.Tensor) and t.requires_grad and t.grad_fn is not None])  # fmt: skip
                    if outs:
                        torch.autograd.backward(outs, [torch.ones_like(t) for t in outs])
        except Exception as exc:  # noqa: BLE001 - see the two cases below
            if not started:  # another profiler runs now (a profile printed inside one)
                error = f"it could not be replayed now ({exc})"
            else:  # a forward that needs real values: FLOPs unknown, said why
                error = f"its forward cannot run without real data ({type(exc).__name__}: {_first_line(exc)})"
        finally:
            try:
                session.stop()
            finally:
                session.release_interrupts()
    if error is not None:
        return ReplayRun(path=path, count=sig.count, error=error)
    return ReplayRun(path=path, count=sig.count, events=session.cycle_columns(), modules=dict(session.modules))


def _backward_roots(outs: list[Any]) -> list[Any]:
    """The outputs a gradient reached that no other such output was computed from: a gradient
    reaches an output the loss did not use when a used output depends on it (``logits`` from
    ``hidden``), and starting the backward there too would add a gradient the run never had."""
    if len(outs) < 2:
        return outs
    upstream: set[Any] = set()
    for t in outs:
        stack = [fn for fn, _ in t.grad_fn.next_functions if fn is not None]
        while stack:
            fn = stack.pop()
            if fn in upstream:
                continue
            upstream.add(fn)
            stack.extend(f for f, _ in fn.next_functions if f is not None)
    return [t for t in outs if t.grad_fn not in upstream]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else ""


def tensor_copy(root: Any, tensors: _Tensors, modules: list[Any]) -> Any:
    """A deep copy of ``root`` whose tensors (parameters, buffers, plain tensor attributes) are
    data-free tensors of the same sizes, strides and dtypes, with none of the user's hooks.
    ``modules``: ``root`` and its submodules (the caller has walked them already)."""
    import torch

    from .hooks import named_modules

    memo: dict[int, Any] = {}
    for module in modules:  # root's, as named_modules() lists them
        for value in (*module._parameters.values(), *module._buffers.values(), *vars(module).values()):
            if isinstance(value, torch.Tensor) and id(value) not in memo:
                memo[id(value)] = tensors.like(value)
    copied = copy.deepcopy(root, memo)
    hook_tables = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
                   "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called")  # fmt: skip
    for _, module in named_modules(copied):
        for table in hook_tables:
            value = getattr(module, table, None)
            if isinstance(value, dict):
                value.clear()
    return copied
