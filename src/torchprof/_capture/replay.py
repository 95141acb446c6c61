"""FLOPs without ``record_shapes``: note each root module call's arguments (sizes, not data) while
the profile runs, and afterwards run a copy of the module on the meta device, on arguments of those
sizes, under a short shape-recording profile.

Why: torch's ``record_shapes=True`` applies to every op and costs most of its overhead when the
profile stops (it formats every op's shapes): 1.5x the wall time of a bare ``torch.profiler`` on
small-op models. The module hooks, by contrast, see each layer's inputs for almost nothing. A meta
copy computes no data, so the replay costs what the ops' shape functions cost, once per distinct
call signature, after the profiled block, not inside it.

The replay's events are plain :class:`~torchprof._records.ReplayRun` records; the tree stage
(``_tree/replay_match.py``) counts their FLOPs and checks them against the real run's tree, node by
node, before using them. What cannot be replayed (a module whose forward reads tensor values, a
module compiled by ``torch.compile``, code outside any module) keeps its FLOPs unknown.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import enum
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from .._records import ReplayRun
from .fast_meta import attention_as_on_cpu, fast_meta_kernels, index_put_as_on_cpu, reshape_as_on_device
from .module_graph import modules_below
from .swaps import config_patched, entered
from .swaps import user_state_kept as _user_state_kept  # streams, warnings, random states

#: What :meth:`CallRecorder.root_call` returns for a root call not replayed itself, whose module
#: calls are replayed instead (each as a root of its own). The hooks compare against it.
PASS_THROUGH = object()

#: Distinct call signatures replayed per root module at most (a model fed many input sizes).
MAX_SIGNATURES = 16
#: Calls replayed together at most (:func:`_joint_groups`); more make a replay that long.
MAX_JOINT_CALLS = 16
#: Wrappers whose forward runs ``self.module`` on its own arguments (replayed through it).
_WRAPPERS = ("DistributedDataParallel", "DataParallel")
#: Leaf values kept by value in a signature; anything else is kept by identity.
_PLAIN = (type(None), bool, int, float, str, complex)


# Not frozen: a frozen dataclass's __init__ sets each field through object.__setattr__, twice the
# cost, and an optimizer step makes two per parameter. Hashed by value all the same; never changed.
@dataclass(slots=True, unsafe_hash=True)
class TensorSpec:
    """What the replay needs of a tensor argument: never its data."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: Any
    requires_grad: bool
    device: Any
    leaf: bool = True
    """Made by no op that autograd recorded (a gradient reaching it is accumulated into it)."""
    grad: bool = False
    """A leaf that had a gradient already: the gradient reaching it is added to that one."""


@dataclass(frozen=True)
class _Values:
    """A PackedSequence's batch sizes, replayed with their values: the packing's layout (which
    rows each time step holds, a CPU tensor by contract), as much its shape as sizes are."""

    values: tuple[int, ...]


@dataclass(frozen=True)
class _Same:
    """A tensor argument that is the same tensor as an earlier one (``mha(x, x, x)``)."""

    leaf: int


class _Held:
    """An argument object (a cache ``generate()`` grows call by call) as it was at the call: a
    copy made only of dicts, lists, tuples, plain objects and plain values, whose tensors are
    :class:`TensorSpec` placeholders (see :func:`_walked`). Kept by identity, the replay would read
    it as the run left it (a longer cache, or tensors with data beside the replay's data-free
    ones) and could change the user's object."""

    __slots__ = ("copy", "shared", "specs")

    def __init__(self, copy: Any, specs: list[TensorSpec], shared: list[Any]) -> None:
        self.copy = copy
        self.specs = specs
        self.shared = shared

    def made(self, tensors: _Tensors) -> Any:
        """A copy of the object as it was at the call, each tensor a data-free one of its sizes
        (``deepcopy`` of a copy made of plain parts only: no code of the user's runs)."""
        import torch

        memo: dict[int, Any] = {id(spec): tensors.of(spec) for spec in self.specs}
        memo.update((id(value), tensors.module_copy(value) if isinstance(value, torch.nn.Module) else value) for value in self.shared)
        return copy.deepcopy(self.copy, memo)


#: Parts of one argument object walked at most at each call (a bigger one is kept by identity).
_HELD_LIMIT = 1_000


class _Impure(Exception):
    """An argument object holds a part a copy cannot have without running code of its own."""

    def __init__(self, kind: str, tensors: bool) -> None:
        super().__init__(kind)
        self.kind, self.tensors = kind, tensors


def _walked(root: Any, tensor: type, spec_of: Callable[[Any], TensorSpec],
            limit: int = _HELD_LIMIT) -> tuple[list[Any], list[Any], list[TensorSpec]] | None:  # fmt: skip
    """An argument object's parts (walked depth first), the tokens that say all of it (each
    container's kind with its length, keys or attribute names, each plain value, each tensor's
    spec, a part met twice as a reference back), and its tensors' specs; None past ``limit``
    parts. Parts are dicts, lists and tuples, plain objects (a ``__dict__``, no copy or pickle
    hooks: a cache's layers), plain and immutable values, tensors, and what a copy shares
    (modules, devices, dtypes, functions, arrays); anything else raises :class:`_Impure`."""
    index: dict[int, int] = {}
    parts: list[Any] = []
    tokens: list[Any] = []
    specs: list[TensorSpec] = []
    stack = [root]
    while stack:
        obj = stack.pop()
        seen = index.get(id(obj))
        if seen is not None:
            tokens.append(("same part as", seen))
            continue
        index[id(obj)] = len(parts)
        parts.append(obj)
        if len(parts) > limit:
            return None
        kind = type(obj)
        if kind in _ATOMIC:
            tokens.append((kind, obj))
        elif isinstance(obj, tensor):
            specs.append(spec_of(obj))
            tokens.append(specs[-1])
        elif _shared_in_copies(obj):
            tokens.append((kind, _value_token(obj) if _immutable_value(obj) else id(obj)))  # (the copy holds it: its id stays its own)
        elif _immutable_value(obj):
            tokens.append((kind, _value_token(obj)))
        elif kind is dict:
            if not all(type(k) in _ATOMIC for k in obj):
                raise _Impure("dict with keys that are not plain values", bool(specs))
            tokens.append((dict, tuple(obj)))
            stack.extend(reversed(list(obj.values())))
        elif kind is list or kind is tuple:
            tokens.append((kind, len(obj)))
            stack.extend(reversed(list(obj)))
        elif _plain_object(kind) and isinstance(getattr(obj, "__dict__", None), dict):
            state = obj.__dict__
            tokens.append((kind, tuple(state)))
            stack.extend(reversed(list(state.values())))
        else:
            raise _Impure(kind.__name__, bool(specs))
    return parts, tokens, specs


def _immutable_value(obj: Any) -> bool:
    """A value that is its own copy and compares by value (an enum member, a slice or range of
    plain values, a NumPy scalar, a dtype or device)."""
    torch = sys.modules.get("torch")
    numpy = sys.modules.get("numpy")
    if isinstance(obj, enum.Enum) or (numpy is not None and isinstance(obj, numpy.generic)):
        return True
    if isinstance(obj, (slice, range)):
        return all(type(v) in _ATOMIC for v in (obj.start, obj.stop, obj.step))
    return torch is not None and isinstance(obj, (torch.device, torch.dtype, torch.layout, torch.memory_format))


def _value_token(obj: Any) -> Any:
    """An immutable value as a signature holds it (a slice is not hashable before Python 3.12)."""
    return (obj.start, obj.stop, obj.step) if isinstance(obj, (slice, range)) else obj


_MISSING = object()


