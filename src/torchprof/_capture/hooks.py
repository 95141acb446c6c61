"""Global ``nn.Module`` forward hooks that wrap every module call in a named profiler range.

The range name carries the module's path and class (``nn.Module: ResNet.layer1.0.conv1 [Conv2d]``),
so the trace alone says which layer issued each op, in our tree and in Perfetto alike.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from .._records import ModuleInfo, module_range_name, safe_text
from . import compiled_calls
from .interrupts import run_all
from .replay import PASS_THROUGH

if TYPE_CHECKING:
    import torch

    from .replay import CallRecorder


class _Stack(list):
    """One thread's open module calls, and how many module calls that thread made."""

    __slots__ = ("calls", "name", "recorded")

    def __init__(self, name: str, recorded: bool | None) -> None:
        super().__init__()
        self.calls = 0
        self.name = name
        self.recorded = recorded
        """Whether torch's profiler records this thread: None where it records every thread."""


class ModuleTracker:
    """Installs the hooks, names module calls by path, and always takes the hooks away again.

    Paths follow ``named_modules()``: a module is named relative to the innermost module being
    run that contains it (so a module shared by two parents appears under the one that called
    it); a module with no running ancestor is named relative to a known root, and otherwise
    becomes a root itself, labelled by ``labels`` (e.g. its variable name) or its class name
    (``Linear``, then ``Linear#2`` for another root of that class).

    Cost: each distinct (caller, module) pair is named once, then looked up in O(1). Naming
    reads the :class:`ModuleGraph`'s parent links, so a module that its caller holds as a
    child or grandchild is named in O(1) however deep or wide the model is.

    Each thread keeps its own stack of open calls (a forward pass on a worker thread nests
    within itself), and counts its module calls, so a profile that lacks them can say so.
    """

    def __init__(
        self,
        model: torch.nn.Module | None = None,
        labels: Mapping[Any, str] | Callable[[Any], str | None] | None = None,
        record_inputs: bool = False,
        calls: CallRecorder | None = None,
        counts: bool = True,
    ) -> None:
        self.model = model
        self.counts = counts
        """Count each module's parameters (a replay's modules, never shown, are not counted)."""
        self.calls = calls
        """Notes the arguments of root module calls, for FLOPs counted by a replay."""
        self._graph = ModuleGraph()
        self.only: set[int] | None = None
        if model is not None:
            self._graph.add(model)
            self.only = set(self._graph.modules)
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
        self._stacks: list[_Stack] = []  # every thread's, for the calls each made
        self._naming = threading.RLock()  # naming a new (parent, module) pair, from any thread
        self._thread_recorded: Callable[[], bool | None] = lambda: None
        self._names: dict[tuple[int, int], tuple[str, str]] = {}  # (id(caller), id(module)) -> (path, range name)
        # id(root) -> (root, label, order added); holding the root keeps its id unique
        self._roots: dict[int, tuple[Any, str, int]] = {}
        self._taken: set[str] = set()  # root labels in use
        self._op_args: dict[str, dict[str, Any] | None] = {}
        self._input_shapes: dict[str, list] = {}
        self._kinds: dict[int, bool] = {}  # id(module) -> transparent (machinery, not a layer)
        self._transparent_ids: set[int] = set()
        self._wrapper_of: dict[int, Any] = {}  # id(model) -> the torch.compile wrapper around it
        self._unwrapped: dict[int, Any] = {}  # id(torch.compile wrapper) -> the model it wraps
        self._keep: list[Any] = []
        self.faults = 0
        """Calls in which torchprof's own hook code failed (:meth:`fault`)."""
        self._transformed: set[str] = set()  # root paths called inside a torch.func transform
        self.first_fault: str | None = None
        self.problems: list[str] = []
        """What went wrong naming modules (a labels= callable that raised), for the profile's warnings."""
        self._paused = False  # out of torch's tables for a schedule's idle steps (show() keeps them out)
        from torch.fx import GraphModule

        self._graph_module = GraphModule
        if model is not None:
            self._add_root(model)

    # -- install / remove ---------------------------------------------------------------------
    def install(self, every_thread: bool = True) -> None:
        """Install the hooks. ``every_thread``: torch's profiler records module ranges on every
        thread; otherwise only where it runs, which each thread asks on its first module call."""
        import torch
        from torch._C._profiler import _RecordFunctionFast

        self._range = _RecordFunctionFast
        self._tensor = torch.Tensor
        self._functorch_level = torch._C._functorch.maybe_current_level
        if not every_thread:
            starter = threading.get_ident()
            enabled = torch._C._autograd._profiler_enabled

            def recorded() -> bool | None:
                if threading.get_ident() == starter:
                    return True
                if isinstance(threading.current_thread(), threading._DummyThread):
                    return None  # a thread Python did not start (autograd's, torch's pools): torch hands its state to those
                return enabled()

            self._thread_recorded = recorded
        try:
            _GLOBAL_HOOKS.attach(self)
            compiled_calls.attach(_GLOBAL_HOOKS)
        except BaseException:
            run_all([self.remove, self.scrub])
            raise

    def remove(self) -> None:
        """Remove the hooks and close any range left open (a module that raised mid-forward).

        Every part runs even if one before it was interrupted; each can be repeated."""
        run_all([compiled_calls.detach, lambda: _GLOBAL_HOOKS.detach(self), self._close_open_ranges, self._collect_infos,
                 lambda: self.calls.remove_hooks() if self.calls is not None else None])

    def _close_open_ranges(self) -> None:
        stack = getattr(self._local, "stack", None)
        while stack:
            stack.pop()[2].__exit__(None, None, None)

    def scrub(self) -> None:
        """Take torchprof's hooks out of torch's tables even where their ids were lost (an
        interrupt between torch registering a hook and the id being kept). Not while another
        tracker holds them (a stop resumed after another Profiler started)."""
        if _GLOBAL_HOOKS.owner not in (None, self):
            return
        _GLOBAL_HOOKS.scrub()
        if _GLOBAL_HOOKS.owner is self:
            _GLOBAL_HOOKS.owner = None

    @property
    def installed(self) -> bool:
        return _GLOBAL_HOOKS.owner is self

    def hide(self) -> None:
        """Take the hooks out of torch's global tables while Dynamo compiles (see GlobalHooks)."""
        if _GLOBAL_HOOKS.owner is self:
            _GLOBAL_HOOKS.hide()

    def show(self) -> None:
        if _GLOBAL_HOOKS.owner is self and not self._paused:
            _GLOBAL_HOOKS.show()

    def pause(self) -> bool:
        """Take the hooks out while nothing is recorded (a schedule's idle steps), so module calls
        then cost what they cost without torchprof. Refused (False) while a module call is open
        on any thread: its exit hook must still run to close its range."""
        if any(self._stacks):
            return False
        self._paused = True
        self.hide()
        return True

    def resume(self) -> None:
        """Put the hooks back after :meth:`pause`."""
        self._paused = False
        self.show()

    # -- the hooks (hot path) -----------------------------------------------------------------
    def _enter(self, module: Any, args: Any) -> None:
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
        named = self._names.get(key)
        if named is None:
            with self._naming:  # two threads meeting a new root at once must not label it twice
                try:
                    named = self._names.get(key) or self._name(module, stack, args)
                except Exception as exc:  # noqa: BLE001 - our hooks never raise into the user's forward
                    self._unnamed(module, exc)
                    return
        sig = None
        if not stack and self._functorch_level() is not None:
            self._transformed.add(named[0])
        if self.calls is not None and (not stack or stack[-1][4] is PASS_THROUGH):
            if not stack:
                self.calls.root_starts()
            compiled = id(module) in self._wrapper_of or module.__dict__.get("_compiled_call_impl") is not None
            sig = self.calls.root_call(module, named[0], args, compiled)
        rf = self._range(named[1], recordable(args, self._tensor)) if self.record_inputs else self._range(named[1])
        rf.__enter__()
        stack.append([module, named[0], rf, 0, sig])
        stack.calls += 1  # counted once its range is open: what the profile can hold

    def _new_stack(self) -> _Stack:
        stack = self._local.stack = _Stack(threading.current_thread().name, self._thread_recorded())
        self._stacks.append(stack)
        return stack

    def _exit(self, module: Any, args: Any, output: Any) -> None:
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
                if entry[4] is not None and entry[4] is not PASS_THROUGH and self.calls is not None:
                    self.calls.root_output(entry[4], output)
                break
        if not stack and self.calls is not None:
            self.calls.root_ends()

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
                self._wrapper_of[id(module._orig_mod)] = module
                self._keep.append(module)  # holding it keeps its id unique
            elif isinstance(module, self._graph_module) and id(module) not in self._roots and self._label(module) is None \
                    and not _exported(module):  # a torch.export'ed program the user runs is their model
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
        if self.calls is not None:
            self.calls.failed(self.first_fault)

    def thread_calls(self) -> list[tuple[str, int, bool | None]]:
        """``(thread name, module calls, recorded by torch)`` for each thread that called a
        module; ``recorded`` is None where torch's profiler records every thread."""
        return [(s.name, s.calls, s.recorded) for s in list(self._stacks)]

    # -- naming -------------------------------------------------------------------------------
    def _name(self, module: Any, stack: list, args: Any = ()) -> tuple[str, str]:
        graph = self._graph
        if not graph.knows(module):
            # Not in any model seen so far: a child its caller created during the run, or a
            # module of its own (a root to be).
            for entry in reversed(stack):
                graph.refresh(entry[0])
        path = self._path_in_stack(module, stack)
        if path is None:
            path = self._path_under_root(module)
            if path is None:
                path = self._add_root(module)
            path = safe_text(path)
        named = (path, module_range_name(path, safe_text(type(module).__name__)))
        self._names[(id(stack[-1][0]) if stack else id(None), id(module))] = named
        self._objects.setdefault(path, module)
        if path not in self._op_args:
            self._op_args[path] = layer_op_args(module, args)
            if self.record_inputs:
                self._input_shapes[path] = input_shapes(args)
        return named

    def _path_in_stack(self, module: Any, stack: list) -> str | None:
        """The path under the innermost running module that contains ``module``, else None. Made
        safe (:func:`safe_text`) part by part: the caller's path is already, and checking it again
        would cost its length per call (the square of the depth over a deep chain)."""
        if not stack:
            return None
        graph = self._graph
        caller, caller_path = stack[-1][0], stack[-1][1]
        rel = graph.path_between(caller, module)  # the common case: a child or grandchild of its caller
        if rel is not None:
            return f"{caller_path}.{safe_text(rel)}"
        ancestors = graph.ancestors(module)
        if not ancestors:
            return None
        for entry in reversed(stack):
            if id(entry[0]) in ancestors:
                return f"{entry[1]}.{safe_text(graph.relative_name(entry[0], module))}"
        return None

    def _path_under_root(self, module: Any) -> str | None:
        """A root's label, or the path under the first root added that contains ``module``."""
        roots = self._roots
        found = [rid for rid in self._graph.ancestors(module) if rid in roots]
        if id(module) in roots:
            found.append(id(module))
        if not found:
            return None
        root, label, _ = roots[min(found, key=lambda rid: roots[rid][2])]
        return label if root is module else f"{label}.{self._graph.relative_name(root, module)}"

    def _label(self, module: Any) -> str | None:
        """The ``labels=`` name of a root module; None (its class name is used) when there is none,
        it is not text, or the user's callable raised (said once, never raised into the forward)."""
        try:
            label = self._label_of(module)
        except Exception as exc:  # noqa: BLE001 - the user's labels callable: its failure is theirs to see, not to crash
            self._say(f"labels= raised {type(exc).__name__}: {exc} (for a {type(module).__name__}): its class name is used")
            return None
        return label if isinstance(label, str) and label else None

    def _unnamed(self, module: Any, exc: Exception) -> None:
        self._say(f"a {type(module).__name__} module could not be named ({type(exc).__name__}: {exc}): "
                  "its calls are not in the profile")  # fmt: skip

    def _say(self, text: str) -> None:
        if text not in self.problems:
            self.problems.append(text)

    def _add_root(self, module: Any) -> str:
        wrapper = self._wrapper_of.get(id(module))
        label = self._label(module) or (self._label(wrapper) if wrapper is not None else None) or type(module).__name__
        if getattr(module, "_is_replica", False):
            # nn.DataParallel runs a copy of the model per device on its own thread: show it as
            # a replica of its class (its parameters are the original's, never counted again).
            label = f"{type(module).__name__} (replica)"
        if label in self._taken:
            n = 2
            while f"{label}#{n}" in self._taken:
                n += 1
            label = f"{label}#{n}"
        self._taken.add(label)
        self._roots[id(module)] = (module, label, len(self._roots))
        self._graph.add(module)
        self._objects.setdefault(label, module)
        return label

    def _collect_infos(self) -> None:
        # list(): a worker thread may still be adding
        new = [(path, module) for path, module in list(self._objects.items()) if path not in self.modules]
        if not new:
            return
        sizes = parameter_sizes([module for _, module in new]) if self.counts else {}
        for path, module in new:
            params, nbytes = sizes.get(id(module), (0, 0))
            root = self._roots.get(id(module))
            self.modules[path] = ModuleInfo(type=safe_text(type(module).__name__), params=params, param_bytes=nbytes,
                                            op_args=self._op_args.get(path), input_shapes=self._input_shapes.get(path),
                                            root=root is not None and root[1] == path,
                                            replica=bool(getattr(module, "_is_replica", False)),
                                            transformed=path in self._transformed)  # fmt: skip

    def roots(self) -> list[tuple[Any, str]]:
        """The root modules seen so far and their labels (the first part of their paths)."""
        return [(module, label) for module, label, _ in list(self._roots.values())]

    def collect(self, submodules: bool = False) -> dict[str, ModuleInfo]:
        """Module facts gathered so far (also mid-run, for a schedule's completed cycle); with
        ``submodules``, also of every submodule of the roots, called or not (a compiled region
        runs its layers without calling them)."""
        if submodules:
            for root, label, _ in list(self._roots.values()):
                for name, module in named_modules(root):
                    if name:
                        self._objects.setdefault(safe_text(f"{label}.{name}"), module)
        self._collect_infos()
        return self.modules


