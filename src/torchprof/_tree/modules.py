"""What is known about modules as a whole (not per node): which paths are roots."""

from __future__ import annotations

from .._records import ModuleInfo


def root_modules(modules: dict[str, ModuleInfo], seen: set[str] | None = None) -> list[str]:
    """The module paths that are roots (their parameters include everything below them), each
    once, wherever they ran: what the hooks marked as roots, else (traces from older torchprof)
    every path no other path extends. Replicas (DataParallel copies) are never roots: their
    parameters are the original's. ``seen`` limits the answer to paths that ran."""
    paths = [p for p, m in modules.items() if not m.replica and (seen is None or p in seen)]
    if any(m.root is not None for m in modules.values()):
        return [p for p in paths if modules[p].root]
    known = set(paths)
    roots = []
    for path in paths:
        cut = path.rfind(".")
        while cut > 0 and path[:cut] not in known:
            cut = path.rfind(".", 0, cut)
        if cut <= 0:
            roots.append(path)
    return roots