def _quick_copy(root: Any, found: list[Any], memo: dict[int, Any]) -> Any:
    """``copy.deepcopy(root, memo)`` for an argument object ``found`` walked already (plain parts
    only, :func:`_walked`): dicts, lists and plain objects made directly, tuples through
    ``deepcopy``. A decoding step's cache is copied at each call: deepcopy's generic machinery
    took ten times as long (2 ms for 32 layers)."""
    shells: list[Any] = []
    for obj in found:
        if id(obj) in memo:
            continue
        kind = type(obj)
        if kind is dict or kind is list:
            memo[id(obj)] = kind()
            shells.append(obj)
        elif _plain_object(kind) and isinstance(getattr(obj, "__dict__", None), dict):
            memo[id(obj)] = object.__new__(kind)
            shells.append(obj)

    def made(value: Any) -> Any:
        got = memo.get(id(value), _MISSING)
        if got is not _MISSING:
            return got
        return value if type(value) in _ATOMIC or _immutable_value(value) else copy.deepcopy(value, memo)

    for obj in shells:
        new = memo[id(obj)]
        if type(obj) is dict:
            new.update((k, made(v)) for k, v in obj.items())
        elif type(obj) is list:
            new.extend(made(v) for v in obj)
        else:
            new.__dict__.update((k, made(v)) for k, v in obj.__dict__.items())
    return made(root)


def _plain_object(kind: type) -> bool:
    """Whether ``copy.deepcopy`` copies an instance of ``kind`` as its ``__dict__`` alone."""
    own: Any = object
    return (getattr(kind, "__new__", None) is own.__new__ and getattr(kind, "__reduce_ex__", None) is own.__reduce_ex__
            and getattr(kind, "__reduce__", None) is own.__reduce__ and getattr(kind, "__getstate__", own.__getstate__) is own.__getstate__
            and not hasattr(kind, "__setstate__") and not hasattr(kind, "__deepcopy__") and not getattr(kind, "__slots__", ()))  # fmt: skip


def _is_tensor(obj: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _shared_in_copies(obj: Any) -> bool:
    """What a copy of an argument object shares with the original rather than copies: modules
    (the model's own, with their parameters), classes, functions, modules of code, arrays, and
    torch's immutable values (a device, a dtype: one per layer of a cache)."""
    torch = sys.modules.get("torch")
    numpy = sys.modules.get("numpy")
    return (isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType))
            or (torch is not None and isinstance(obj, (torch.nn.Module, torch.device, torch.dtype, torch.layout, torch.memory_format)))
            or (numpy is not None and isinstance(obj, numpy.ndarray)))  # fmt: skip


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
    steps: dict[int, int] = field(default_factory=dict)
    """With a schedule: calls per profiler step (-1 without one)."""
    returned: int = 0
    """Calls that returned (a call that raised is not replayed: its forward ran only partly)."""
    grad_outputs: set[int] = field(default_factory=set)
    """Which tensors of the output (by :func:`output_tensors` order) a gradient reached in the
    real run: the replay's backward starts from those alone (a loss on one output runs only its
    backward)."""
    unwatched: bool = False
    """An output could not be walked: whether a gradient reached it is not known."""
    root: Any = None
    """The :class:`RootCalls` this signature belongs to."""
    anomaly: bool = False
    """Called in anomaly mode (``torch.autograd.detect_anomaly``), which checks every gradient."""
    grads: tuple[bool, ...] = ()
    """Per parameter of the root (``RootCalls.params``): whether it had a gradient already, which
    its backward then adds to (gradient accumulation)."""
    together: dict[int, int] = field(default_factory=dict)
    """Calls whose backward ran, by the autograd pass (graph task) it ran in: calls sharing one
    (a siamese or contrastive step, a GAN's discriminator on real and fake) have their gradients
    summed there, work a replay of one call lacks (see :func:`_joint_groups`)."""