def named_modules(root: Any) -> Iterator[tuple[str, Any]]:
    """``root.named_modules()``: ``root`` (named ``""``) and every module below it with its dotted
    name, each once, in the same order; torch's recurses, this walks an explicit stack, so a chain
    thousands deep walks too."""
    seen: set[int] = set()
    stack: list[tuple[str, Any]] = [("", root)]
    while stack:
        path, module = stack.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        yield path, module
        for name, child in reversed(list(module._modules.items())):
            if child is not None:
                stack.append((f"{path}.{name}" if path else name, child))


class GlobalHooks:
    """torchprof's one pair of global module hooks, the same functions under the same ids in every
    session: a tracker attaches to them while it profiles.

    torch.compile guards on torch's global hook tables where a compiled frame reads them. The hooks
    are out of the tables while Dynamo compiles
    (:func:`torchprof._capture.compiled.hooks_hidden_while_compiling`), and while a
    ``module.compile()``'d module's compiled ``_call_impl`` runs, whose own code reads them
    (:mod:`torchprof._capture.compiled_calls`): nothing is compiled with them, so nothing is
    compiled again. The same ids are put back each time, so a table read elsewhere stays the same.
    """

    def __init__(self) -> None:
        self.owner: ModuleTracker | None = None
        self._ids: tuple[int, int] | None = None
        self._fns: tuple[Callable[..., None], Callable[..., None]] | None = None
        self._in_tables = False

    def attach(self, tracker: ModuleTracker) -> None:
        if self.owner is not None:
            raise RuntimeError("torchprof's module hooks are already in use by another Profiler")
        if self._fns is None:
            self._fns = dynamo_safe(self._enter, self._exit)
        self.owner = tracker
        self.show()

    def detach(self, tracker: ModuleTracker) -> None:
        if self.owner is tracker:
            self.hide()
            self.owner = None

    def show(self) -> None:
        from torch.nn.modules import module as nn_module
        from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

        if self._in_tables or self.owner is None:
            return
        assert self._fns is not None
        pre, post = self._fns
        if self._ids is None:
            # torch hands out the ids; from then on the same ids are put back each time. (An
            # interrupt between the two leaves a hook behind that scrub() finds by identity.)
            first, second = register_module_forward_pre_hook(pre), register_module_forward_hook(post, always_call=True)
            self._ids = (first.id, second.id)
        else:
            nn_module._global_forward_pre_hooks[self._ids[0]] = pre
            nn_module._global_forward_hooks[self._ids[1]] = post
            nn_module._global_forward_hooks_always_called[self._ids[1]] = True
        self._in_tables = True

    def hide(self) -> None:
        from torch.nn.modules import module as nn_module

        if not self._in_tables or self._ids is None:
            return
        self._in_tables = False
        nn_module._global_forward_pre_hooks.pop(self._ids[0], None)
        nn_module._global_forward_hooks.pop(self._ids[1], None)
        nn_module._global_forward_hooks_always_called.pop(self._ids[1], None)

    # -- for module.compile()'d modules (see torchprof._capture.compiled_calls) -----------------
    def functions(self) -> tuple[Callable[..., None], Callable[..., None]]:
        """The dynamo-safe enter and exit functions the hooks call."""
        if self._fns is None:
            self._fns = dynamo_safe(self._enter, self._exit)
        return self._fns

    def recording(self) -> bool:
        """A Profiler owns the hooks and has not paused them (a schedule's idle steps)."""
        owner = self.owner
        return owner is not None and not owner._paused

    def hide_while_compiled(self) -> bool:
        """Take the hooks out of the tables for a compiled call; True when they were in them."""
        if not self._in_tables:
            return False
        self.hide()
        return True

    def show_again(self) -> None:
        self.show()

    @staticmethod
    def skip_in_dynamo(fn: Callable[..., Any]) -> None:
        """Dynamo never compiles ``fn``'s own frame (it still compiles what ``fn`` calls)."""
        from torch._C._dynamo.eval_frame import _FrameAction, _FrameExecStrategy, set_code_exec_strategy

        set_code_exec_strategy(fn.__code__, _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.DEFAULT))

    def scrub(self) -> None:
        """Take our hook functions out of torch's tables wherever they are (an interrupt may have
        come between torch registering them and the ids being kept)."""
        from torch.nn.modules import module as nn_module

        if self._fns is None:
            return
        self._in_tables = False
        extra = (nn_module._global_forward_hooks_always_called, nn_module._global_forward_hooks_with_kwargs)
        for table in (nn_module._global_forward_pre_hooks, nn_module._global_forward_hooks):
            for key, hook in list(table.items()):
                if hook in self._fns:
                    del table[key]
                    for flags in extra:
                        flags.pop(key, None)

    # A failure inside torchprof's own hook code never reaches the user's forward: it is noted
    # (a warning when the profile is read, and FLOPs unknown) and the call runs on.
    def _enter(self, module: Any, args: Any) -> None:
        owner = self.owner
        if owner is not None:
            try:
                owner._enter(module, args)
            except Exception as exc:  # noqa: BLE001 - see above
                owner.fault(module, exc)

    def _exit(self, module: Any, args: Any, output: Any) -> None:
        owner = self.owner
        if owner is not None:
            try:
                owner._exit(module, args, output)
            except Exception as exc:  # noqa: BLE001 - see above
                owner.fault(module, exc)


