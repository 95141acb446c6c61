"""FLOPs of what a step runs outside every module, without recording shapes: optimizer steps and
the step's own torch calls (a functional loss, its scaling, ``.sum()`` of an output).

- **Optimizer steps.** torch's global optimizer pre-hook notes each ``step()``: which parameters
  have gradients, their sizes, the optimizer state's sizes and the hyper-parameters (never the
  data; one-element state such as the step count is kept as it is, since single-tensor Adam reads
  it as a number). After the run each distinct step is replayed on a copy of the optimizer whose
  parameters, gradients and state are data-free, under a shape-recording profile: its
  ``Optimizer.step#...`` range is matched to the real one as a root module's is.
- **Calls outside every module.** A ``TorchFunctionMode`` notes each torch call made outside
  every module and every optimizer step (the module hooks take it off while a root module runs,
  the optimizer hooks while a step runs): the function, its arguments' sizes, and which outputs a
  gradient reached. Each distinct call is replayed the same way. Dynamo guards on the mode stack,
  so the mode goes on at the block's start where entries into compiled code are watched
  (:mod:`.compiled_entry`; otherwise once the first root call or step has returned), comes off
  when compiled code is entered while it is on (a compiled function called outside every module)
  until the next root call or step returns, and is taken off for good when a compilation starts;
  calls outside modules it misses stay of unknown cost. A compiled model's own code runs inside
  its root call, where the mode is off.

Nothing here raises into the user's code: what cannot be noted makes those FLOPs unknown.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._records import ReplayRun
from .._vocab import OPTIMIZER_CLOSURE
from .compiled_entry import CompiledEntry
from .replay import (
    TensorSpec,
    _backward_roots,
    _first_line,
    _per_step,
    _Reached,
    _replay_environment,
    _Tensors,
    _Unreplayable,
    _where,
    output_tensors,
)
from .swaps import user_state_kept as _user_state_kept  # streams, warnings, random states

#: The path the replays of calls outside every module are filed under.
OUTSIDE = "(outside modules)"
#: Distinct calls outside modules (and distinct steps per optimizer) noted at most.
MAX_CALLS = 256


@dataclass(slots=True)
class _ParamNote:
    """A parameter noted at a step, specced when the profile is read from the sizes, dtype and
    device kept here (:func:`_param_specs`; see :meth:`OutsideRecorder._param_noted`)."""

    param: Any
    shape: Any
    dtype: Any
    device: Any


def _param_specs(entry: tuple[Any, Any, Any], spec_of: Callable[[Any], TensorSpec]) -> tuple[TensorSpec, TensorSpec]:
    """The parameter's and its gradient's specs of a noted entry (:meth:`OutsideRecorder._param_noted`).
    A noted parameter is specced from what was kept at its step; the parameter itself (the same
    object) is asked only what no change can alter (a kind a data-free copy cannot stand for
    raises :class:`_Unreplayable`) and its strides, where its sizes are still the step's."""
    param, grad = entry[0], entry[1]
    if isinstance(param, _ParamNote):
        now = spec_of(param.param)
        shape = tuple(param.shape)
        stride = now.stride if now.shape == shape else _contiguous(shape)
        # (it had a gradient at the step: a leaf with one)
        p_spec = TensorSpec(shape, stride, param.dtype, now.requires_grad, param.device, True, True)
    else:
        p_spec = param
    if grad is None:
        grad = TensorSpec(p_spec.shape, p_spec.stride, p_spec.dtype, False, p_spec.device, True, False)
    return p_spec, grad


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    stride, n = [], 1
    for size in reversed(shape):
        stride.append(n)
        n *= max(size, 1)
    return tuple(reversed(stride))


@dataclass
class _Small:
    """A one-element tensor replayed with its value (an optimizer's step count)."""

    value: Any


@dataclass
class StepSignature:
    """One distinct optimizer step: per group, its hyper-parameters and, per parameter with a
    gradient, the parameter's, gradient's and state's specs."""

    groups: list[tuple[dict[str, Any], list[tuple[_ParamNote | TensorSpec, TensorSpec | None, dict[str, Any]]]]]
    """(A parameter's and its gradient's specs are made when the profile is read: :func:`_param_specs`.)"""
    count: int = 0
    steps: dict[int, int] = field(default_factory=dict)


@dataclass
class OptimizerCalls:
    optimizer: Any
    label: str
    signatures: dict[tuple, StepSignature] = field(default_factory=dict)
    skip: str | None = None


@dataclass
class CallSignature:
    func: Any
    spec: Any
    leaves: list[Any]
    grad: bool
    autocast: tuple
    count: int = 0
    steps: dict[int, int] = field(default_factory=dict)
    grad_outputs: set[int] = field(default_factory=set)
    anomaly: bool = False
    """Called in anomaly mode: its backward checks each gradient for NaN (ops the tree sees)."""