@dataclass
class Accumulation:
    """Whether a root call of the run found a parameter with a gradient already, as its forward
    or its backward started (gradient accumulation). One for all the roots of a run: their
    backward no module owns (every parameter's ``AccumulateGrad``) is one node of the tree,
    matched to all their replays at once, so they replay it alike."""

    seen: bool = False


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
    params: list[Any] | None = None
    """The root's parameters, each once, in a fixed order (read at its first call)."""
    layout: tuple | None = None
    """The module's structure after its first call (:func:`module_layout`): a module changed
    between the run and the replay is not replayed."""
    accumulation: Accumulation = field(default_factory=Accumulation)
    """The run's (shared by its roots)."""


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
        self._anomaly = torch.is_anomaly_enabled
        self._anomaly_nan = torch.is_anomaly_check_nan_enabled
        # The autograd pass a backward hook runs in (-1 outside one, and on a torch without it).
        self._graph_task: Callable[[], int] = getattr(torch._C, "_current_graph_task_id", lambda: -1)
        self._module = torch.nn.Module
        self._parameter = torch.nn.Parameter
        self._strided = torch.strided
        self._plain_dispatch = torch.Tensor.__torch_dispatch__
        self._is_wrapped = torch._C._functorch.is_functorch_wrapped_tensor
        self.roots: dict[str, RootCalls] = {}
        self._too_big: dict[int, Any] = {}  # argument objects of more than _HELD_LIMIT parts, kept by identity
        self._accumulation = Accumulation()
        self._handles: list[Any] = []
        self.recursion_limit = sys.getrecursionlimit()
        """The highest recursion limit a root call ran under (a deep model's forward recurses)."""
        self.fault: str | None = None
        self.step_of: Callable[[], int] = lambda: -1
        """The profiler's step now (a schedule's; -1 without one)."""
        self.outside: Any = None
        """The :class:`~torchprof._capture.outside.OutsideRecorder` (optimizer steps, calls
        outside modules), once installed."""

    def root_call(self, module: Any, path: str, args: Any, compiled: bool) -> Any:
        """Note one call of a root module; returns its signature (None: not replayed), or
        :data:`PASS_THROUGH` for a call whose ``forward`` was replaced for that call alone (Lightning
        runs ``training_step`` through a wrapper's forward this way): a copy replayed later would
        not run it, so the module calls it makes are replayed instead. Never raises: what cannot
        be read makes the root's FLOPs unknown, with the reason."""
        patched = getattr(module, "__dict__", {}).get("forward")
        if patched is not None and getattr(patched, "__self__", None) is not module:
            return PASS_THROUGH
        inner = getattr(module, "module", None) if type(module).__name__ in _WRAPPERS else None
        if isinstance(inner, self._module):
            # DDP and DataParallel run the wrapped module on the same arguments: replaying the
            # wrapper would copy its process group and run its collectives; the model has none.
            module, path = inner, f"{path}.module"
        calls = self.roots.get(path)
        if calls is None:
            calls = self.roots[path] = RootCalls(module, path, skip=self.fault, accumulation=self._accumulation)
            self.recursion_limit = max(self.recursion_limit, sys.getrecursionlimit())
        if calls.module is not module:
            calls.skip = "two modules were profiled under one path"
        if compiled:
            calls.compiled = True
            if self.outside is not None:
                self.outside.compiled_root_ran()
        if calls.skip is not None or calls.compiled:
            return None
        try:
            return self._signature(calls, module, args)
        except _Unreplayable as why:
            calls.skip = str(why)
        except Exception as exc:  # noqa: BLE001 - our hook never raises into the user's forward
            calls.skip = f"torchprof could not read its arguments ({type(exc).__name__}: {_first_line(exc)})"
        return None

    def _signature(self, calls: RootCalls, module: Any, args: Any) -> Signature | None:
        kwargs = _caller_kwargs(module)
        if kwargs is None:
            raise _Unreplayable("its keyword arguments could not be seen")
        try:
            leaves, spec = self._flatten((tuple(args), kwargs))
        except Exception:  # noqa: BLE001 - an argument pytree cannot walk: no replay, FLOPs unknown
            raise _Unreplayable("its arguments could not be read") from None
        tensor = self._tensor
        autocast = tuple((dt, self._autocast_dtype(dt)) for dt in ("cpu", "cuda") if self._autocast(dt))
        anomaly = (self._anomaly(), self._anomaly_nan()) if self._anomaly() else None
        grad = self._grad_enabled() and not self._inference()
        if calls.params is None:
            calls.params = [p for m in modules_below(module) for p in m._parameters.values() if p is not None]
        # Which parameters have a gradient already: its backward adds to those (accumulation).
        grads = tuple(p.grad is not None for p in calls.params) if grad else ()
        if any(grads):
            calls.accumulation.seen = True
        key: list[Any] = [grad, bool(getattr(module, "training", False)), str(spec), autocast, anomaly, grads]  # (grads: at _GRADS_AT)
        kept: list[Any] = []
        first: dict[int, int] = {}  # id(tensor) -> its first leaf: one tensor passed twice is one tensor again
        layouts = _packed_layouts((tuple(args), kwargs)) if "PackedSequence" in key[2] else set()
        for n, leaf in enumerate(leaves):
            if id(leaf) in layouts:
                values = _Values(tuple(leaf.tolist()))
                key.append(values)
                kept.append(values)
            elif isinstance(leaf, tensor):
                same = first.setdefault(id(leaf), n)
                if same != n:
                    key.append(("same", same))
                    kept.append(_Same(same))
                    continue
                ts = self.spec(leaf)
                if ts.grad:
                    calls.accumulation.seen = True  # its backward adds into the gradient it had
                key.append(ts)
                kept.append(ts)
            elif type(leaf) in _PLAIN:
                key.append((type(leaf), leaf))
                kept.append(leaf)
            else:
                held = self._held(leaf)
                key.append((type(leaf), id(leaf)) if held is None else held[0])
                kept.append(leaf if held is None else held[1])
        signature_key = tuple(key)
        sig = calls.signatures.get(signature_key)
        if sig is None:
            if len(calls.signatures) >= MAX_SIGNATURES:
                raise _Unreplayable(f"called with more than {MAX_SIGNATURES} distinct argument sizes")
            sig = calls.signatures[signature_key] = Signature(spec, kept, key[0], key[1], autocast, root=calls,
                                                              anomaly=anomaly is not None, grads=grads)  # fmt: skip
        sig.count += 1
        step = self.step_of()
        sig.steps[step] = sig.steps.get(step, 0) + 1
        return sig

    def _held(self, leaf: Any) -> tuple[tuple[Any, ...], _Held] | None:
        """An argument object as it is now (:class:`_Held`: a cache may hold no tensor yet, and
        more by the time the profile is read) and its part of the signature (every part of it:
        :func:`_walked`); None for one kept by identity and read when replayed, as before (a
        module or function, one of more than ``_HELD_LIMIT`` parts, or one without tensors
        that holds a part of its own kind)."""
        if _shared_in_copies(leaf) or id(leaf) in self._too_big:
            return None
        tensor = self._tensor
        try:
            walked = _walked(leaf, tensor, self.spec)
        except _Impure as part:
            if not part.tensors:
                return None
            raise _Unreplayable(f"its {type(leaf).__name__} argument holds tensors beside a {part.kind}, "
                                "which torchprof cannot copy without running its code") from None  # fmt: skip
        if walked is None:
            self._too_big[id(leaf)] = leaf  # (held: its id stays its own) not walked again at its next call
            return None
        parts, tokens, specs = walked
        memo: dict[int, Any] = {}
        shared = []
        tensors = iter(specs)
        for obj in parts:
            if isinstance(obj, tensor):
                memo[id(obj)] = next(tensors)
            elif _shared_in_copies(obj):
                memo[id(obj)] = obj
                shared.append(obj)
        try:
            made = _quick_copy(leaf, parts, memo)
        except Exception as exc:  # noqa: BLE001 - an object that cannot be copied: FLOPs unknown, said why
            if not specs:
                return None
            raise _Unreplayable(f"its {type(leaf).__name__} argument holds tensors and cannot be copied "
                                f"({type(exc).__name__}: {_first_line(exc)})") from None  # fmt: skip
        return (type(leaf), *tokens), _Held(made, specs, shared)

    def spec(self, t: Any) -> TensorSpec:
        """A plain tensor's sizes, strides, dtype and device; a tensor a data-free copy cannot
        stand for raises :class:`_Unreplayable` saying what it is."""
        cls = type(t)
        if (cls is self._tensor or cls is self._parameter) and not (
            t.is_nested or t.is_quantized or t._has_symbolic_sizes_strides or self._is_wrapped(t)
        ) and t.layout == self._strided:  # the common case, in fewer queries (an optimizer step asks for hundreds)
            leaf = t.is_leaf
            return TensorSpec(tuple(t.shape), t.stride(), t.dtype, t.requires_grad, t.device, leaf, leaf and t.requires_grad and t.grad is not None)
        if t.is_nested:
            raise _Unreplayable("it was called with a nested tensor, whose sizes vary per entry")
        if self._is_wrapped(t):
            raise _Unreplayable("it ran inside torch.func (vmap, grad): its tensors are batched or wrapped")
        if cls is not self._tensor and cls is not self._parameter and getattr(cls, "__torch_dispatch__", None) is not self._plain_dispatch:
            # DTensor, FakeTensor, a user's wrapper: which ops run on what is the subclass's own
            raise _Unreplayable(f"it was called with a {cls.__name__}, a tensor subclass that runs its own ops")
        shape = tuple(t.shape)
        if not all(type(d) is int for d in shape):
            raise _Unreplayable("it was called with symbolic sizes")
        if t.is_quantized:
            raise _Unreplayable("it was called with a quantized tensor")
        stride = tuple(t.stride()) if t.layout == self._strided else ()
        leaf = t.is_leaf
        return TensorSpec(shape, stride, t.dtype, bool(t.requires_grad), t.device, leaf, leaf and bool(t.requires_grad) and t.grad is not None)

    def root_output(self, sig: Signature, output: Any, raised: bool = False) -> None:
        """Watch which output tensors of a root call a gradient reaches (a tensor hook that
        changes nothing, each output watched until its first gradient). ``raised``: the forward
        raised (torch runs this hook in its handler of the exception). Never raises."""
        if raised:
            return
        sig.returned += 1
        root = sig.root
        if root is not None and root.layout is None:
            # After the first call: a lazy module has its parameters by now.
            try:
                root.layout = module_layout(root.module)
            except Exception as exc:  # noqa: BLE001 - a model that cannot be walked: not replayed
                root.skip = f"torchprof could not read its structure ({type(exc).__name__}: {_first_line(exc)})"
        if not sig.grad:
            return
        try:
            # Whether its backward adds into gradients is read when its backward starts: a
            # trainer may clear them in between (Lightning: after the forward, before the backward).
            starts = _BackwardStarts(self, sig, self.step_of())
            for n, leaf in enumerate(output_tensors(output, self._tensor, self._module)):
                if leaf.requires_grad and n not in sig.grad_outputs:
                    self._handles.append(leaf.register_hook(_Reached(sig.grad_outputs, n)))
                if leaf.requires_grad:
                    self._handles.append(leaf.register_hook(starts))
        except Exception:  # noqa: BLE001 - an output that cannot be walked: its backward stays unknown
            sig.unwatched = True

    def backward_starts(self, sig: Signature, step: int) -> None:
        """One call of ``sig`` starts its backward: it is counted under the signature whose
        parameters had a gradient as they have now (its gradient adds are those), and under the
        autograd pass it runs in (:attr:`Signature.together`). Never raises."""
        root = sig.root
        try:
            task = self._graph_task()
            if not sig.grads:  # a root without parameters: nothing to add into
                sig.together[task] = sig.together.get(task, 0) + 1
                return
            now = tuple(p.grad is not None for p in root.params)
            if any(now):
                root.accumulation.seen = True  # its backward adds into gradients (the replays' then do too)
            if now == sig.grads or not sig.count:
                sig.together[task] = sig.together.get(task, 0) + 1
                return
            key = next(k for k, s in root.signatures.items() if s is sig)
            other_key = (*key[:_GRADS_AT], now, *key[_GRADS_AT + 1:])
            other = root.signatures.get(other_key)
            if other is None:
                if len(root.signatures) >= MAX_SIGNATURES:
                    return  # its replay's adds then differ from the run's: the tree leaves them unknown
                other = root.signatures[other_key] = dataclasses.replace(sig, grads=now, count=0, steps={}, returned=0, together={})
            for moved, by in ((sig, -1), (other, 1)):
                moved.count += by
                moved.returned += by
                moved.steps[step] = moved.steps.get(step, 0) + by
                if not moved.steps[step]:
                    del moved.steps[step]
            other.together[task] = other.together.get(task, 0) + 1
        except Exception:  # noqa: BLE001 - our hook never raises into the user's backward
            root.skip = "torchprof could not read which of its gradients existed when its backward ran"

    def failed(self, why: str) -> None:
        """torchprof's hooks failed somewhere in the run: no root is replayed (what the hooks
        noted may be incomplete), so every FLOP count is unknown rather than partial."""
        self.fault = f"torchprof's module hooks failed during the run ({why})"
        for calls in self.roots.values():
            calls.skip = self.fault
        if self.outside is not None and self.outside.calls_skip is None:
            self.outside.calls_skip = self.fault  # which calls were outside modules is not known either

    def root_starts(self) -> None:
        """A root module call starts: calls inside it are its own (replayed with it)."""
        if self.outside is not None:
            self.outside.suspend()

    def root_ends(self) -> None:
        if self.outside is not None:
            self.outside.resume()

    def remove_hooks(self) -> None:
        handles, self._handles = self._handles, []
        try:
            for handle in handles:
                handle.remove()
        finally:
            if self.outside is not None:
                self.outside.remove()