_GLOBAL_HOOKS = GlobalHooks()


def dynamo_safe(enter: Callable[..., None], exit_: Callable[..., None]) -> tuple[Callable[..., None], Callable[..., None]]:
    """The hooks as functions torch.compile never traces: no graph break, no recompilation, no
    crash, and Dynamo's counters stay what they are without torchprof.

    - When Dynamo inlines ``nn.Module.__call__`` (a submodule inside a compiled frame, or a model
      compiled while the hooks are installed) it traces these wrappers: ``is_compiling()`` is then
      a constant True, so they return at once and add nothing to the graph.
    - When Dynamo meets them as a frame of their own (the hooks of the module whose forward is the
      compiled frame), their code is marked to be skipped, with everything it calls, so they run
      eagerly and the compiled module still gets its range.
    Both use only what torch imports anyway (``torch._dynamo`` itself costs seconds to import).
    """
    import torch
    from torch._C._dynamo.eval_frame import _FrameAction, _FrameExecStrategy, set_code_exec_strategy

    is_compiling = torch.compiler.is_compiling

    def pre(module: Any, args: Any) -> None:
        if is_compiling():
            return None
        enter(module, args)
        return None

    def post(module: Any, args: Any, output: Any) -> None:
        if is_compiling():
            return None
        exit_(module, args, output)
        return None

    skip_with_callees = _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.SKIP)
    set_code_exec_strategy(pre.__code__, skip_with_callees)
    set_code_exec_strategy(post.__code__, skip_with_callees)
    return pre, post