_KEYED = frozenset((bool, int, float, str, type(None)))  # values a step's key holds as they are
_FLAT_SPECS: dict[int, Any] = {}


def _flat_spec(n: int) -> Any:
    """The pytree spec of ``n`` positional leaves and no keywords, made once per ``n``."""
    spec = _FLAT_SPECS.get(n)
    if spec is None:
        from torch.utils import _pytree

        spec = _FLAT_SPECS[n] = _pytree.tree_flatten((tuple(range(n)), {}))[1]
    return spec


def _flat_leaves() -> frozenset[type]:
    """The argument types a call's key holds without a pytree walk (made once: torch is imported lazily)."""
    if not _FLAT_LEAVES:
        import torch

        _FLAT_LEAVES.append(frozenset((torch.Tensor, torch.nn.Parameter, bool, int, float, str, type(None))))
    return _FLAT_LEAVES[0]


_FLAT_LEAVES: list[frozenset[type]] = []


class OutsideRecorder:
    """Notes optimizer steps and the torch calls made outside every module (see the module
    docstring). ``spec_of``: the tensor-spec reader the module calls use (raises
    ``_Unreplayable``)."""

    def __init__(self, spec_of: Callable[[Any], TensorSpec]) -> None:
        import torch
        from torch.utils import _pytree

        self._torch = torch
        self._flatten = _pytree.tree_flatten
        self._flat_leaves = _flat_leaves()
        self._spec_of = spec_of
        self.optimizers: dict[int, OptimizerCalls] = {}
        self._closure_steps: dict[int, Any] = {}  # id(optimizer) -> the optimizer, while its closure step runs
        self._closure_compiled: set[int] = set()  # id(optimizer) whose closure ran a compiled model
        self._step_hooks: list[tuple[dict[int, Any], int, Any]] = []  # (torch's table, id, hook) of our step hooks
        self._hooks_out = False
        self._removed = False
        self._unnoted: list[_Unnoted] = []  # zero_grad run with the mode off
        self.calls: dict[tuple, CallSignature] = {}
        self.calls_skip: str | None = None
        """Why calls outside modules are not replayed (None: they are, where noted)."""
        self._handles: list[Any] = []
        self._recording: Callable[[], bool] = lambda: True
        self.step_of: Callable[[], int] = lambda: -1
        self._mode: Any = None
        self._pushed: Any = None
        self._depth = 0
        self._on = False
        self._suspended = 0
        self._owner_thread = 0
        self._watched = False

    # -- install / remove -------------------------------------------------------------------------
    def install(self, recording: Callable[[], bool] | None = None, entry: CompiledEntry | None = None) -> None:
        """Start noting optimizer steps and calls outside modules. ``recording``: whether the
        profiler records now (a schedule's waits and warm-ups are not noted); None: always.

        Dynamo guards on the torch function mode stack: compiled code entered with the mode on
        would be compiled again. A compiled model's code runs inside its root call, where the
        mode is off; compiled code entered outside every module (a compiled function, an
        ``optimize`` context) takes the mode off first (``entry``, the session's watch of
        Dynamo's switch into compiled code: :mod:`.compiled_entry`), until the next root call or
        step returns."""
        import threading

        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        self._recording = recording or (lambda: True)
        for handle in (register_optimizer_step_pre_hook(self._step_starts), register_optimizer_step_post_hook(self._step_ends)):
            self._handles.append(handle)
            table = handle.hooks_dict_ref()
            if table is not None:
                self._step_hooks.append((table, handle.id, table[handle.id]))
        self._owner_thread = threading.get_ident()
        if entry is None and _compiled_anything():
            self.calls_skip = "torch.compile has compiled code in this process (noting these calls would make it compile again)"
            return
        if entry is not None:
            entry.listeners.append(self)
        self._mode = _make_mode(self)
        self._depth = self._torch._C._len_torch_function_stack()
        torch = self._torch
        for owner in (torch.optim.Optimizer, torch.nn.Module):
            unnoted = _Unnoted.install(owner, "zero_grad", self)
            if unnoted is not None:
                self._handles.append(unnoted)
                self._unnoted.append(unnoted)
        callbacks = sys.modules.get("torch._dynamo.callback")
        if callbacks is not None:
            with contextlib.suppress(Exception):
                self._handles.append(_Callback(callbacks.callback_handler, self._compile_starts))
        self._watched = entry is not None

    def begin(self) -> None:
        """The block starts (the session's last step: no call of torchprof's own is noted). With
        entries into compiled code watched, the mode goes on now: compiled code entered with it
        on takes it off first (a compiled model's own call takes it off in its hooks before), so
        calls before the block's first module call are noted too (an input normalised, a block
        with no module at all). Unwatched (no Dynamo imported: torch's profiler start imports
        it), it goes on only once the first root module call or optimizer step has returned: a
        frame compiled meanwhile would keep the mode stack it saw as a guard."""
        if self._watched:
            self.resume()

    def remove(self) -> None:
        """Stop noting; each part runs even if one fails, and can be repeated."""
        self._removed = True
        handles, self._handles = self._handles, []
        for handle in handles:
            with contextlib.suppress(Exception):
                handle.remove()
        self._pop()
        self._mode = None

    def _push(self) -> None:
        # Only onto the stack as the block found it: a mode entered since (a tracer's, inside
        # which a module returned) pops the top when it exits, which would be ours.
        if self._mode is not None and not self._on and self._torch._C._len_torch_function_stack() == self._depth:
            self._torch._C._push_on_torch_function_stack(self._mode)
            self._pushed = self._mode
            self._on = True

    def _pop(self) -> None:
        torch = self._torch
        if not self._on:
            return
        C = torch._C
        depth = C._len_torch_function_stack()
        if depth and C._get_function_stack_at(depth - 1) is self._pushed:
            C._pop_torch_function_stack()
            self._on = False
            return
        at = next((n for n in range(depth) if C._get_function_stack_at(n) is self._pushed), None)
        if at is None:
            # Inside our own mode's handler, where torch has taken it off for the call and puts
            # it back after: it comes off at the next root call, step or stop.
            return
        # The block's own mode sits above ours (``with torch.device(...)``): ours is taken from
        # under it, which stays where it is, so compiled code entered next finds the stack it was
        # compiled with; nothing more is noted.
        above = [C._pop_torch_function_stack() for _ in range(depth - 1 - at)]
        C._pop_torch_function_stack()
        for mode in reversed(above):
            C._push_on_torch_function_stack(mode)
        self._on = False
        self._give_up("a torch function mode of the block's own was entered above torchprof's")

    # -- while compiled code runs: our step hooks out of torch's tables ------------------------------
    # A compiled optimizer step (``torch.compile(opt.step)``) reads torch's global step-hook tables:
    # with our hooks in them Dynamo traced them and compiled new graphs. They are out of the tables
    # while any thread runs compiled code (see .compiled_entry); a step run meanwhile is not noted
    # (its FLOPs are then unknown: the replays fall short of the steps that ran). torch's own
    # zero_grad goes back in its place meanwhile too (compiled code may have looked it up).
    def compiled_code_starts(self, thread: int, first: bool) -> None:
        if self._removed:
            return
        if self._on and thread == self._owner_thread:
            # Compiled code entered outside every module with the mode on (a compiled function):
            # Dynamo would find it on the stack and compile again. It comes off (its graphs are
            # counted from their maps), back on once the next root call or step has returned.
            self._pop()
        if self._hooks_out:
            return
        self._hooks_out = True
        for table, key, _ in self._step_hooks:
            table.pop(key, None)
        for unnoted in self._unnoted:
            unnoted.put_back()

    def compiled_code_ends(self, thread: int, any_left: bool) -> None:
        if not self._hooks_out or any_left or self._removed:
            return
        self._hooks_out = False
        for table, key, hook in self._step_hooks:
            table[key] = hook
        for unnoted in self._unnoted:
            unnoted.take_over()

    def _give_up(self, why: str) -> None:
        if self.calls_skip is None:
            self.calls_skip = why

    def _compile_starts(self, *args: Any, **kwargs: Any) -> None:
        """Dynamo starts compiling: the mode goes for good, before the frame's guards are made."""
        import threading

        if self.calls_skip is None:
            self.calls_skip = "torch.compile compiled code during the block"
        if threading.get_ident() == self._owner_thread:
            self._pop()

    # -- suspended while a root module or an optimizer step runs ------------------------------------
    def suspend(self) -> None:
        """A root module starts (its calls are the module's, replayed with it)."""
        if self._on:
            self._pop()

    def resume(self) -> None:
        """A root module call or an optimizer step has returned (on the thread that profiles)."""
        if self._mode is not None and not self._on and self.calls_skip is None:
            import threading

            if threading.get_ident() == self._owner_thread:
                self._push()

    # -- optimizer steps ----------------------------------------------------------------------------
    def _step_starts(self, optimizer: Any, args: Any, kwargs: Any) -> tuple[Any, Any] | None:
        self.suspend()
        if not self._recording():
            return None
        try:
            closure = _closure_of(args, kwargs)
            if closure is None:
                self._note_step(optimizer, args, kwargs)
                return None
            # A closure (Lightning's, LBFGS's) computes the loss and the gradients inside the step:
            # its calls are noted as any outside call, and the step itself when it returns, when
            # the gradients it updated with exist.
            self._closure_steps[id(optimizer)] = optimizer
            return _with_closure(args, kwargs, self._closure_call(closure))
        except Exception as exc:  # noqa: BLE001 - our hook never raises into the user's step
            self._step_failed(optimizer, exc)
            return None

    def _step_ends(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self._closure_steps.pop(id(optimizer), None) is not None:
            try:
                self._note_step(optimizer, args[:1], {})
                if id(optimizer) in self._closure_compiled:
                    self.optimizers[id(optimizer)].skip = "its closure ran a compiled model (the step's own work is not told apart from its graphs)"
            except Exception as exc:  # noqa: BLE001 - our hook never raises into the user's step
                self._step_failed(optimizer, exc)
        self.resume()

    def compiled_root_ran(self) -> None:
        """A compiled model's root call: inside an optimizer's closure, the step's own work is not
        told apart from the compiled graphs around it, so the steps running are unknown."""
        for key in self._closure_steps:
            self._closure_compiled.add(key)

    def _step_failed(self, optimizer: Any, exc: Exception) -> None:
        calls = self.optimizers.get(id(optimizer))
        if calls is not None:
            calls.skip = f"torchprof could not read its state ({type(exc).__name__}: {_first_line(exc)})"

    def _closure_call(self, closure: Callable[..., Any]) -> Callable[..., Any]:
        """The user's closure, run with outside calls noted (the step's own work is not), inside
        a range of its own: the step's replay is its update only, matched to what is outside it."""

        record_function = self._torch.profiler.record_function

        def noted_closure(*args: Any, **kwargs: Any) -> Any:
            with record_function(OPTIMIZER_CLOSURE):
                self.resume()
                try:
                    return closure(*args, **kwargs)
                finally:
                    self.suspend()

        return noted_closure

    def _note_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        """What a step's replay needs: its hyper-parameters, and each parameter with a gradient,
        the gradient and the state, as specs (no data)."""
        calls = self.optimizers.get(id(optimizer))
        if calls is None:
            # (Two optimizers of a class, a GAN's, step in ranges of one name: their steps are
            # replayed as that range's distinct signatures, matched by how often each ran.)
            label = f"Optimizer.step#{type(optimizer).__name__}.step"
            calls = self.optimizers[id(optimizer)] = OptimizerCalls(optimizer, label)
        if calls.skip is not None:
            return
        if any(a is not None for a in args[1:]) or any(v is not None for v in kwargs.values()):
            calls.skip = "its step was given a closure (it runs the model again inside the step)"
            return
        tensor = self._torch.Tensor
        key: list[Any] = []
        groups = []
        state = optimizer.state
        empty: dict[str, Any] = {}
        for group in optimizer.param_groups:
            hyper = {k: v for k, v in group.items() if k != "params"}
            key.append(tuple((k, v if not isinstance(v, tensor) else ("tensor", tuple(v.shape))) for k, v in hyper.items()
                             if isinstance(v, (bool, int, float, str, type(None), tensor))))  # fmt: skip
            params = []
            for p in group["params"]:
                grad = p.grad
                if grad is None:
                    continue
                # (No lookup while the state is empty, as SGD's without momentum stays: each
                # costs a call of Tensor.__hash__.)
                st = state.get(p, empty) if state else empty
                key.append((id(p), p.shape, tuple(sorted(st))) if st else (id(p), p.shape))  # (a parameter resized between steps: another step)
                params.append((p, grad, st))
            groups.append((hyper, params))
        signature_key = tuple(key)
        sig = calls.signatures.get(signature_key)
        if sig is None:
            if len(calls.signatures) >= MAX_CALLS:
                calls.skip = f"more than {MAX_CALLS} distinct steps"
                return
            value, noted = self._state_value, self._param_noted
            made = [({k: v if type(v) in _KEYED else value(v) for k, v in hyper.items()},
                     [(*noted(p, grad), {k: value(v) for k, v in st.items()} if st else {}) for p, grad, st in params])
                    for hyper, params in groups]  # fmt: skip
            sig = calls.signatures[signature_key] = StepSignature(made)
        sig.count += 1
        step = self.step_of()
        sig.steps[step] = sig.steps.get(step, 0) + 1

    def _param_noted(self, p: Any, grad: Any) -> tuple[Any, Any]:
        """A parameter and its gradient as the replay needs them. A plain parameter's spec is made
        when the profile is read (a spec costs a microsecond, and a step has hundreds) from its
        sizes, dtype and device, kept now, and from what no change can alter, asked of the
        parameter then (its optimizer holds it). A plain gradient (strided, of torch's own tensor class) has its
        parameter's sizes, dtype and device (torch refuses any other), so its spec is the
        parameter's: None here. Anything else is specced now."""
        torch = self._torch
        if type(p) is torch.nn.Parameter:
            param: Any = _ParamNote(p, p.shape, p.dtype, p.device)
        else:
            param = self._spec_of(p)
        if type(grad) is torch.Tensor and grad.layout == torch.strided and isinstance(param, _ParamNote):
            return param, None
        return param, self._spec_of(grad)

    def _state_value(self, value: Any) -> Any:
        """A state or hyper-parameter value as the replay rebuilds it: a tensor's spec, a
        one-element tensor kept with its value, anything else as it is (dicts walked)."""
        torch = self._torch
        if isinstance(value, dict):
            return {k: self._state_value(v) for k, v in value.items()}
        if isinstance(value, torch.Tensor):
            # Only a scalar (a step count): a one-element buffer of a one-element parameter is that
            # parameter's state, on its device (a CPU copy of it beside meta tensors cannot run).
            if value.dim() == 0 and value.layout == torch.strided and not value.is_meta:
                return _Small(value)  # copied when replayed: nothing is allocated inside the user's step
            return self._spec_of(value)
        return value

    # -- calls outside every module -----------------------------------------------------------------
    def note_call(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        if self.calls_skip is not None or not self._recording():
            return
        torch = self._torch
        try:
            flat = self._flat_leaves
            if not kwargs and all(type(a) in flat for a in args):  # x.pow(2), x.sum(): no walk
                leaves, spec = list(args), _flat_spec(len(args))
                key: list[Any] = [func, len(args), torch.is_grad_enabled()]
            else:
                leaves, spec = self._flatten((tuple(args), kwargs))
                key = [func, str(spec), torch.is_grad_enabled()]
            kept: list[Any] = []
            for leaf in leaves:
                if isinstance(leaf, torch.Tensor):
                    ts = self._spec_of(leaf)
                    key.append(ts)
                    kept.append(ts)
                else:
                    key.append((type(leaf), leaf) if isinstance(leaf, (bool, int, float, str, type(None))) else (type(leaf), id(leaf)))
                    kept.append(leaf)
            autocast = tuple((dt, torch.get_autocast_dtype(dt)) for dt in ("cpu", "cuda") if torch.is_autocast_enabled(dt))
            anomaly = torch.is_anomaly_enabled() and torch.is_anomaly_check_nan_enabled()
            key += (autocast, anomaly)
            sig = self.calls.get(tuple(key))
            if sig is None:
                if len(self.calls) >= MAX_CALLS:
                    self.calls_skip = f"more than {MAX_CALLS} distinct calls outside modules"
                    return
                sig = self.calls[tuple(key)] = CallSignature(func, spec, kept, bool(key[2]), autocast, anomaly=anomaly)
            sig.count += 1
            step = self.step_of()
            sig.steps[step] = sig.steps.get(step, 0) + 1
            if sig.grad:
                for n, t in enumerate(output_tensors(out, torch.Tensor, torch.nn.Module)):
                    if t.requires_grad and n not in sig.grad_outputs:
                        self._handles.append(t.register_hook(_Reached(sig.grad_outputs, n)))
        except _Unreplayable as why:
            self.calls_skip = f"a call of {getattr(func, '__name__', func)} outside modules: {why}"
        except Exception as exc:  # noqa: BLE001 - our mode never raises into the user's code
            self.calls_skip = f"torchprof could not read a call outside modules ({type(exc).__name__}: {_first_line(exc)})"


class _Unnoted:
    """A torch method run with the mode off while a Profiler notes calls outside modules:
    ``zero_grad``, whose gradient reads and writes cost nothing and would each go through the
    mode (about a microsecond each, two per parameter: a 100-parameter ``zero_grad`` read 925 µs
    over three steps, against 131 µs without FLOPs). torch's own method goes back at the stop, and
    while any thread runs compiled code (:meth:`OutsideRecorder.compiled_code_starts`)."""

    def __init__(self, owner: type, name: str, original: Any, ours: Any) -> None:
        self._owner, self._name, self._original, self._ours = owner, name, original, ours

    @staticmethod
    def install(owner: type, name: str, recorder: OutsideRecorder) -> _Unnoted | None:
        import threading

        original = owner.__dict__.get(name)
        if original is None or getattr(original, "torchprof_unnoted", False):
            return None
        get_ident = threading.get_ident

        def unnoted(*args: Any, **kwargs: Any) -> Any:
            if not (recorder._on and get_ident() == recorder._owner_thread):
                return original(*args, **kwargs)
            recorder.suspend()
            try:
                return original(*args, **kwargs)
            finally:
                recorder.resume()

        # What functools.wraps sets that a caller reads (accelerate asks zero_grad's signature,
        # which inspect finds through __wrapped__), at a fraction of its cost per Profiler.
        unnoted.__wrapped__ = original  # type: ignore[attr-defined]
        unnoted.__name__, unnoted.__qualname__ = original.__name__, original.__qualname__
        unnoted.__doc__, unnoted.__module__ = original.__doc__, original.__module__
        unnoted.torchprof_unnoted = True  # type: ignore[attr-defined]
        setattr(owner, name, unnoted)
        return _Unnoted(owner, name, original, unnoted)

    def put_back(self) -> None:
        if self._owner.__dict__.get(self._name) is self._ours:
            setattr(self._owner, self._name, self._original)

    def take_over(self) -> None:
        if self._ours is not None and self._owner.__dict__.get(self._name) is self._original:
            setattr(self._owner, self._name, self._ours)

    def remove(self) -> None:
        self.put_back()
        self._ours = None  # (take_over after the stop finds nothing to put in)


class _Callback:
    """A Dynamo compile-start callback, removable like a hook handle."""

    def __init__(self, handler: Any, fn: Callable[..., None]) -> None:
        self._handler, self._fn = handler, fn
        handler.register_start_callback(fn)

    def remove(self) -> None:
        with contextlib.suppress(Exception):
            self._handler.remove_start_callback(self._fn)


def _closure_of(args: Any, kwargs: Any) -> Any:
    """The closure an ``optimizer.step`` call was given (``args`` holds the optimizer first), or None."""
    if len(args) > 1 and args[1] is not None:
        return args[1]
    return kwargs.get("closure")


def _with_closure(args: Any, kwargs: Any, closure: Any) -> tuple[Any, Any]:
    """The step's arguments with ``closure`` in place of the one it was given."""
    if len(args) > 1 and args[1] is not None:
        return (args[0], closure, *args[2:]), kwargs
    return args, {**kwargs, "closure": closure}


def _compiled_anything() -> bool:
    """Whether Dynamo holds compiled code in this process (the code objects it compiled, kept
    until ``torch._dynamo.reset()``)."""
    convert_frame = sys.modules.get("torch._dynamo.convert_frame")
    if convert_frame is None:
        return False
    try:
        return bool(convert_frame.input_codes.seen)
    except Exception:  # noqa: BLE001 - a Dynamo laid out otherwise: assume it compiled
        return True


#: Calls never noted: what reads or formats values, runs backward (its ops are the modules'),
#: or only asks about a tensor (attributes).
_NOT_NOTED = frozenset({
    "backward", "grad", "item", "tolist", "numpy", "__repr__", "__format__", "__str__", "__bool__", "__len__",
    "__iter__", "__get__", "__set__", "__contains__", "__hash__", "__reduce_ex__", "__deepcopy__", "size", "dim",
    "numel", "stride", "data_ptr", "is_contiguous", "element_size", "__array__", "__dlpack__", "register_hook",
    "requires_grad_", "retain_grad", "untyped_storage", "storage", "_version", "is_floating_point", "is_complex",
    # moves between devices: no arithmetic, and a data-free tensor has nothing to move
    "to", "cuda", "cpu", "pin_memory", "share_memory_", "record_stream",
    # the profiler's own ranges (record_function around zero_grad and step)
    "_record_function_enter", "_record_function_enter_new", "_record_function_exit",
    "_record_function_exit._RecordFunction",
})  # fmt: skip


def _make_mode(recorder: OutsideRecorder) -> Any:
    if not _MODE:  # the class made once (making a class costs more than a short profiled step's calls)
        from torch.overrides import TorchFunctionMode

        class OutsideModules(TorchFunctionMode):
            """Notes each torch call outside every module (the call itself runs unchanged; inside
            it, this mode is off, so what the call does in turn is not noted)."""

            def __init__(self, recorder: OutsideRecorder) -> None:
                super().__init__()
                self.recorder = recorder

            def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                kwargs = kwargs or {}
                out = func(*args, **kwargs)
                if getattr(func, "__name__", "") not in _NOT_NOTED:
                    self.recorder.note_call(func, args, kwargs, out)
                return out

        _MODE.append(OutsideModules)
    return _MODE[0](recorder)


_MODE: list[Any] = []


# -- replays ------------------------------------------------------------------------------------------
def replay_outside(recorder: OutsideRecorder, session_type: Any, options_type: Any, fake: bool = False,
                   recursion_limit: int = 0, steps: set[str] | None = None, calls: bool = True) -> list[ReplayRun]:
    """Each distinct optimizer step (of the optimizers whose ranges ``steps`` names; None: all)
    and, with ``calls``, each call outside modules, run again on data-free tensors under a
    shape-recording profile (see :func:`torchprof._capture.replay.replay`)."""
    runs: list[ReplayRun] = []
    wanted = [c for c in recorder.optimizers.values() if steps is None or c.label in steps]
    if not wanted and not (calls and (recorder.calls or recorder.calls_skip)):
        return runs
    numbered: dict[str, int] = {}  # signatures per range name so far: optimizers of a class share one
    with _replay_environment(recursion_limit):
        for calls_of in wanted:
            if calls_of.skip is not None:
                runs.append(ReplayRun(path=calls_of.label, count=0, error=calls_of.skip, kind="region"))
                continue
            first = numbered.get(calls_of.label, 0)
            for n, sig in enumerate(calls_of.signatures.values(), start=first):
                run = _replay_step(calls_of, sig, _Tensors(fake), session_type, options_type, recorder._spec_of)
                run.signature, run.steps = n, _per_step(sig.steps)
                runs.append(run)
            numbered[calls_of.label] = first + len(calls_of.signatures)
        if not calls:
            return runs
        if recorder.calls_skip is not None:
            runs.append(ReplayRun(path=OUTSIDE, count=0, error=recorder.calls_skip, kind="outside"))
        elif recorder.calls:
            runs += _replay_calls(list(recorder.calls.values()), fake, session_type, options_type)
    return runs


#: Calls outside modules replayed in one profile at most (each as often as it ran).
_ONE_PROFILE = 256


def _replay_calls(calls: list[CallSignature], fake: bool, session_type: Any, options_type: Any) -> list[ReplayRun]:
    """The calls outside modules, each as often as it ran, in one shape-recording profile (a
    profile of its own costs more than most calls); where that fails, one profile per call,
    so one call that cannot be replayed leaves the others known."""
    anomaly = {call.anomaly for call in calls}
    if sum(call.count for call in calls) <= _ONE_PROFILE and all(_per_step(call.steps) is None for call in calls) and len(anomaly) == 1:
        tensors = _Tensors(fake)
        plan = [(call, made) for call in calls for made in _inputs(call, tensors, call.count)]

        def all_calls() -> None:
            for call, (args, kwargs) in plan:
                _call(call, args, kwargs, tensors)

        together = _run(OUTSIDE, 1, "outside", all_calls, tensors, session_type, options_type, anomaly.pop())
        if together.error is None:
            return [together]
    runs = []
    for n, call in enumerate(calls):
        tensors = _Tensors(fake)
        ((args, kwargs),) = _inputs(call, tensors, 1)
        run = _run(OUTSIDE, call.count, "outside", functools.partial(_call, call, args, kwargs, tensors), tensors, session_type, options_type,
                   call.anomaly)  # fmt: skip
        run.signature, run.steps = n, _per_step(call.steps)
        runs.append(run)
    return runs


def _made(value: Any, tensors: _Tensors) -> Any:
    if isinstance(value, TensorSpec):
        return tensors.of(value)
    if isinstance(value, _Small):
        return value.value.detach().clone()
    if isinstance(value, dict):
        return {k: _made(v, tensors) for k, v in value.items()}
    return value


#: Optimizers whose single-tensor step runs the same ops for each parameter, one after another.
_PER_PARAMETER = frozenset({"SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam", "ASGD", "Adadelta", "Rprop"})
#: The range around each kind of parameter's step in such a replay (see ``ReplayRun.classes``).
KIND_RANGE = "torchprof: parameters of one kind #"


def _one_at_a_time(real: Any) -> bool:
    """Whether ``real`` steps each parameter on its own (its single-tensor implementation):
    then one parameter of each kind (sizes, dtypes, state) stands for all of that kind."""
    if type(real).__name__ not in _PER_PARAMETER:
        return False
    from torch.optim.optimizer import _default_to_fused_or_foreach

    for group in real.param_groups:
        if group.get("fused") or group.get("foreach") or group.get("differentiable"):
            return False
        if group.get("foreach") is None and group.get("fused") is None:  # torch picks by device
            fused, foreach = _default_to_fused_or_foreach(list(group["params"]), differentiable=False, use_fused=False)
            if fused or foreach:
                return False
    return True


def _kind_key(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _kind_key(v)) for k, v in value.items()))
    if isinstance(value, _Small):
        return ("small", value.value.dtype, tuple(value.value.shape))
    return value if isinstance(value, (TensorSpec, bool, int, float, str, type(None))) else type(value)


