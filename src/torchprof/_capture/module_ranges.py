"""The module-range hooks: every ``nn.Module`` call wrapped in a named profiler range.

The range name carries the module's path and class (``nn.Module: ResNet.layer1.0.conv1 [Conv2d]``),
so the trace alone says which layer issued each op, in our tree and in Perfetto alike. The hooks
themselves are :mod:`~torchprof._capture.global_hooks`' pair; the names come from
:mod:`~torchprof._capture.module_names`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .._records import ModuleInfo
from . import compiled_calls, global_hooks
from .call_args import recordable
from .interrupts import run_all
from .module_names import ModuleNames
from .thread_stacks import CallStack, every_thread_recorded, recorded_where_started

if TYPE_CHECKING:
    import torch

    from .compiled_entry import CompiledEntry


class ModuleTracker:
    """Installs the hooks, opens and closes a range around each module call, and always takes the
    hooks away again.

    Modules are named by path (:class:`~torchprof._capture.module_names.ModuleNames`). Each thread
    keeps its own stack of open calls (a forward pass on a worker thread nests within itself), and
    counts its module calls, so a profile that lacks them can say so.
    """

    def __init__(
        self,
        model: torch.nn.Module | None = None,
        labels: Mapping[Any, str] | Callable[[Any], str | None] | None = None,
        record_inputs: bool = False,
    ) -> None:
        self.model = model
        self.names = ModuleNames(labels, record_inputs)
        self._named = self.names.cache  # read on every call: one attribute lookup less
        self.only: set[int] | None = None
        if model is not None:
            self.names.graph.add(model)
            self.only = set(self.names.graph.modules)
        self.record_inputs = record_inputs
        self._local = threading.local()
        self._stacks: list[CallStack] = []  # every thread's, for the calls each made
        self._thread_recorded: Callable[[], bool | None] = every_thread_recorded
        self._kinds: dict[int, bool] = {}  # id(module) -> transparent (machinery, not a layer)
        self._transparent_ids: set[int] = set()
        self._unwrapped: dict[int, Any] = {}  # id(torch.compile wrapper) -> the model it wraps
        self._keep: list[Any] = []
        self.faults = 0
        """Calls in which torchprof's own hook code failed (:meth:`fault`)."""
        self.first_fault: str | None = None
        self.paused = False
        """Out of torch's tables for a schedule's idle steps (show() keeps them out)."""
        self._hiding: set[int] = set()  # threads in compiled code the hooks stay out of the tables for
        self._owner = threading.get_ident()  # the thread that profiles (set again at install)
        self._graph_module = _graph_module()
        self.autocast: set[Any] = set()
        """The dtypes of the autocast contexts root calls ran in (what the model computed in)."""
        self._autocast_on: Any = None
        if model is not None:
            self.names.add_root(model)

    @property
    def problems(self) -> list[str]:
        """What went wrong naming modules (a labels= callable that raised), for the profile's warnings."""
        return self.names.problems

    # -- install / remove ---------------------------------------------------------------------
    def install(self, every_thread: bool = True, entry: CompiledEntry | None = None) -> None:
        """Install the hooks. ``every_thread``: torch's profiler records module ranges on every
        thread; otherwise only where it runs, which each thread asks on its first module call.
        ``entry``: the session's watch of compiled code (the hooks stay out of torch's tables
        while compiled code runs)."""
        import torch
        from torch._C._profiler import _RecordFunctionFast

        self._range = _RecordFunctionFast
        self._owner = threading.get_ident()
        self._tensor = torch.Tensor
        self._functorch_level = torch._C._functorch.maybe_current_level
        self._autocast_on, self._autocast_dtype = torch.is_autocast_enabled, torch.get_autocast_dtype
        if not every_thread:
            self._thread_recorded = recorded_where_started()
        hooks = global_hooks.GLOBAL_HOOKS
        try:
            hooks.attach(self)
            compiled_calls.attach(hooks)
            if entry is not None:
                entry.listeners.append(self)
        except BaseException:
            run_all([self.remove, self.scrub])
            raise

    def remove(self) -> None:
        """Remove the hooks and close any range left open (a module that raised mid-forward).

        Every part runs even if one before it was interrupted; each can be repeated."""
        run_all(
            [
                compiled_calls.detach,
                lambda: global_hooks.GLOBAL_HOOKS.detach(self),
                self._close_open_ranges,
                self.names.collect,
            ]
        )

    def _close_open_ranges(self) -> None:
        stack = getattr(self._local, "stack", None)
        while stack:
            stack.pop()[2].__exit__(None, None, None)

    def scrub(self) -> None:
        """Take torchprof's hooks out of torch's tables even where their ids were lost (an
        interrupt between torch registering a hook and the id being kept). Not while another
        tracker holds them (a stop resumed after another Profiler started)."""
        hooks = global_hooks.GLOBAL_HOOKS
        if hooks.owner not in (None, self):
            return
        hooks.scrub()
        if hooks.owner is self:
            hooks.owner = None

    @property
    def installed(self) -> bool:
        return global_hooks.GLOBAL_HOOKS.owner is self

    def hide(self) -> None:
        """Take the hooks out of torch's global tables while Dynamo compiles (see GlobalHooks)."""
        if global_hooks.GLOBAL_HOOKS.owner is self:
            global_hooks.GLOBAL_HOOKS.hide()

    def show(self) -> None:
        if global_hooks.GLOBAL_HOOKS.owner is self and not self.paused and not self._hiding:
            global_hooks.GLOBAL_HOOKS.show()

    # Compiled code guards on the global hook tables wherever Dynamo inlined a module's _call_impl
    # (a module called inside a compiled function, where it could not treat it as a layer: a
    # Lightning module's compiled forward inside its compiled training_step): with our hooks in
    # them, every call compiled again. They are out of the tables while a thread runs compiled
    # code it entered other than through a torch.compile'd model's own call (whose layers are
    # called inside its graphs, and whose graph breaks' eager module calls keep their ranges);
    # module calls run eagerly meanwhile (a compiled function's graph breaks) get no range. Only
    # on the thread that profiles, and while no other thread has called a module in the block:
    # the tables are every thread's.
    def compiled_code_starts(self, thread: int, first: bool) -> None:
        if not first or thread != self._owner:
            return  # (compiled code on another thread: the tables stay as they are)
        stack = getattr(self._local, "stack", None)
        if stack and id(stack[-1][0]) in self.names.wrapper_of:
            return  # a torch.compile'd model's call: its hooks ran, its range is open
        if any(other.calls for other in list(self._stacks) if other is not stack):
            return  # another thread calls modules: out of the tables, their calls would go unseen
        self._hiding.add(thread)
        self.hide()

    def compiled_code_ends(self, thread: int, any_left: bool) -> None:
        if thread in self._hiding:
            self._hiding.discard(thread)
            self.show()

    def pause(self) -> bool:
        """Take the hooks out while nothing is recorded (a schedule's idle steps), so module calls
        then cost what they cost without torchprof. Refused (False) while a module call is open
        on any thread: its exit hook must still run to close its range."""
        if any(self._stacks):
            return False
        self.paused = True
        self.hide()
        return True

    def resume(self) -> None:
        """Put the hooks back after :meth:`pause`."""
        self.paused = False
        self.show()

    # -- the hooks (hot path) -----------------------------------------------------------------
    def enter(self, module: Any, args: Any) -> None:
        """The pre-hook: open ``module``'s range."""
        if self._transparent(module):
            return
        module = self._unwrapped.get(id(module), module)
        if self.only is not None and id(module) not in self.only:
            return
        try:
            stack = self._local.stack
        except AttributeError:
            stack = self._new_stack()
        if stack and stack[-1][0] is module:
            # torch.compile's wrapper opened this model's range already; its own hooks fire
            # inside only when it was compiled under them: one range, not two.
            stack[-1][3] += 1
            return
        parent = stack[-1][0] if stack else None
        key = (id(parent), id(module))
        named = self._named.get(key)
        if named is None:
            with self.names.lock:  # two threads meeting a new root at once must not label it twice
                try:
                    named = self._named.get(key) or self.names.name(module, stack, args)
                except Exception as exc:  # noqa: BLE001 - our hooks never raise into the user's forward
                    self.names.unnamed(module, exc)
                    return
        if not stack:
            if self._functorch_level() is not None:
                self.names.transformed.add(named[0])
            self._note_autocast()
        rf = self._range(named[1], recordable(args, self._tensor)) if self.record_inputs else self._range(named[1])
        rf.__enter__()
        stack.append([module, named[0], rf, 0])
        stack.calls += 1  # counted once its range is open: what the profile can hold

    def _note_autocast(self) -> None:
        """The autocast contexts a root call runs in: the dtype the model computes in (MFU)."""
        try:
            for device in ("cuda", "cpu"):
                if self._autocast_on(device):
                    self.autocast.add(self._autocast_dtype(device))
        except (TypeError, RuntimeError):  # a torch whose autocast queries take no device: the parameters' dtype is used
            pass

    def _new_stack(self) -> CallStack:
        stack = self._local.stack = CallStack(threading.current_thread().name, self._thread_recorded())
        self._stacks.append(stack)
        return stack

    def leave(self, module: Any, args: Any, output: Any) -> None:
        """The post-hook: close ``module``'s range (and those a raising child left open)."""
        if id(module) in self._transparent_ids:
            return
        module = self._unwrapped.get(id(module), module)
        if self.only is not None and id(module) not in self.only:
            return
        stack = getattr(self._local, "stack", None)
        if not stack:
            return
        if stack[-1][0] is module and stack[-1][3]:
            stack[-1][3] -= 1
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

    def _transparent(self, module: Any) -> bool:
        """Modules that are machinery, not layers, get no range: the FX graph modules a compiler
        backend runs (unless the user made one a root themselves). ``torch.compile``'s wrapper
        (``OptimizedModule``) stands for the model it wraps: its range is the model's (the model's
        own hooks do not fire inside a frame compiled before the hooks were installed)."""
        known = self._kinds.get(id(module))
        if known is None:
            known = False
            if type(module).__name__ == "OptimizedModule" and hasattr(module, "_orig_mod"):
                self._unwrapped[id(module)] = module._orig_mod
                self.names.wrapper_of[id(module._orig_mod)] = module
                self._keep.append(module)  # holding it keeps its id unique
            elif (
                isinstance(module, self._graph_module)
                and id(module) not in self.names.roots_by_id
                and self.names.label(module) is None
                and not _exported(module)
            ):  # a torch.export'ed program the user runs is their model
                known = True
                self._transparent_ids.add(id(module))
                self._keep.append(module)
            self._kinds[id(module)] = known
        return known

    def fault(self, module: Any, exc: Exception) -> None:
        """Note a failure of torchprof's own hook code (the user's forward runs on regardless):
        the first is kept for the warning; FLOPs of the run become unknown."""
        self.faults += 1
        if self.first_fault is None:
            self.first_fault = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''} (in a call of {type(module).__name__})"

    def thread_calls(self) -> list[tuple[str, int, bool | None]]:
        """``(thread name, module calls, recorded by torch)`` for each thread that called a
        module; ``recorded`` is None where torch's profiler records every thread."""
        return [(s.name, s.calls, s.recorded) for s in list(self._stacks)]

    def roots(self) -> list[tuple[Any, str]]:
        """The root modules seen so far and their labels (the first part of their paths)."""
        return self.names.roots()

    def collect(self, submodules: bool = False) -> dict[str, ModuleInfo]:
        """Module facts gathered so far (see :meth:`ModuleNames.collect`)."""
        return self.names.collect(submodules)


def _exported(module: Any) -> bool:
    """A module ``torch.export`` made (``ExportedProgram.module()``): the user's model, not a
    compiler's graph."""
    return any(cls.__name__ == "_StatefulGraphModule" for cls in type(module).__mro__)


def _graph_module() -> Any:
    """``torch.fx.GraphModule``, imported once (an import statement per Profiler costs more than
    the rest of a tracker's set-up)."""
    if not _GRAPH_MODULE:
        from torch.fx import GraphModule

        _GRAPH_MODULE.append(GraphModule)
    return _GRAPH_MODULE[0]


_GRAPH_MODULE: list[Any] = []