def _exported(module: Any) -> bool:
    """A module ``torch.export`` made (``ExportedProgram.module()``): the user's model, not a
    compiler's graph."""
    return any(cls.__name__ == "_StatefulGraphModule" for cls in type(module).__mro__)


class ModuleGraph:
    """Parent links of every module below the modules added, read from ``_modules`` with an
    explicit stack (``named_modules()`` and ``parameters()`` recurse, and rebuild every path as a
    full string, which made naming cost grow with the square of the depth).

    A module usually has one parent: its path under an ancestor is then the one chain of parent
    links (O(distance)). Where a module or one on its way up has several parents (a shared
    layer), the name is ``named_modules()``'s - the first in its depth-first order - found by a
    search of that ancestor that resumes where it stopped and is kept, so each ancestor's
    subtree is walked at most once.
    """

    def __init__(self) -> None:
        self.modules: dict[int, Any] = {}
        """Every module indexed, by id (holding them keeps the ids unique)."""
        self._parents: dict[int, list[tuple[Any, str]]] = {}
        self._children: dict[int, dict[str, Any]] = {}  # what was read of each module's _modules
        self._searches: dict[int, _FirstPaths] = {}

    def knows(self, module: Any) -> bool:
        return id(module) in self.modules

    def add(self, module: Any) -> None:
        """Index ``module`` and every module below it not indexed yet. O(new modules)."""
        stack = [module]
        while stack:
            m = stack.pop()
            if id(m) in self.modules:
                continue
            self.modules[id(m)] = m
            children = self._children[id(m)] = {}
            for name, child in m._modules.items():
                if child is not None:
                    children[name] = child
                    self._parents.setdefault(id(child), []).append((m, name))
                    stack.append(child)

    def refresh(self, module: Any) -> None:
        """Read ``module``'s children again (some may have been added since it was indexed)."""
        known = self._children.get(id(module))
        if known is None:
            self.add(module)
            self._searches.clear()
            return
        for name, child in module._modules.items():
            if child is not None and known.get(name) is not child:
                known[name] = child
                self._parents.setdefault(id(child), []).append((module, name))
                self.add(child)
                self._searches.clear()  # an ancestor's search may have passed this place already

    def path_between(self, ancestor: Any, module: Any, limit: int = 2) -> str | None:
        """``module``'s path under ``ancestor`` when it is the only way there, at most ``limit``
        levels up; None otherwise (another route, a shared module, or not below it)."""
        names = []
        m = module
        for _ in range(limit):
            parents = self._parents.get(id(m))
            if parents is None or len(parents) != 1:
                return None
            m, name = parents[0]
            names.append(name)
            if m is ancestor:
                return ".".join(reversed(names))
        return None

    def ancestors(self, module: Any) -> set[int]:
        """Ids of every module above ``module`` (through any of its parents). O(ancestors)."""
        seen: set[int] = set()
        stack = [module]
        while stack:
            m = stack.pop()
            for parent, _ in self._parents.get(id(m), ()):
                if id(parent) not in seen:
                    seen.add(id(parent))
                    stack.append(parent)
        return seen

    def relative_name(self, ancestor: Any, module: Any) -> str:
        """``module``'s path under ``ancestor`` as ``ancestor.named_modules()`` gives it (the
        caller knows ``module`` is below it)."""
        names = []
        m = module
        while True:
            parents = self._parents.get(id(m))
            if parents is None or len(parents) != 1:
                break
            m, name = parents[0]
            names.append(name)
            if m is ancestor:
                return ".".join(reversed(names))
        search = self._searches.get(id(ancestor))
        if search is None:
            search = self._searches[id(ancestor)] = _FirstPaths(ancestor)
        found = search.find(module)
        assert found is not None, "relative_name() of a module that is not below the ancestor"
        return found