class _Unreplayable(Exception):
    """Why a root call cannot be replayed (the message is the user's note)."""


def output_tensors(output: Any, tensor: type, module: type, limit: int = 10_000) -> list[Any]:
    """The tensors of a module's output in a fixed order, whatever holds them: tuples, lists,
    dicts (``ModelOutput`` too), dataclasses, objects' attributes, and a generator's frame (its
    locals, and what an iterator over a sequence still has to give), walked without running or
    advancing anything. The real call and its replay return the same structure, so the n-th
    tensor of one is the n-th of the other. Modules met on the way are not entered (their
    parameters are not outputs); each object is walked once, at most ``limit`` objects."""
    found: list[Any] = []
    seen: set[int] = set()
    stack = [output]
    while stack and len(seen) < limit:
        obj = stack.pop()
        if isinstance(obj, tensor):
            if id(obj) not in seen:
                seen.add(id(obj))
                found.append(obj)
            continue
        if obj is None or isinstance(obj, (*_PLAIN, bytes, type, module)) or id(obj) in seen:
            continue
        seen.add(id(obj))
        items: Any
        if isinstance(obj, dict):
            items = list(obj.values())
        elif isinstance(obj, (list, tuple)):
            items = list(obj)
        elif isinstance(obj, (set, frozenset)):
            continue  # no fixed order to compare by
        elif isinstance(obj, types.GeneratorType):
            frame = obj.gi_frame
            items = list(frame.f_locals.values()) if frame is not None else []
        elif type(obj).__name__ in _SEQUENCE_ITERATORS:
            state = obj.__reduce__()  # (iter, (sequence,), position): what it has still to give
            items = list(state[1][0])[state[2]:] if len(state) > 2 and isinstance(state[2], int) else []
        elif dataclasses.is_dataclass(obj):
            items = [getattr(obj, f.name, None) for f in dataclasses.fields(obj)]
        elif hasattr(obj, "__dict__") and not callable(obj):
            items = list(vars(obj).values())
        else:
            continue
        stack.extend(reversed(items))
    return found


_SEQUENCE_ITERATORS = frozenset({"list_iterator", "tuple_iterator", "list_reverseiterator"})


#: Where a signature's key holds which parameters had a gradient (``Signature.grads``).
_GRADS_AT = 5


class _BackwardStarts:
    """A tensor hook on a root call's outputs: the first gradient to reach one starts the call's
    backward (:meth:`CallRecorder.backward_starts`; returns None: the gradient is left as it is)."""

    def __init__(self, recorder: CallRecorder, sig: Signature, step: int) -> None:
        self.recorder, self.sig, self.step, self.done = recorder, sig, step, False

    def __call__(self, grad: Any) -> None:
        if not self.done:
            self.done = True
            self.recorder.backward_starts(self.sig, self.step)


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


def module_layout(root: Any) -> tuple:
    """What a replay relies on of a module: which modules it holds (by identity, in
    ``named_modules()`` order) and each one's parameters' names, sizes and dtypes. O(modules +
    parameters), no recursion, no paths built."""
    return tuple((id(module), type(module), tuple((name, tuple(p.shape), p.dtype) for name, p in module._parameters.items() if p is not None))
                 for module in modules_below(root))  # fmt: skip


def replay(roots: list[RootCalls], session_type: Any, options_type: Any, fake: bool = False,
           recursion_limit: int = 0) -> list[ReplayRun]:
    """Run each root's distinct signatures on a copy of it on the meta device (or, with ``fake``,
    on fake tensors of the real devices), under a shape-recording profile.

    The user's state is left as it was: the copy shares no tensor with the model (tensors it
    holds become data-free; NumPy arrays are shared, never copied), its hooks are removed, the
    user's global module and optimizer hooks and anomaly mode are off while it runs, Python's,
    NumPy's and torch's random states are restored, and what the forward prints or warns is
    swallowed. A module changed since it ran (a layer replaced, a parameter resized) is not
    replayed: its FLOPs are unknown. ``session_type``/``options_type``: the capture session to
    run each replay under (``CaptureSession``, which runs this module: passed in, not imported).
    ``recursion_limit``: the highest the run had (a deep model's own forward recurses)."""
    runs: list[ReplayRun] = []
    with _replay_environment(recursion_limit):
        for root in roots:
            modules = modules_below(root.module)
            if root.compiled:
                continue  # its FLOPs come from the compiled graphs' maps
            if any(type(m).__name__ == "OptimizedModule" or m.__dict__.get("_compiled_call_impl") is not None for m in modules):
                # Its compiled parts' FLOPs come from their graphs' maps; a replay would run them
                # eagerly, with other ops than their kernels.
                runs.append(ReplayRun(path=root.path, count=0, error="a part of it is torch.compile'd, and its eager layers "
                                      "are not replayed apart from its compiled ones"))  # fmt: skip
                continue
            if root.skip is None and root.layout is not None and module_layout(root.module) != root.layout:
                root.skip = ("it changed after it ran (a layer was replaced or a parameter resized before the profile "
                             "was first read), so a replay would count the new model, not the one that ran")  # fmt: skip
            if root.skip is not None:
                runs.append(ReplayRun(path=root.path, count=0, error=root.skip))
                continue
            try:
                tensors = _Tensors(fake)
                copied = tensor_copy(root.module, tensors, modules)
            except Exception as exc:  # noqa: BLE001 - a model that cannot be copied: FLOPs unknown, said why
                runs.append(ReplayRun(path=root.path, count=0, error=f"it could not be copied without its data ({type(exc).__name__}: {_first_line(exc)})"))
                continue
            groups = _joint_groups(root)  # calls that ran together in one autograd pass
            first_of = {id(group[0][0]): group for group in groups}
            later = {id(sig) for group in groups for sig, _ in group[1:]}
            for n, sig in enumerate(root.signatures.values()):
                if not sig.count:
                    continue  # every call of it started its backward under another (backward_starts)
                if id(sig) in later:
                    continue  # replayed with its group's first
                if sig.returned < sig.count:
                    runs.append(ReplayRun(path=root.path, count=sig.count, error="a call of it raised an exception"))
                    continue
                if sig.unwatched:
                    runs.append(ReplayRun(path=root.path, count=sig.count, error="its output could not be read to see which parts a gradient reached"))
                    continue
                runs += _replay_signature(copied, tensors, root.path, n, sig, options_type, session_type, first_of.get(id(sig)))
    return runs


