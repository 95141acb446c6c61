"""FLOPs from replays: the real run recorded no shapes; each root module call signature was run
again on a data-free copy with shapes recorded (``_capture/replay.py``). Here each replay's
events become a tree of their own, whose FLOPs are counted as usual, and are carried over onto
the real tree only where the two agree.

The replay runs the same Python code on the same sizes, so every layer does the same work; but
below a layer the ops can differ by device (a CPU kernel adds a bias in place, ``aten::add_``,
where the meta kernel makes a new tensor, ``aten::add``). So the match is by subtree: a real node
whose key path and call count agree with the replay's (times the real calls) takes the replay's
subtree total; what its matched children do not account for stays on the node itself. A layer's
FLOPs are thus the replay's exactly, and an op's wherever the op is the same.

- In-place twins (``add_``/``add``) match each other; a mixed group (the autograd engine sums
  some gradients in place) leaves its sum on the node above.
- A node under which no op with a formula ran on the real device takes nothing (the replay's
  count there is how a Python meta kernel computes, not work).
- A node whose children with work do not all match takes nothing: its ops are listed as of
  unknown cost (``RootPlan.unknown``); the caller may then try a replay on fake tensors of the
  real device and keep the closer plan.
- Backward work is carried over only when the real run did it: its autograd entries ran as often
  as the replay's.
- Ops with a formula that no replay covers (code outside any module, a module that could not be
  replayed) are listed as of unknown cost, never counted as zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .._records import ReplayRun
from .._vocab import EventKind
from . import flops as _flops
from .builder import TreeBuilder
from .nodes import Nodes

OP, MODULE = int(EventKind.OP), int(EventKind.MODULE)
#: The node autograd starts a backward of several tensors from (the replay's; free, no work).
_GRAPH_ROOT = "torch::autograd::GraphRoot"


@dataclass
class _Expected:
    """One node of a replay's tree, by its key path below the root module."""

    calls: int
    macs: int
    flops: int
    bwd: bool
    children: list[tuple]


@dataclass
class RootPlan:
    """What the replays of one root module give the real tree, before anything is written."""

    assign: list[tuple[int, int, int]] = field(default_factory=list)
    """``(node, macs, flops)`` to add."""
    unknown: dict[str, int] = field(default_factory=dict)
    """Ops whose FLOPs stay unknown (name -> calls)."""
    covered: list[int] = field(default_factory=list)
    """The real nodes of this root's calls that the replay accounts for."""
    problem: str | None = None
    """Why the root has no FLOPs at all."""

    @property
    def exact(self) -> bool:
        return self.problem is None and not self.unknown

    def missing(self) -> int:
        """How much is unknown: calls of ops left unknown (every root call when it all is)."""
        return sum(self.unknown.values()) if self.problem is None else 1 << 60


def module_paths(builder: TreeBuilder) -> list[str]:
    """The module paths in the tree (the roots among them are the ones to replay)."""
    nodes = builder.nodes
    return sorted({nodes.label[nid] for nid in range(len(nodes)) if nodes.kind[nid] == MODULE})


def plan_replays(builder: TreeBuilder, runs: list[ReplayRun]) -> dict[str, RootPlan]:
    """Match each root's replays against ``builder``'s tree (see the module docstring)."""
    nodes = builder.nodes
    by_path: dict[str, list[ReplayRun]] = {}
    for run in runs:
        by_path.setdefault(run.path, []).append(run)
    instances_of: dict[str, list[int]] = {}
    for nid in range(len(nodes)):
        if nodes.kind[nid] == MODULE and nodes.label[nid] in by_path:
            instances_of.setdefault(nodes.label[nid], []).append(nid)
    plans: dict[str, RootPlan] = {}
    for path, path_runs in by_path.items():
        instances = instances_of.get(path, [])
        if not instances:
            continue
        plan = plans[path] = RootPlan()
        plan.problem = next((r.error for r in path_runs if r.error is not None), None)
        if plan.problem is not None:
            continue
        expected = [(run.count, _expected_of(run)) for run in path_runs]
        parts = [(count, e) for count, e in expected if e is not None]
        if len(parts) < len(expected):
            plan.problem = "its replay recorded no call of it"
            continue
        for inst in instances:
            if _has_flops(nodes, inst):
                plan.covered.append(inst)  # counted already (a compiled graph's map)
                continue
            if len(parts) == 1:
                exp = parts[0][1]
                scale, rest = divmod(nodes.calls[inst], exp[()].calls)
                if rest or not scale:
                    plan.problem = "its calls do not match its replay"
                    break
            else:
                # Several argument sizes: their counts say how the calls split, which one node
                # holding every call can use (not a tree with one node per step).
                if len(instances) > 1 or nodes.calls[inst] != sum(count for count, _ in parts):
                    plan.problem = "it was called with several argument sizes in different steps"
                    break
                exp, scale = _combined(parts), 1
            _carry_over(nodes, inst, exp, scale, plan)
            plan.covered.append(inst)
    return plans