def _optimizer_like(real: Any, groups: list[dict[str, Any]], opt_state: dict[Any, Any]) -> Any:
    """A copy of optimizer ``real`` over these data-free groups and state, with no hooks and
    without an instance's own ``step`` (a scheduler's wrapper of the real one's)."""
    from collections import defaultdict

    cls: Any = type(real)
    opt = cls.__new__(cls)
    state = dict(real.__dict__)
    for name in ("param_groups", "state", "step", "zero_grad"):
        state.pop(name, None)
    opt.__dict__.update(copy.copy(state))
    opt.defaults = dict(real.defaults)
    for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks", "_optimizer_state_dict_pre_hooks",
                 "_optimizer_state_dict_post_hooks", "_optimizer_load_state_dict_pre_hooks",
                 "_optimizer_load_state_dict_post_hooks"):  # fmt: skip
        if name in real.__dict__:
            setattr(opt, name, type(real.__dict__[name])())
    opt.param_groups = groups
    opt.state = defaultdict(dict, opt_state)
    return opt


def _replay_step(calls: OptimizerCalls, sig: StepSignature, tensors: _Tensors, session_type: Any, options_type: Any,
                 spec_of: Callable[[Any], TensorSpec]) -> ReplayRun:  # fmt: skip
    import torch
    from torch._C._profiler import _RecordFunctionFast

    real = calls.optimizer
    try:
        sig_groups = [(hyper, [(*_param_specs(entry, spec_of), entry[2]) for entry in params]) for hyper, params in sig.groups]
    except Exception as exc:  # noqa: BLE001 - a parameter a data-free copy cannot stand for (_Unreplayable says which)
        return ReplayRun(path=calls.label, count=sig.count, error=f"torchprof could not read its state ({type(exc).__name__}: {_first_line(exc)})", kind="region")

    def param(entry: tuple[TensorSpec, TensorSpec, dict[str, Any]], opt_state: dict[Any, Any]) -> Any:
        p_spec, g_spec, st = entry
        p = torch.nn.Parameter(tensors.of(p_spec).detach(), requires_grad=p_spec.requires_grad)
        p.grad = tensors.of(g_spec).detach()
        if st:
            opt_state[p] = _made(st, tensors)
        return p

    try:
        if _one_at_a_time(real):
            # One parameter of each kind, each in a range of its own: a step over 200 parameters
            # of 30 kinds replays 30 parameters (the tree weighs each kind by how many it has).
            kinds: dict[tuple, list[Any]] = {}
            for g, (_, params) in enumerate(sig_groups):
                for entry in params:
                    key = (g, entry[0], entry[1], _kind_key(entry[2]))
                    kinds.setdefault(key, [g, entry, 0])[2] += 1
            steps = []
            for g, entry, _ in kinds.values():
                opt_state: dict[Any, Any] = {}
                hyper = sig_groups[g][0]
                steps.append(_optimizer_like(real, [{**_made(hyper, tensors), "params": [param(entry, opt_state)]}], opt_state))

            def body() -> None:
                for n, opt in enumerate(steps):
                    with _RecordFunctionFast(f"{KIND_RANGE}{n}"):
                        opt.step()

            run = _run(calls.label, sig.count, "region", body, tensors, session_type, options_type)
            run.classes = [(f"{KIND_RANGE}{n}", kind[2]) for n, kind in enumerate(kinds.values())]
            return run
        groups: list[dict[str, Any]] = []
        opt_state = {}
        for hyper, params in sig_groups:
            groups.append({**_made(hyper, tensors), "params": [param(entry, opt_state) for entry in params]})
        opt = _optimizer_like(real, groups, opt_state)
    except Exception as exc:  # noqa: BLE001 - an optimizer that cannot be rebuilt without data
        return ReplayRun(path=calls.label, count=sig.count, error=f"it could not be copied without its data ({type(exc).__name__}: {_first_line(exc)})", kind="region")
    return _run(calls.label, sig.count, "region", opt.step, tensors, session_type, options_type)


