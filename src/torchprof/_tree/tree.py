"""The finished tree: plain columns in pre-order, what every view reads."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict, overload

#: What separates a row's label from its scope's path (``ProfilerStep#3/aten::add``).
PATH_SEPARATOR = "/"


class PathColumn(Sequence[str]):
    """The ``path`` column held in O(rows) memory: ``path[i]`` is ``path[scope[i]] + "/" + label[i]``,
    or ``label[i]`` alone when ``scope[i]`` is -1. A scope is an earlier row (an ancestor, so it
    comes first in pre-order).

    Full path strings grow with depth (a chain d deep holds d²/2 names in its paths), so they are
    built only when asked for: one path costs O(its depth) to build and is not kept; iterating
    builds every path once, each from its scope's, and keeps them (views that need them all, like
    ``prof.df``, then pay what they show). Everything else (the tree, saving, the summary, the
    terminal table) reads ``scope`` and ``label`` and stays linear in rows whatever the depth."""

    __slots__ = ("_all", "label", "scope")

    def __init__(self, scope: list[int], label: list[str]) -> None:
        if len(scope) != len(label):
            raise ValueError(f"{len(scope)} scopes for {len(label)} labels")
        self.scope = scope
        self.label = label
        self._all: list[str] | None = None

    @classmethod
    def from_paths(cls, paths: Sequence[str], parent_index: Sequence[int]) -> PathColumn:
        """Plain path strings made compact: each row's scope is its nearest ancestor whose path
        and a "/" begin the row's path (-1 for none). O(rows x the ancestors tried); the strings
        given are kept as the built paths."""
        if isinstance(paths, PathColumn):
            return paths
        scope: list[int] = []
        label: list[str] = []
        for i, path in enumerate(paths):
            a = parent_index[i] if i < len(parent_index) else -1
            while a >= 0:
                prefix = paths[a]
                if len(path) > len(prefix) + 1 and path.startswith(prefix) and path[len(prefix)] == PATH_SEPARATOR:
                    break
                a = parent_index[a]
            scope.append(a)
            label.append(path if a < 0 else path[len(paths[a]) + 1 :])
        out = cls(scope, label)
        out._all = paths if isinstance(paths, list) else list(paths)
        return out

    def __len__(self) -> int:
        return len(self.scope)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if self._all is not None:
            return self._all[i]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        scope, label = self.scope, self.label
        if i < 0:
            i += len(scope)
        parts = [label[i]]
        j = scope[i]
        while j >= 0:
            parts.append(label[j])
            j = scope[j]
        return parts[0] if len(parts) == 1 else PATH_SEPARATOR.join(reversed(parts))

    def __iter__(self) -> Iterator[str]:
        return iter(self.materialized())

    def materialized(self) -> list[str]:
        """Every path as a string (built once, each from its scope's, and kept)."""
        if self._all is None:
            out: list[str] = []
            scope, label = self.scope, self.label
            for i, lab in enumerate(label):
                j = scope[i]
                out.append(lab if j < 0 else f"{out[j]}{PATH_SEPARATOR}{lab}")
            self._all = out
        return self._all

    def tail(self, i: int, j: int) -> str | None:
        """What row ``i``'s path adds to row ``j``'s (``/aten::add``, ``.conv1``) when it begins
        with it, else None; without building either path when ``j`` is ``i``'s scope."""
        if self.scope[i] == j:
            return PATH_SEPARATOR + self.label[i]
        if self._all is None and self.scope[i] == self.scope[j] and j >= 0:
            # Siblings under one scope (a module below its parent module): compare labels only.
            own, theirs = self.label[i], self.label[j]
            return own[len(theirs) :] if own.startswith(theirs) else None
        path, prefix = self[i], self[j]
        return path[len(prefix) :] if path.startswith(prefix) else None

    def __repr__(self) -> str:
        return f"PathColumn({len(self)} rows)"


class PathTrie:
    """Paths made unique without being built: each path is a node of a trie of its
    "/"-separated segments (a label may hold a "/" itself), so two paths are equal exactly when
    they reach the same node. A path is given as the trie node of its scope's path (-1: the
    empty path) and its label. O(the labels' segments); no string longer than a label is made,
    so deep trees cost memory linear in their rows."""

    __slots__ = ("_next_number", "_nodes", "_taken")

    def __init__(self) -> None:
        self._nodes: dict[tuple[int, str], int] = {}  # (parent segment node, segment) -> segment node
        self._taken: set[int] = set()
        self._next_number: dict[tuple[int, str], int] = {}  # (trie node, last segment) -> the next `` #n`` to try

    def walk(self, base: int, label: str) -> int:
        """The trie node of ``<path of base>/<label>``."""
        nodes = self._nodes
        for segment in label.split(PATH_SEPARATOR) if PATH_SEPARATOR in label else (label,):
            found = nodes.get((base, segment))
            if found is None:
                found = nodes[(base, segment)] = len(nodes)
            base = found
        return base

    def is_taken(self, base: int, label: str) -> bool:
        return self.walk(base, label) in self._taken

    def claim(self, base: int, label: str) -> tuple[str, int]:
        """``label`` under ``base`` made a path no earlier claim has (`` #2``, `` #3``, ... on
        its last segment when one has), and that path's trie node."""
        key = self.walk(base, label)
        if key in self._taken:
            head, _, last = label.rpartition(PATH_SEPARATOR)
            prefix = self.walk(base, head) if head else base
            # The numbers below the last one given for this path are all taken (claims only
            # add): start after it, so a path met k times costs O(k), not O(k²).
            n = self._next_number.get((prefix, last), 2)
            while self.walk(prefix, f"{last} #{n}") in self._taken:
                n += 1
            self._next_number[(prefix, last)] = n + 1
            label = f"{label} #{n}"
            key = self.walk(prefix, f"{last} #{n}")
        self._taken.add(key)
        return label, key


class Columns(dict[str, list[Any]]):
    """A tree's columns by name, a plain dict but for ``path`` and ``parent``: those are made
    from the compact :class:`PathColumn` (as lists of strings, kept) the first time they are read,
    so code that never reads them (loading, the summary, the terminal table, saving) stays linear
    in rows at any depth. Reading every column (``items()``, ``dict(columns)``) makes them too."""

    LAZY = ("path", "parent")

    def __init__(self, values: dict[str, list[Any]], paths: PathColumn, parent_index: list[int], order: Sequence[str]) -> None:
        super().__init__(values)
        self.paths = paths
        self.parent_index = parent_index
        self.order = [k for k in order if k in values or k in self.LAZY]

    def __missing__(self, key: str) -> list[Any]:
        if key == "path":
            value: list[Any] = self.paths.materialized()
        elif key == "parent":
            paths = self["path"]
            value = [paths[p] if p >= 0 else None for p in self.parent_index]
        else:
            raise KeyError(key)
        self[key] = value
        return value

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default  # noqa: SIM401 - self.get is this method

    def __contains__(self, key: object) -> bool:
        return dict.__contains__(self, key) or key in self.LAZY

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def keys(self) -> list[str]:  # type: ignore[override]
        extra = [k for k in dict.keys(self) if k not in self.order]
        return self.order + extra

    def values(self) -> list[list[Any]]:  # type: ignore[override]
        return [self[k] for k in self.keys()]

    def items(self) -> list[tuple[str, list[Any]]]:  # type: ignore[override]
        return [(k, self[k]) for k in self.keys()]

    def copy(self) -> dict[str, list[Any]]:
        return dict(self.items())

    def stored(self) -> Iterator[tuple[str, list[Any]]]:
        """The columns but the lazy ones, without making those."""
        return ((k, v) for k, v in dict.items(self) if k not in self.LAZY)


class StepTotals(TypedDict, total=False):
    """One ``ProfilerStep#N`` of :attr:`Tree.steps` (``gpu_busy_us`` and ``comm_us`` are missing in
    profiles saved before they were recorded; a merged job's steps have the means over its ranks)."""

    step: int | str
    """``N``; the text after ``ProfilerStep#`` where a trace names a step with something else."""
    wall_us: float
    cpu_us: float
    cuda_us: float
    bwd_cpu_us: float
    gpu_busy_us: float
    comm_us: float


class RankRow(TypedDict):
    """One row of ``prof.by_rank()`` (:attr:`Tree.by_rank`; ``_vocab.BY_RANK_COLUMNS``): a rank's
    step, or its whole run (``step`` None) where it recorded no steps."""

    rank: Any
    step: int | str | None
    wall_us: float
    cpu_us: float
    gpu_busy_us: float
    comm_us: float
    idle_us: float


@dataclass
class Tree:
    """A finished profile tree, column-wise, in pre-order (parent before children, siblings by
    descending ``cpu_us``). Row 0 is the root; ``parent_index[i]`` is -1 for it. ``columns`` holds
    every column of the registry (:data:`torchprof._vocab.COLUMNS`) by name. The ``path`` and
    ``parent`` columns may be a :class:`PathColumn` and a :class:`ParentPathColumn`, sequences
    that build their strings on demand (read them by index or iteration, not as lists)."""

    columns: dict[str, list[Any]]
    parent_index: list[int]
    unsupported_ops: dict[str, int]
    """Ops that ran but have no FLOP formula (name -> calls): their FLOPs are unknown."""
    steps: list[StepTotals]
    """One per ``ProfilerStep#N``, in the order they ran."""
    peak_cpu_mem: float
    """Highest host bytes allocated during the run (NaN without ``memory=True``)."""
    peak_cuda_mem: float
    has_cuda: bool
    has_memory: bool
    has_flops: bool
    event_count: int
    gpu_busy_us: float = float("nan")
    """Time any device stream was running work: the union of device intervals over every stream
    and device (NaN without device events)."""
    gpu_window_us: float = float("nan")
    """First device start to last device end (within the profiled span, summed over the cycles
    of a schedule): busy plus idle."""
    gpu_time_us: dict[str, float] = field(default_factory=dict)
    """The run's device time by what it did, as ``prof.summary`` names it: ``gpu_compute_us``,
    ``gpu_comm_us``, ``gpu_memcpy_us`` (the time each kind ran: the union of its intervals per
    device, summed over devices) and ``gpu_comm_overlap_us`` (communication beside compute on the
    same device); empty in profiles saved before they existed."""
    comm_us: float = float("nan")
    """Time collective communication was in flight (c10d ranges on the host, NCCL kernels on the
    device; their union), within the profiled span."""
    ranks: list[Any] = field(default_factory=list)
    """The ranks a profile of a distributed job merged (``load_trace`` of several traces); empty
    for one source."""
    by_rank: list[RankRow] = field(default_factory=list)
    """Those ranks' figures, one dict per rank and step (:data:`~torchprof._vocab.BY_RANK_COLUMNS`)."""
    threads: list[dict[str, Any]] = field(default_factory=list)
    """The CPU time of each thread that recorded events (its outermost ranges), most first:
    ``thread`` (the trace's thread id), ``cpu_us`` and, of it, ``compile_us`` (compiling a
    ``torch.compile``'d graph). The root's CPU total is their sum."""
    cpu_union_us: float = float("nan")
    """The time any thread ran a recorded range: the union of the threads' outermost ranges.
    The CPU total exceeds it by the time threads ran at once."""
    overruns: list[list[Any]] = field(default_factory=list)
    """Ranges that outlived the range they ran in (async collectives such as ``hccl:all_to_all``),
    one ``[row, ranges, overrun_us]`` per row, largest first: each such range counts only up to
    its parent's end (see :func:`~torchprof._tree.nesting.nest`), and ``overrun_us`` is the time
    cut off, which no total holds."""
    memory: dict[str, Any] = field(default_factory=dict)
    """Memory over time (with ``memory=True``; see :func:`~torchprof._tree.memory.memory_report`):
    ``devices`` (per device name: the peak, when, in which row and phase, and what was alive
    then) and ``timeline`` (per device name: ``time_us``, ``allocated``, ``row``, ``phase``)."""

    peak_flops: dict[str, Any] = field(default_factory=dict)
    """The peak the ``mfu`` column is measured against (:meth:`~torchprof._tree.devices.Peak.to_json`:
    ``flops_per_s``, ``device``, ``dtype``, ``source``); empty where none was looked for."""
    _paths: PathColumn | None = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.parent_index)

    @property
    def paths(self) -> PathColumn:
        """Each row's path as its scope row and label (:class:`PathColumn`): what views that only
        need a path's last part, and saving, read instead of the ``path`` column."""
        cols = self.columns
        if isinstance(cols, Columns):
            return cols.paths
        if self._paths is None or self._paths.materialized() is not cols["path"]:
            self._paths = PathColumn.from_paths(cols["path"], self.parent_index)
        return self._paths

    def children(self) -> list[list[int]]:
        """Row indices of each row's children, in tree order."""
        out: list[list[int]] = [[] for _ in self.parent_index]
        for i, p in enumerate(self.parent_index):
            if p >= 0:
                out[p].append(i)
        return out