def commit_replays(builder: TreeBuilder, plans: dict[str, RootPlan]) -> dict[str, str]:
    """Write the plans into the tree, once; returns why each root without FLOPs has none."""
    if builder.replayed:
        return dict(builder.replay_problems)
    builder.replayed = True
    nodes = builder.nodes
    covered: list[int] = []
    for path, plan in plans.items():
        if plan.problem is not None:
            builder.replay_problems[path] = plan.problem
            continue
        for nid, macs, flops in plan.assign:
            nodes.macs[nid] += macs
            nodes.flops[nid] += flops
        for name, calls in plan.unknown.items():
            builder.shapeless[name] = builder.shapeless.get(name, 0) + calls
        covered += plan.covered
    if covered or builder.unmapped_graph_nodes:
        # FLOPs are known but for what is listed (a compiled graph without its map is listed).
        builder.saw_shapes = True
    _note_uncovered(builder, covered)
    return dict(builder.replay_problems)


def _has_flops(nodes: Nodes, top: int) -> bool:
    stack = [top]
    while stack:
        nid = stack.pop()
        if nodes.flops[nid] or nodes.macs[nid]:
            return True
        stack.extend(nodes.children[nid].values())
    return False


def _expected_of(run: ReplayRun) -> dict[tuple, _Expected] | None:
    """The replay's tree below its root module: per key path, calls and subtree totals."""
    if run.events is None:
        return None
    replay = TreeBuilder(label="replay", modules=dict(run.modules), flops=True, shapes=False)
    replay.add(run.events)
    nodes = replay.nodes
    top = next((nid for nid in nodes.children[replay.root].values()
                if nodes.kind[nid] == MODULE and nodes.label[nid] == run.path), -1)  # fmt: skip
    if top < 0:
        return None
    count = len(nodes)
    macs, flops_ = list(nodes.macs), list(nodes.flops)
    for nid in range(count - 1, 0, -1):  # children have larger ids: subtree totals in one sweep
        parent = nodes.parent[nid]
        macs[parent] += macs[nid]
        flops_[parent] += flops_[nid]
    out: dict[tuple, _Expected] = {}
    stack: list[tuple[int, tuple]] = [(top, ())]
    while stack:
        nid, path = stack.pop()
        kids = [((*path, key), child) for key, child in nodes.children[nid].items()]
        out[path] = _Expected(nodes.calls[nid], macs[nid], flops_[nid], nodes.bwd[nid], [p for p, _ in kids])
        stack.extend((child, p) for p, child in kids)
    return out


def _combined(parts: list[tuple[int, dict[tuple, _Expected]]]) -> dict[tuple, _Expected]:
    """Several signatures' replays as one: each weighted by its number of real calls."""
    out: dict[tuple, _Expected] = {}
    for count, exp in parts:
        for path, e in exp.items():
            have = out.get(path)
            if have is None:
                out[path] = _Expected(e.calls * count, e.macs * count, e.flops * count, e.bwd, list(e.children))
            else:
                have.calls += e.calls * count
                have.macs += e.macs * count
                have.flops += e.flops * count
                have.children.extend(c for c in e.children if c not in have.children)
    return out