def _joint_groups(root: RootCalls) -> list[list[tuple[Signature, int]]]:
    """Calls that ran together in one autograd pass, the same ones in every such pass (a
    siamese step's two calls of one size, a DINO step's global and local crops through one
    network), each group as ``(signature, calls per pass)``: replayed together with one
    backward, standing for each of those passes. A signature whose calls also ran otherwise
    (apart, or with others) is in no group, nor are signatures that differ in more than their
    arguments' sizes (grad mode, training, autocast, the gradients there were to add into)."""
    sigs = [sig for sig in root.signatures.values() if sig.count and sig.together]
    per_pass: dict[int, list[tuple[int, int]]] = {}
    for n, sig in enumerate(sigs):
        for task, calls in sig.together.items():
            per_pass.setdefault(task, []).append((n, calls))
    passes: dict[tuple[tuple[int, int], ...], int] = {}
    for members in per_pass.values():
        passes[tuple(members)] = passes.get(tuple(members), 0) + 1
    groups = []
    for made, times in passes.items():
        group = [(sigs[n], calls) for n, calls in made]
        first = group[0][0]
        if (sum(calls for _, calls in group) < 2 or sum(calls for _, calls in group) > MAX_JOINT_CALLS
                or any(sig.count != calls * times or sum(sig.together.values()) != sig.count
                       or any(n % calls for n in sig.steps.values()) for sig, calls in group)
                or any((sig.grad, sig.training, sig.autocast, sig.anomaly, sig.grads) != (first.grad, first.training, first.autocast, first.anomaly, first.grads)
                       for sig, _ in group)):  # fmt: skip
            continue
        groups.append(group)
    return groups


#: Yes/no reads of values answered per signature at most where the answers differ (each read
#: doubles the ways to try), and such replays tried at most for one signature.
MAX_QUESTIONS = 3
MAX_TRIES = 8
#: Reads answered at most where every read gets the same answer (tried first, see below).
MAX_SAME_ANSWERS = 64


def _replay_signature(copied: Any, tensors: _Tensors, path: str, n: int, sig: Signature, options_type: Any,
                      session_type: Any, members: list[tuple[Signature, int]] | None = None) -> list[ReplayRun]:
    """One signature's replay; where its forward reads a boolean value (``if mask.all():``),
    one replay per way to answer, each an alternative (the match keeps the one whose ops are
    those that ran).

    Every read answered "yes", then every read "no", come first, however many reads there are:
    a model checks one mask in each layer, or in its encoder and again in its decoder, and those
    reads all have the run's one answer (BART with padding reads three times, and its path was
    past the eight tries of mixed answers). Then the mixed answers, ``MAX_QUESTIONS`` reads deep
    and ``MAX_TRIES`` replays at most; a uniform prefix is not run again (its outcome is known)."""
    run = _replay_one(copied, tensors, path, sig, options_type, session_type, members=members)
    run.signature = n
    if run.error is None or _VALUE_READ not in run.error:
        return [run]
    found: list[ReplayRun] = []
    uniform: dict[bool, int] = {}  # answer -> reads a replay answered that way throughout made (it ran to the end)
    for same in (True, False):
        answers = [same] * MAX_SAME_ANSWERS
        tried = _replay_one(copied, tensors, path, sig, options_type, session_type, answers, members)  # consumes the answers
        if tried.error is None:
            reads = MAX_SAME_ANSWERS - len(answers)
            uniform[same] = reads
            tried.signature, tried.variant = n, " ".join(["yes" if same else "no"] * reads)
            found.append(tried)
    todo: list[list[bool]] = [[True], [False]]
    tries = 0
    while todo and tries < MAX_TRIES:
        answers = todo.pop(0)
        same = answers[0]
        if same in uniform and all(a is same for a in answers):
            # Its outcome is known: the uniform replay above (found already), or a further read.
            if len(answers) < uniform[same] and len(answers) < MAX_QUESTIONS:
                todo += [[*answers, True], [*answers, False]]
            continue
        tries += 1
        tried = _replay_one(copied, tensors, path, sig, options_type, session_type, list(answers), members)
        if tried.error == _QUESTION:
            if len(answers) < MAX_QUESTIONS:
                todo += [[*answers, True], [*answers, False]]
        elif tried.error is None:
            tried.signature, tried.variant = n, " ".join("yes" if a else "no" for a in answers)
            found.append(tried)
    return found or [run]


#: torch's global hook tables the user's hooks live in (module calls, registrations, optimizer
#: steps): emptied while a replay runs, so the user's hooks never see the data-free copy.
_MODULE_HOOK_TABLES = (
    "_global_forward_pre_hooks", "_global_forward_hooks", "_global_forward_hooks_always_called",
    "_global_forward_hooks_with_kwargs", "_global_backward_pre_hooks", "_global_backward_hooks",
    "_global_is_full_backward_hook", "_global_module_registration_hooks",
    "_global_parameter_registration_hooks", "_global_buffer_registration_hooks",
)  # fmt: skip
_OPTIMIZER_HOOK_TABLES = ("_global_optimizer_pre_hooks", "_global_optimizer_post_hooks")


@contextlib.contextmanager
def _replay_environment(recursion_limit: int) -> Any:
    """While replays run: the user's global hooks out of torch's tables (torchprof's own are
    put in and taken out by each replay's session), anomaly mode off (it checks values, which a
    data-free tensor has none of), the recursion limit at least what the run had, and
    shape-only kernels for the common elementwise ops (:mod:`.fast_meta`)."""
    import torch
    from torch.nn.modules import module as nn_module
    from torch.optim import optimizer as optim_module

    saved: list[tuple[Any, dict]] = []
    anomaly = (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled())
    limit = sys.getrecursionlimit()
    try:
        for owner, names in ((nn_module, _MODULE_HOOK_TABLES), (optim_module, _OPTIMIZER_HOOK_TABLES)):
            for name in names:
                table = getattr(owner, name, None)
                if isinstance(table, dict) and table:
                    saved.append((table, dict(table)))
                    table.clear()
        if anomaly[0]:
            torch.set_anomaly_enabled(False)
        if recursion_limit > limit:
            sys.setrecursionlimit(recursion_limit)
        with fast_meta_kernels():
            yield
    finally:
        sys.setrecursionlimit(limit)
        if anomaly[0]:
            torch.set_anomaly_enabled(True, anomaly[1])
        for table, content in saved:
            table.clear()
            table.update(content)


