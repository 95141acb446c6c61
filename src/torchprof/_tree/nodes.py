"""The growing tree while events arrive: one list per field, node id = index."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._vocab import STEP_PREFIX, EventKind
from .flops.formulas import FORMULAS

MODULE, REGION, OP = int(EventKind.MODULE), int(EventKind.REGION), int(EventKind.OP)

# Keys of a node's children. Ops are keyed by their bare name (the common case, no string work);
# other kinds get a one-character tag so a region, a module and an op of the same name stay apart.
TAG_MODULE = "\x01"
TAG_REGION = "\x02"
TAG_KERNEL = "\x03"
KEY_UNATTRIBUTED = "\x04"
KEY_LAUNCHED_BEFORE = "\x05"
KEY_DEVICE_WITHOUT_OP = "\x06"
KEY_RECOMPUTE = "\x07"
KEY_COMPILED_BACKWARD = "\x08"
KEY_DEVICE_RANGES = "\x09"
KEY_COMPILATION = "\x0e"


@dataclass
class Nodes:
    """Node fields column-wise. Children are always created after their parent (larger ids), which
    the bottom-up sweeps of the finished tree rely on."""

    parent: list[int] = field(default_factory=list)
    kind: list[int] = field(default_factory=list)
    """The event kind the node was made from (an :class:`~torchprof._vocab.EventKind`)."""
    label: list[str] = field(default_factory=list)
    type: list[str | None] = field(default_factory=list)
    bwd: list[bool] = field(default_factory=list)
    owner: list[int] = field(default_factory=list)
    """Nearest module (or region inside a module) at or above the node; -1 for none."""
    covered: list[bool] = field(default_factory=list)
    """True when this node or an ancestor op has a FLOP formula (inner ops are not re-counted)."""
    children: list[dict[str, int]] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    cpu_ns: list[int] = field(default_factory=list)
    """Self CPU time: the node's ranges minus the parts their direct children cover."""
    cuda_ns: list[int] = field(default_factory=list)
    cpu_mem: list[int] = field(default_factory=list)
    cuda_mem: list[int] = field(default_factory=list)
    macs: list[int] = field(default_factory=list)
    flops: list[int] = field(default_factory=list)
    shapes: list[Any] = field(default_factory=list)
    source: list[str | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.parent)

    def add(self, parent: int, kind: int, label: str, type_: str | None, bwd: bool, key: str) -> int:
        nid = len(self.parent)
        self.parent.append(parent)
        self.kind.append(kind)
        self.label.append(label)
        self.type.append(type_)
        self.bwd.append(bwd)
        if parent < 0:
            owner, covered = -1, False
        else:
            # Backward work is attributed to the nearest layer that ran the forward op: a
            # module, or a user region (not an iteration marker such as ProfilerStep#3).
            is_layer = kind == MODULE or (kind == REGION and not label.startswith(STEP_PREFIX))
            owner = nid if is_layer and not bwd else self.owner[parent]
            covered = self.covered[parent] or (kind == OP and label in FORMULAS)
            self.children[parent][key] = nid
        self.owner.append(owner)
        self.covered.append(covered)
        self.children.append({})
        for column in (self.calls, self.cpu_ns, self.cuda_ns, self.cpu_mem, self.cuda_mem, self.macs, self.flops):
            column.append(0)
        self.shapes.append(None)
        self.source.append(None)
        return nid

    def nearest_module(self, nid: int) -> int:
        """The closest module node at or above ``nid``; -1 for none."""
        while nid >= 0 and self.kind[nid] != MODULE:
            nid = self.parent[nid]
        return nid
