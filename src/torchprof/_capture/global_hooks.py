"""torchprof's one pair of global ``nn.Module`` hooks: registered with torch once per process, put
back into and taken out of torch's tables as Profilers start, pause and stop, and never traced by
torch.compile. A :class:`~torchprof._capture.module_ranges.ModuleTracker` attaches to them while
it profiles.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class HookOwner(Protocol):
    """What the hooks call: the tracker attached to them (see :mod:`torchprof._capture.module_ranges`)."""

    paused: bool

    def enter(self, module: Any, args: Any) -> None: ...

    def leave(self, module: Any, args: Any, output: Any) -> None: ...

    def fault(self, module: Any, exc: Exception) -> None: ...


class GlobalHooks:
    """torchprof's one pair of global module hooks, the same functions under the same ids in every
    session: a tracker attaches to them while it profiles.

    torch.compile guards on torch's global hook tables where a compiled frame reads them. The hooks
    are out of the tables while Dynamo compiles
    (:func:`torchprof._capture.compiled.start_hiding`), and while a
    ``module.compile()``'d module's compiled ``_call_impl`` runs, whose own code reads them
    (:mod:`torchprof._capture.compiled_calls`): nothing is compiled with them, so nothing is
    compiled again. The same ids are put back each time, so a table read elsewhere stays the same.
    """

    def __init__(self) -> None:
        self.owner: HookOwner | None = None
        self._ids: tuple[int, int] | None = None
        self._fns: tuple[Callable[..., None], Callable[..., None]] | None = None
        self._in_tables = False

    def attach(self, tracker: HookOwner) -> None:
        if self.owner is not None:
            raise RuntimeError("torchprof's module hooks are already in use by another Profiler")
        if self._fns is None:
            self._fns = dynamo_safe(self._enter, self._exit)
        self.owner = tracker
        self.show()

    def detach(self, tracker: HookOwner) -> None:
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
        return owner is not None and not owner.paused

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
                owner.enter(module, args)
            except Exception as exc:  # noqa: BLE001 - see above
                owner.fault(module, exc)

    def _exit(self, module: Any, args: Any, output: Any) -> None:
        owner = self.owner
        if owner is not None:
            try:
                owner.leave(module, args, output)
            except Exception as exc:  # noqa: BLE001 - see above
                owner.fault(module, exc)


GLOBAL_HOOKS = GlobalHooks()
"""The process's one pair (tests may swap in a fresh one: read it through this module)."""


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