class _Tensors:
    """Makes the replay's data-free tensors: meta tensors, or fake tensors of the real device."""

    def __init__(self, fake: bool) -> None:
        import torch

        self._torch = torch
        self.mode: Any = None
        self.copies: dict[int, Any] = {}
        """id(the user's object) -> its stand-in in the copy (parameters among them)."""
        self.made: list[Any] = []
        """The arguments made so far that require a gradient (a leaf, or a non-leaf's gradient edge)."""
        self._edge_owner: dict[int, int] = {}  # id(gradient edge's node) -> id(the tensor made)
        self.devices: set[str] = set()
        """The device types of the real tensors stood for (the module's, the arguments')."""
        if fake:
            from torch._subclasses.fake_tensor import FakeTensorMode

            self.mode = FakeTensorMode(allow_non_fake_inputs=False)

    def like(self, t: Any) -> Any:
        """A data-free tensor with ``t``'s sizes, strides, dtype and device (a parameter stays one)."""
        torch = self._torch
        self.devices.add(t.device.type)
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
        """A data-free tensor for an argument: a leaf where the real one was one (its gradient
        is accumulated), else the output of a step autograd runs through without accumulating
        anything (:func:`_non_leaf`): the run had no ``AccumulateGrad`` for it either."""
        self.devices.add(spec.device.type)
        meta = made = self._meta(spec.shape, spec.stride, spec.dtype)
        if self.mode is not None:
            made = self.mode.fake_tensor_converter.from_meta_and_device(self.mode, meta, spec.device)
        if spec.requires_grad and (made.is_floating_point() or made.is_complex()):
            if spec.leaf:
                made.requires_grad_(True)
                if spec.grad:  # (its backward adds into it, as the run's did)
                    made.grad = self._torch.empty_like(made).detach()
                self.made.append(made)
            else:
                made = _non_leaf(made)
                # Its gradient edge as made: a call may change the tensor in place (then the
                # tensor names the in-place op's output, and the backward would stop there).
                edge = self._torch.autograd.graph.get_gradient_edge(made)
                self._edge_owner[id(edge.node)] = id(made)
                self.made.append(edge)
        return made

    def values(self, values: tuple[int, ...]) -> Any:
        """A CPU integer tensor holding ``values`` (:class:`_Values`): real on the meta device,
        fake with its values known under fake tensors (kernels read them, as on the CPU)."""
        torch = self._torch
        if self.mode is None:
            return torch.tensor(values, dtype=torch.int64)
        with self.mode:  # made inside the mode: a fake tensor that keeps its values as a constant
            return torch.tensor(values, dtype=torch.int64)

    def made_by(self, args: Any, kwargs: Any) -> list[Any]:
        """What of :attr:`made` stands for these arguments (one call's, of several made at once)."""
        from torch.utils import _pytree

        ids = {id(t) for t in _pytree.tree_leaves((args, kwargs))}
        out = []
        for t in self.made:
            node = getattr(t, "node", None)  # a gradient edge: whose tensor's node was it
            if (node is None and id(t) in ids) or (node is not None and id(node) in self._edge_owner and self._edge_owner[id(node)] in ids):
                out.append(t)
        return out

    def module_copy(self, module: Any) -> Any:
        """A data-free copy of a module passed as an argument (a teacher handed to a student):
        the user's own is never run by a replay, which would change its state (a batch norm's
        counts) and mix its data with data-free tensors."""
        known = self.copies.get(id(module))
        if known is not None:
            return known
        held = self.copies
        made = tensor_copy(module, self, modules_below(module))
        self.copies = {**held, **self.copies}
        return made

    def gradient_inputs(self) -> list[Any]:
        """What a replay's backward computes gradients for: what required them in the run (the
        copy's parameters, the arguments), so no other leaf gets an ``AccumulateGrad``."""
        torch = self._torch
        held = [t for t in self.copies.values() if isinstance(t, torch.Tensor) and t.requires_grad and t.is_leaf]
        return held + self.made

    def active(self, answers: list[bool] | None = None, anomaly: bool = False) -> Any:
        """The modes a replay runs under: fake tensors', and the answers to reads of values
        where the run needs them (:func:`_replay_mode`)."""
        stack = contextlib.ExitStack()
        if self.mode is not None:
            stack.enter_context(self.mode)
        # Only where needed: under a dispatch mode, torch records ranges that are dispatched ops
        # themselves (``record_function``) inside a "PythonDispatchMode" range, out of place.
        if answers is not None or anomaly:
            stack.enter_context(_replay_mode(answers, anomaly))
        if self.mode is None and self.devices == {"cpu"}:
            # (On an accelerator the meta replay keeps the math kernel; the fake-tensor replay
            # of that device makes the device's own choice.)
            stack.enter_context(attention_as_on_cpu())
            stack.enter_context(index_put_as_on_cpu())
        if self.mode is None and self.devices <= {"cpu", "cuda"}:
            stack.enter_context(reshape_as_on_device())  # (both make an alias where meta makes a view)
        return stack


_QUESTION = "it asks a question of a value with no answer"


class _Question(Exception):
    """The forward asked a yes/no question of a data-free tensor that no answer was given for."""


#: How torch says a data-free tensor's value was read (``.item()``, ``bool()``, ``if t:``).
_VALUE_READ = "cannot be called on meta tensors"


def _non_leaf(t: Any) -> Any:
    """``t`` as a tensor that requires a gradient without being a leaf: the output of a step
    whose backward passes nothing on (its own input is a leaf no gradient reaches)."""
    import torch

    global _PASS_THROUGH
    if _PASS_THROUGH is None:

        class PassThrough(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, anchor: Any, x: Any) -> Any:
                return x.clone()  # not a view: the call may change it in place

            @staticmethod
            def backward(ctx: Any, grad: Any) -> Any:
                return None, None

        _PASS_THROUGH = PassThrough
    anchor = torch.empty((), device=t.device, requires_grad=True) if not t.is_meta else torch.empty((), device="meta", requires_grad=True)
    return _PASS_THROUGH.apply(anchor, t)


_PASS_THROUGH: Any = None