class _FirstPaths:
    """``root.named_modules()``'s path of each module below ``root`` (the first met in its
    depth-first, children-in-order walk), found lazily: the walk stops at the module asked for
    and resumes from there for the next one. Paths are kept as parent links, not strings."""

    def __init__(self, root: Any) -> None:
        self._root = root
        self._link: dict[int, tuple[int, str]] = {id(root): (0, "")}  # id -> (id of parent on the first path, name)
        self._todo: list[tuple[Any, int, str]] = [(child, id(root), name) for name, child in reversed(root._modules.items()) if child is not None]

    def find(self, module: Any) -> str | None:
        link, todo = self._link, self._todo
        target = id(module)
        while target not in link and todo:
            m, parent, name = todo.pop()
            if id(m) in link:
                continue  # met before: named_modules() names a module once, where it first meets it
            link[id(m)] = (parent, name)
            todo.extend((child, id(m), n) for n, child in reversed(m._modules.items()) if child is not None)
        if target not in link or target == id(self._root):
            return None
        names = []
        root = id(self._root)
        while target != root:
            target, name = link[target]
            names.append(name)
        return ".".join(reversed(names))


def parameter_sizes(modules: list[Any]) -> dict[int, tuple[int, int]]:
    """``(parameters, bytes)`` of each module and everything below it, each tensor counted once
    (what ``sum(p.numel() for p in module.parameters())`` gives), by ``id(module)``.

    ``parameters()`` walks the whole subtree of every module (quadratic in the depth, through
    recursive generators). Here the module graph is walked once, children before parents, and
    each module's set of tensors is its largest child's set, taken over when no other parent
    needs it, joined by the smaller ones ("small to large"): O(modules + tensors * log depth)
    for a tree, plus a copy of a shared module's set for each extra parent.
    """
    # Children before parents (an iterative post-order of the graph below the modules asked about).
    order: list[Any] = []
    kids: dict[int, list[Any]] = {}
    users: dict[int, int] = {}  # how many parents will read a module's set
    stack: list[tuple[Any, bool]] = [(m, False) for m in modules]
    while stack:
        m, done = stack.pop()
        if done:
            order.append(m)
            continue
        if id(m) in kids:
            continue
        unique = list({id(c): c for c in m._modules.values() if c is not None}.values())
        kids[id(m)] = unique
        stack.append((m, True))
        for c in unique:
            users[id(c)] = users.get(id(c), 0) + 1
            if id(c) not in kids:
                stack.append((c, False))
    size: dict[int, tuple[int, int]] = {}  # id(tensor) -> (numel, bytes)
    sets: dict[int, tuple[set[int], list[int]]] = {}  # id(module) -> (tensor ids, [numel, bytes])
    out: dict[int, tuple[int, int]] = {}
    largest: Any
    for m in order:
        # A child still in progress is an ancestor too (a cycle): named_modules() skips it.
        children = [c for c in kids[id(m)] if id(c) in sets]
        if children:
            largest = max(children, key=lambda c: len(sets[id(c)][0]))
            ids, totals = sets[id(largest)]
            if users[id(largest)] > 1:  # another parent reads it too: copy
                ids, totals = set(ids), list(totals)
        else:
            largest, ids, totals = None, set(), [0, 0]
        for c in children:
            if c is not largest:
                for t in sets[id(c)][0]:
                    if t not in ids:
                        ids.add(t)
                        totals[0] += size[t][0]
                        totals[1] += size[t][1]
            users[id(c)] -= 1
            if users[id(c)] == 0:
                del sets[id(c)]
        for p in m._parameters.values():
            if p is not None and id(p) not in ids:
                n = p.numel()
                size[id(p)] = (n, n * p.element_size())
                ids.add(id(p))
                totals[0] += n
                totals[1] += size[id(p)][1]
        sets[id(m)] = (ids, totals)
        out[id(m)] = (totals[0], totals[1])
    return out


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