def _inputs(call: CallSignature, tensors: _Tensors, times: int) -> list[tuple[Any, Any]]:
    """Data-free arguments for ``times`` calls (made before the profile starts)."""
    from torch.utils import _pytree

    out = []
    for _ in range(times):
        leaves = [tensors.of(v) if isinstance(v, TensorSpec) else v for v in call.leaves]
        out.append(_pytree.tree_unflatten(leaves, call.spec))
    return out


def _call(call: CallSignature, args: Any, kwargs: Any, tensors: _Tensors) -> None:
    """One call as it ran (grad mode, autocast), then the backward a gradient reached."""
    import torch

    with contextlib.ExitStack() as modes:
        modes.enter_context(torch.set_grad_enabled(call.grad))
        for device_type, dtype in call.autocast:
            modes.enter_context(torch.autocast(device_type, dtype=dtype))
        out = call.func(*args, **kwargs)
    if call.grad_outputs:
        found = output_tensors(out, torch.Tensor, torch.nn.Module)
        outs = _backward_roots([t for n, t in enumerate(found) if n in call.grad_outputs and t.requires_grad and t.grad_fn is not None])
        if outs:
            torch.autograd.backward(outs, [torch.ones_like(t) for t in outs], inputs=tensors.made_by(args, kwargs) or None)