def _replay_mode(answers: list[bool] | None, anomaly: bool) -> Any:
    """Answers to reads of values a data-free tensor has none of:

    - anomaly mode asks, after each backward op, whether its gradients hold a NaN
      (``isnan(grad)._is_any_true().item()``): no, a copy without data has none;
    - with ``answers``, each yes/no read of a boolean tensor (``if mask.all():``) takes the next
      answer, and one asked past the last raises :class:`_Question`: the replay is tried with
      each answer, and the tree keeps the one whose ops are exactly those that ran.

    Any other read of a value still fails."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    aten = torch.ops.aten
    asked: set[int] = set()
    pending = answers  # consumed in place: what is left says how many reads were answered
    tensor = torch.Tensor

    class Replay(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if func is aten._local_scalar_dense.default and args and isinstance(args[0], tensor) and args[0].is_meta:
                if id(args[0]) in asked:
                    return False
                if pending is not None and args[0].dtype == torch.bool and args[0].numel() == 1:
                    if not pending:
                        raise _Question()
                    return pending.pop(0)
            out = func(*args, **kwargs)
            if anomaly and func is aten._is_any_true.default and isinstance(out, tensor) and out.is_meta:
                asked.add(id(out))
            return out

    return Replay()


def _replay_one(copied: Any, tensors: _Tensors, path: str, sig: Signature, options_type: Any, session_type: Any,
                answers: list[bool] | None = None, members: list[tuple[Signature, int]] | None = None) -> ReplayRun:
    """One replay of ``sig``'s calls that ran together in one autograd pass (one call, where
    they ran apart), or of a group of signatures' (``members``: each with its calls per pass);
    the run stands for each such pass."""
    import torch
    from torch.utils import _pytree

    # Every module it calls is tracked, not only the copy's own: a forward may make one (a loss).
    session = session_type(options_type(shapes=True, flops=True, labels={copied: path}, replay=True), lambda *_: None)
    session.keeps_trace = False
    error: str | None = None
    with _user_state_kept():
        if bool(copied.training) != sig.training:
            copied.train(sig.training)
        params = sig.root.params if sig.root is not None and sig.root.params is not None else []
        for p, had in zip(params, sig.grads or [False] * len(params)):
            stand_in = tensors.copies.get(id(p))
            if stand_in is not None:
                stand_in.grad = torch.empty_like(stand_in).detach() if had else None
        tensors.made = []
        # The calls that ran in one autograd pass are replayed together (_joint_groups),
        # each on arguments of its own, as they ran.
        calls: list[tuple[Signature, Any, Any]] = []
        planned = members or [(sig, 1)]
        for member in [m for m, times in planned for _ in range(times)]:
            leaves: list[Any] = []
            for leaf in member.leaves:
                if isinstance(leaf, _Values):
                    leaves.append(tensors.values(leaf.values))
                    continue
                if isinstance(leaf, _Held):  # an argument object as it was at the call
                    leaves.append(leaf.made(tensors))
                    continue
                if isinstance(leaf, torch.nn.Module):  # a module passed in: a data-free copy of it
                    leaves.append(tensors.module_copy(leaf))
                    continue
                leaves.append(tensors.of(leaf) if isinstance(leaf, TensorSpec) else leaves[leaf.leaf] if isinstance(leaf, _Same) else leaf)
            try:
                calls.append((member, *_pytree.tree_unflatten(leaves, member.spec)))
            except Exception as exc:  # noqa: BLE001 - an argument type that checks its tensors' data: FLOPs unknown, said why
                return ReplayRun(path=path, count=sig.count, steps=_per_step(sig.steps),
                                 error=f"its arguments cannot be made without their data ({type(exc).__name__}: {_first_line(exc)})")  # fmt: skip
        # One try from the start on: a Ctrl-C landing anywhere after start() still stops the
        # session (stop() is a no-op on a session that never started) and restores SIGINT.
        started = False
        phase = "forward"
        try:
            session.start()
            started = True
            with entered() as modes:  # each left however the replay ends (swaps.py)
                modes.enter_context(tensors.active(answers, sig.anomaly))
                modes.enter_context(torch.set_grad_enabled(sig.grad))
                for device_type, dtype in sig.autocast:
                    modes.enter_context(torch.autocast(device_type, dtype=dtype))
                    if device_type == "cpu" and tensors.mode is None and tensors.devices == {"cpu"}:
                        modes.enter_context(_autocast_for_meta())
                if sig.anomaly:
                    # The run checked every gradient for NaN (ops the tree sees): so does the
                    # replay, its checks answered "no NaN" as a copy without data has none.
                    modes.enter_context(torch.autograd.set_detect_anomaly(True, check_nan=True))
                if "torch._dynamo" in sys.modules:
                    # A function compiled inside the forward runs eagerly: compiling it for fake
                    # inputs would take seconds, and its graphs are counted from their own maps.
                    modes.enter_context(config_patched(sys.modules["torch._dynamo"].config, disable=True))
                reached: list[Any] = []
                for member, args, kwargs in calls:
                    out = copied(*args, **kwargs)
                    if member.grad_outputs:
                        reached += [t for n, t in enumerate(output_tensors(out, torch.Tensor, torch.nn.Module))
                                    if n in member.grad_outputs and t.requires_grad and t.grad_fn is not None]  # fmt: skip
                if reached:
                    phase = "backward"
                    outs = _backward_roots(reached)
                    if outs:
                        inputs = tensors.gradient_inputs()
                        seeds = [torch.ones_like(t) for t in outs]
                        if _reentrant_checkpoint(outs):
                            # torch.utils.checkpoint(use_reentrant=True) runs its own backward,
                            # which refuses to be given what to compute gradients for.
                            torch.autograd.backward(outs, seeds)
                        elif inputs and sig.root is not None and not sig.root.accumulation.seen:
                            # No root call found a gradient to add to: the run's AccumulateGrad
                            # stored each one (a detach, no work). Gradients taken at the leaves
                            # leave its engine range, which the match reads, without its three
                            # events per parameter (a quarter of a small layer's replay events).
                            torch.autograd.grad(outs, inputs, seeds, allow_unused=True)
                        else:  # the adds into gradients are work: replayed as they ran
                            torch.autograd.backward(outs, seeds, inputs=inputs or None)
        except _Question:
            error = _QUESTION
        except Exception as exc:  # noqa: BLE001 - see the two cases below
            if not started:  # another profiler runs now (a profile printed inside one)
                error = f"it could not be replayed now ({exc})"
            else:  # a forward that needs real values: FLOPs unknown, said why and where
                error = f"its {phase} cannot run without real data ({type(exc).__name__}: {_first_line(exc)}{_where(exc)})"
        finally:
            try:
                session.stop()
            finally:
                session.release_interrupts()
    if error is not None:
        return ReplayRun(path=path, count=sig.count, error=error, steps=_per_step(sig.steps))
    # A replay of calls run together stands for each such pass: as often as passes ran.
    joint = sum(1 for member, _, _ in calls if member is sig)
    return ReplayRun(path=path, count=sig.count // joint, events=session.cycle_columns(), modules=dict(session.modules),
                     steps=_per_step({step: n // joint for step, n in sig.steps.items()}))  # fmt: skip


@contextlib.contextmanager
def _autocast_for_meta() -> Any:
    """While the block runs, meta tensors pass through CPU autocast's kernels as CPU tensors do:
    each op it casts runs as a wrapper that calls the op again inside it (the run's tree has
    ``aten::linear`` inside ``aten::linear``), where a meta tensor, which has no autocast key of
    its own, ran the op once, a level higher, so none of its layer's ops matched the run's. The
    casts themselves do not happen (autocast casts only CPU tensors): their sizes, all the
    FLOPs are counted from, stay the same; the previous state is back after."""
    import torch

    key = getattr(torch._C.DispatchKey, "AutocastCPU", None)
    is_in = getattr(torch._C, "_dispatch_tls_is_dispatch_key_included", None)
    put_in = getattr(torch._C, "_dispatch_tls_set_dispatch_key_included", None)
    if key is None or is_in is None or put_in is None:  # a torch laid out otherwise: its layers stay unknown
        yield
        return
    before = is_in(key)
    put_in(key, True)
    try:
        yield
    finally:
        put_in(key, before)


def _packed_layouts(tree: Any) -> set[int]:
    """The ids of the batch sizes of every PackedSequence in ``tree`` (its layout: see :class:`_Values`)."""
    from torch.nn.utils.rnn import PackedSequence
    from torch.utils import _pytree

    found = _pytree.tree_leaves(tree, is_leaf=lambda x: isinstance(x, PackedSequence))
    return {id(x.batch_sizes) for x in found if isinstance(x, PackedSequence)}


def _per_step(steps: dict[int, int]) -> dict[int, int] | None:
    """Calls per profiler step, where a schedule made steps."""
    return None if set(steps) <= {-1} else dict(steps)


def _reentrant_checkpoint(outs: list[Any]) -> bool:
    """Whether the backward of ``outs`` runs through a reentrant checkpoint (its autograd node)."""
    if "torch.utils.checkpoint" not in sys.modules:
        return False
    seen: set[Any] = set()
    stack = [t.grad_fn for t in outs if t.grad_fn is not None]
    while stack:
        fn = stack.pop()
        if fn in seen:
            continue
        seen.add(fn)
        if type(fn).__name__ == "CheckpointFunctionBackward":
            return True
        stack.extend(f for f, _ in fn.next_functions if f is not None)
    return False


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


def _where(exc: BaseException) -> str:
    """Where the replay failed: the innermost frame of the model's code (the user's, or a torch
    layer's), not torch's machinery nor torchprof's."""
    import os

    import torch

    torch_dir = os.path.dirname(torch.__file__) + os.sep
    layers = (os.path.join(torch_dir, "nn", "modules") + os.sep, os.path.join(torch_dir, "nn", "functional.py"))
    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    found = ""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        name = code.co_filename
        if not name.startswith(ours) and (not name.startswith(torch_dir) or name.startswith(layers)):
            found = f", at {os.path.basename(name)}:{tb.tb_lineno} in {code.co_name}"
        tb = tb.tb_next
    return found


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else ""
    if "attempted to run this operator with Meta tensors" in line:
        # torch's wording runs on for lines about fake tensors: the op and why is what matters
        return line.split(": attempted")[0] + " has no kernel for tensors without data"
    return line[:200]