def _carry_over(nodes: Nodes, inst: int, exp: dict[tuple, _Expected], scale: int, plan: RootPlan) -> None:
    """Match the real subtree of ``inst`` to the replay (``exp``, times ``scale``), then give each
    matched node the replay's subtree total less what its matched children take."""
    # The real subtree, parents before children, and which nodes hold work with a formula.
    order: list[int] = []
    stack = [inst]
    while stack:
        nid = stack.pop()
        order.append(nid)
        stack.extend(nodes.children[nid].values())
    # (Only outermost formula ops count: what runs inside one is its own business, and may differ.)
    work = {nid: nodes.kind[nid] == OP and nodes.label[nid] in _flops.FORMULAS for nid in order}
    for nid in reversed(order):
        if work[nid] and nid != inst:
            work[nodes.parent[nid]] = True
    def backward_done(nid: int, e: _Expected) -> bool:
        """Did the real run do this node's backward, all of it? Its autograd entries (backward
        children of a forward node) ran as often on both sides. Asked per node: a replay that
        took another branch somewhere (an extra mask addition) loses that node's backward only."""
        if e.bwd:
            return True
        real = sum(nodes.calls[c] for c in nodes.children[nid].values() if nodes.bwd[c])
        replayed = sum(exp[c].calls for c in e.children if exp[c].bwd and not c[-1].endswith(_GRAPH_ROOT))
        return real == replayed * scale and real > 0

    # 1. Match top-down: same key path (or its in-place twin) and the same calls.
    match: dict[int, tuple] = {inst: ()}
    done_of: dict[int, bool] = {}
    consistent: dict[int, bool] = {}
    loose_of: dict[int, list[int]] = {}  # real children with work that match nothing
    for nid in order:
        path = match.get(nid)
        if path is None:
            continue
        e = exp[path]
        done = done_of[nid] = backward_done(nid, e)
        ok = True
        taken: set[tuple] = set()
        loose: list[int] = []  # children with work that match nothing
        if work[nid] and nodes.kind[nid] == OP and nodes.label[nid] in _flops.FORMULAS:
            consistent[nid] = True  # an outermost formula op: counted whole, its inside unread
            continue
        for key, child in nodes.children[nid].items():
            cpath = (*path, key)
            ce = exp.get(cpath)
            if ce is None or nodes.calls[child] != ce.calls * scale:
                # The same work in place or not (``add_`` on CPU, ``add`` on meta).
                twin = (*path, key[:-1] if key.endswith("_") else key + "_")
                te = exp.get(twin)
                if te is not None and twin not in taken and nodes.calls[child] == te.calls * scale:
                    cpath, ce = twin, te
                else:
                    ce = None
            if ce is not None and ce.bwd and not e.bwd and not done:
                ce = None  # backward the real run did not do, or did only partly
                if work[child]:
                    _list_unknown(nodes, child, plan.unknown)
                continue
            if ce is None:
                if work[child]:
                    loose.append(child)
                continue
            taken.add(cpath)
            match[child] = cpath
        # In place or not, mixed (the autograd engine sums some gradients with ``add_``, others
        # with ``add``, on the CPU; all with ``add`` on meta): the same work when the calls of
        # each name and its twin add up. Their total stays on this node.
        real_calls: dict[str, int] = {}
        for child in loose:
            base = nodes.label[child].rstrip("_")
            real_calls[base] = real_calls.get(base, 0) + nodes.calls[child]
        for base, calls in real_calls.items():
            replayed = sum(exp[c].calls for c in e.children if c not in taken and c[-1].rstrip("_") == base)
            ok = ok and calls == replayed * scale
        # And the other way: work the replay did that the real run did not (a forward that takes
        # another branch without real data, e.g. adds an attention mask it would have dropped).
        for c in e.children:
            ce = exp[c]
            if c in taken or not (ce.flops or ce.macs) or c[-1].rstrip("_") in real_calls:
                continue
            if ce.bwd and not e.bwd and not done:
                continue  # replayed backward that is not carried over
            ok = False
        consistent[nid] = ok
        loose_of[nid] = loose

    # 2. Carry the totals over, top-down. A node whose children do not all match (an op that
    # runs other ops on the meta device than on the real one; a forward that took another branch
    # without real data) takes nothing of its own: its unmatched work is listed as of unknown
    # cost, its parent does not take its replayed total either, and its matched children (a
    # layer inside it) are still carried over, each checked the same way.
    walk = [inst]
    while walk:
        nid = walk.pop()
        e = exp[match[nid]]
        if not consistent[nid]:
            for child in loose_of[nid]:
                _list_unknown(nodes, child, plan.unknown)
            walk.extend(child for child in nodes.children[nid].values() if child in match)
            continue
        if not work[nid]:
            # No op with a formula ran here on the real device (a CPU kernel in one piece): what
            # the replay counts is how the meta kernel computes (index arithmetic), not work.
            continue
        macs, flops = e.macs * scale, e.flops * scale
        for child in nodes.children[nid].values():
            taken_as = match.get(child)
            if taken_as is not None:
                macs -= exp[taken_as].macs * scale
                flops -= exp[taken_as].flops * scale
                walk.append(child)
        if not e.bwd and not done_of[nid]:
            for cpath in e.children:
                ce = exp[cpath]
                if ce.bwd:  # replayed backward that is not carried over
                    macs -= ce.macs * scale
                    flops -= ce.flops * scale
        if macs or flops:
            plan.assign.append((nid, macs, flops))


def _list_unknown(nodes: Nodes, top: int, unknown: dict[str, int]) -> None:
    """The outermost ops with a formula at or below ``top``: FLOPs unknown."""
    stack = [top]
    while stack:
        nid = stack.pop()
        if nodes.kind[nid] == OP and nodes.label[nid] in _flops.FORMULAS:
            unknown[nodes.label[nid]] = unknown.get(nodes.label[nid], 0) + nodes.calls[nid]
            continue
        stack.extend(nodes.children[nid].values())


def _note_uncovered(builder: TreeBuilder, covered_roots: list[int]) -> None:
    """Ops with a formula outside every replayed root: their FLOPs are unknown (no shapes)."""
    nodes = builder.nodes
    inside = [False] * len(nodes)
    for top in covered_roots:
        inside[top] = True
    for nid in range(1, len(nodes)):
        parent = nodes.parent[nid]
        if inside[parent]:
            inside[nid] = True
        elif not inside[nid] and nodes.kind[nid] == OP and nodes.label[nid] in _flops.FORMULAS and not nodes.covered[parent] \
                and not nodes.flops[nid] and not nodes.macs[nid]:  # fmt: skip
            builder.shapeless[nodes.label[nid]] = builder.shapeless.get(nodes.label[nid], 0) + nodes.calls[nid]



def replay_note(path: str, why: str) -> str:
    """What the user reads when a root module's FLOPs are unknown."""
    return (f"FLOPs of {path} are unknown: {why}. Profiler(shapes=True) counts them from shapes recorded "
            "during the run instead (at the cost of recording every op's shapes).")