def _run(path: str, count: int, kind: str, body: Callable[[], None], tensors: _Tensors, session_type: Any, options_type: Any,
         anomaly: bool = False) -> ReplayRun:  # fmt: skip
    """``body`` under a shape-recording session of its own, the user's state kept; with
    ``anomaly``, in anomaly mode as the calls ran (its NaN checks answered "none": a tensor
    without data has none)."""
    import torch

    session = session_type(options_type(shapes=True, flops=True, replay=True), lambda *_: None)
    session.keeps_trace = False
    error: str | None = None
    with _user_state_kept():
        started = False
        try:
            session.start()
            started = True
            with tensors.active(None, anomaly), torch.autograd.set_detect_anomaly(anomaly, check_nan=anomaly):
                body()
        except Exception as exc:  # noqa: BLE001 - needs real values, or cannot run now: FLOPs unknown, said why
            error = (f"it cannot run without real data ({type(exc).__name__}: {_first_line(exc)}{_where(exc)})" if started
                     else f"it could not be replayed now ({exc})")  # fmt: skip
        finally:
            try:
                session.stop()
            finally:
                session.release_interrupts()
    if error is not None:
        return ReplayRun(path=path, count=count, error=error, kind=kind)
    return ReplayRun(path=path, count=count, events=session.cycle_columns(), modules=dict(session.modules), kind=kind)