def tensor_copy(root: Any, tensors: _Tensors, modules: list[Any]) -> Any:
    """A copy of ``root`` whose tensors are data-free tensors of the same sizes, strides and
    dtypes, with none of the user's hooks. ``modules``: ``root`` and every module below it.

    Tensors are made data-free wherever the model holds them: parameters, buffers, and plain
    attributes, also inside lists, dicts and other objects; NumPy arrays are shared, not copied
    (the replay reads only their sizes, if anything). Each module is copied on its own, its
    children set afterwards, so no recursion follows the model's depth. The rest of a module's
    state is deep-copied (a forward that appends to a list of its own changes the copy's)."""
    import torch

    memo: dict[int, Any] = {}
    copies: list[tuple[Any, Any]] = []
    for module in modules:
        cls: Any = type(module)
        new = cls.__new__(cls)
        if type(new) is not cls:
            new.__class__ = cls  # GraphModule makes a class per instance: the copy runs the original's forward
        memo[id(module)] = new
        copies.append((module, new))
    for module, _ in copies:
        for value in (*module._parameters.values(), *module._buffers.values()):
            if isinstance(value, torch.Tensor) and id(value) not in memo:
                memo[id(value)] = tensors.like(value)
    _data_free_memo([v for module in modules for k, v in module.__dict__.items() if k not in _MODULE_TABLES], memo, tensors)
    tensors.copies = memo
    get, tables, atomic = memo.get, _MODULE_TABLES, _ATOMIC
    # One pass over each module's own state (thousands of modules: no per-table lookups).
    for module, new in copies:
        copied: dict[str, Any] = {}
        for key, value in module.__dict__.items():
            if key not in tables:
                copied[key] = value if type(value) in atomic else _state_copy(value, memo)
            elif key in _HELD and isinstance(value, dict):
                if type(value) is dict:
                    copied[key] = {name: get(id(v), v) if v is not None else None for name, v in value.items()}
                else:
                    copied[key] = type(value)((name, get(id(v), v) if v is not None else None) for name, v in value.items())
            elif isinstance(value, dict):
                # The user's hooks stay with the user's model; the model's own (a weight norm's
                # pre-hook) run on the copy as they ran in the forward.
                copied[key] = _model_hooks(value, module.__dict__) if value and key in _HOOK_TABLES else type(value)()
            else:
                copied[key] = value
        new.__dict__.update(copied)
    return memo[id(root)]


#: The tables whose entries are the copy's own (data-free tensors, copied children).
_HELD = frozenset({"_parameters", "_buffers", "_modules"})

#: A module's forward hook tables and the flags kept per hook beside them (by handle id).
_HOOK_TABLES = frozenset({"_forward_pre_hooks", "_forward_hooks", "_forward_pre_hooks_with_kwargs",
                          "_forward_hooks_with_kwargs", "_forward_hooks_always_called"})  # fmt: skip

#: Where hooks that are part of what a layer computes are defined, not a user watching it:
#: torch's weight reparametrisations (weight_norm, spectral_norm and pruning compute the weight
#: in a forward pre-hook) and Hugging Face's output capturing (hooks installed once per model
#: collect the hidden states a backbone's head reads) and its input-gradient hook.
_MODEL_HOOK_MODULES = frozenset({"torch.nn.utils.weight_norm", "torch.nn.utils.spectral_norm", "torch.nn.utils.prune",
                                 "transformers.utils.output_capturing", "transformers.modeling_utils"})  # fmt: skip


def _model_hooks(table: dict[Any, Any], state: dict[str, Any]) -> dict[Any, Any]:
    """The entries of one hook table (or of the flags beside it) whose hook is the model's own
    (``_MODEL_HOOK_MODULES``): the copy runs them, and none of the user's."""
    hooks = [*state.get("_forward_pre_hooks", {}).items(), *state.get("_forward_hooks", {}).items()]
    own = {key for key, hook in hooks if _defined_in(hook) in _MODEL_HOOK_MODULES}
    return type(table)((key, value) for key, value in table.items() if key in own)


def _defined_in(hook: Any) -> str:
    """The module a hook's code is defined in (a function's, a partial's, a callable object's class)."""
    hook = getattr(hook, "func", hook)  # functools.partial
    hook = getattr(hook, "__func__", hook)  # a bound method
    name = getattr(hook, "__module__", None) if isinstance(hook, types.FunctionType) else type(hook).__module__
    return name if isinstance(name, str) else ""


#: What ``copy.deepcopy`` returns as it is.
_ATOMIC = frozenset({type(None), bool, int, float, complex, str, bytes})


def _state_copy(value: Any, memo: dict[int, Any]) -> Any:
    """``copy.deepcopy(value, memo)``, without its generic machinery for what most of a module's
    state is: plain values (flags, sizes) returned as they are, and empty sets, dicts and lists
    (``_non_persistent_buffers_set``) made anew, once per object as deepcopy's memo does."""
    kind = type(value)
    if kind in _ATOMIC:
        return value
    if (kind is set or kind is dict or kind is list) and not value:
        made = memo.get(id(value))
        if made is None:
            made = memo[id(value)] = kind()
        return made
    return copy.deepcopy(value, memo)

#: A module's own tables: tensors and children are set from the copies made, hooks left out.
_MODULE_TABLES = frozenset({
    "_parameters", "_buffers", "_modules", "_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
    "_backward_pre_hooks", "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs",
    "_forward_hooks_always_called", "_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks",
    "_load_state_dict_post_hooks",
})  # fmt: skip


def _data_free_memo(roots: list[Any], memo: dict[int, Any], tensors: _Tensors, limit: int = 1_000_000) -> None:
    """Find the tensors and arrays held anywhere in ``roots`` (containers and objects' attributes,
    as ``copy.deepcopy`` would walk them) and put their stand-ins in ``memo``: a data-free tensor
    for a tensor, the array itself for a NumPy array, so deep-copying copies neither. Modules
    (already in ``memo``), classes and functions are not entered."""
    import torch

    numpy = sys.modules.get("numpy")
    array = numpy.ndarray if numpy is not None else ()
    seen: set[int] = set()
    stack = list(roots)
    while stack and len(seen) < limit:
        obj = stack.pop()
        oid = id(obj)
        if oid in seen or oid in memo:
            continue
        seen.add(oid)
        if isinstance(obj, torch.Tensor):
            memo[oid] = tensors.like(obj)
        elif array and isinstance(obj, array):
            memo[oid] = obj
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set, frozenset)):
            stack.extend(obj)
        elif isinstance(obj, (*_PLAIN, bytes, type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType)):
            continue
        else:
            state = getattr(obj, "__dict__", None)
            if isinstance(state, dict):
                stack.extend(state.values())
            for slot in getattr(type(obj), "__slots__", ()):
                if isinstance(slot, str) and hasattr(obj, slot):
                    stack.append(getattr(obj, slot))
