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
- The backward no module owns (gradient accumulation) found in several places of a step
  (micro-batches before an optimizer step and in its closure) is split over them only where one
  split of the replays fits the ops each place ran; else it is listed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .._records import ReplayRun
from .._vocab import (
    DISPATCH_RANGES,
    OPTIMIZER_CLOSURE,
    OPTIMIZER_PREFIX,
    OPTIMIZER_STEP_PREFIX,
    STEP_PREFIX,
    UNATTRIBUTED_BACKWARD,
    EventKind,
)
from . import flops as _flops
from .builder import TreeBuilder
from .nodes import KEY_UNATTRIBUTED, TAG_MODULE, TAG_REGION, Nodes

OP, MODULE, REGION = int(EventKind.OP), int(EventKind.MODULE), int(EventKind.REGION)
#: The node autograd starts a backward of several tensors from (the replay's; free, no work).
_GRAPH_ROOT = "torch::autograd::GraphRoot"
#: The backward of a cast (``.to(dtype)``, and each cast CPU autocast makes).
_CAST = "evaluate_function: ToCopyBackward0"


class _Expected:
    """A replay's tree below its top node (index 0), column-wise: per node its calls, the
    subtree's MACs and FLOPs, whether it is backward work, and its children by key. Built from
    one replay, or several weighted by their real calls (``_combined``). Nodes are matched to the
    real tree by walking both from the top with each node's own child keys, never by whole paths
    (which made matching a deep chain cost the square of its depth)."""

    __slots__ = ("bwd", "calls", "children", "flops", "macs")

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.macs: list[int] = []
        self.flops: list[int] = []
        self.bwd: list[bool] = []
        self.children: list[dict[str, int]] = []

    def add(self, calls: int, macs: int, flops: int, bwd: bool) -> int:
        self.calls.append(calls)
        self.macs.append(macs)
        self.flops.append(flops)
        self.bwd.append(bwd)
        self.children.append({})
        return len(self.calls) - 1


@dataclass
class RootPlan:
    """What the replays of one root module give the real tree, before anything is written."""

    assign: list[tuple[int, int, int]] = field(default_factory=list)
    """``(node, macs, flops)`` to add."""
    unknown: dict[str, int] = field(default_factory=dict)
    """Ops whose FLOPs stay unknown (name -> calls)."""
    unknown_nodes: list[int] = field(default_factory=list)
    """The real nodes of those ops: their rows, and every row above them, are unknown (NaN)."""
    covered: list[int] = field(default_factory=list)
    """The real nodes of this root's calls that the replay accounts for."""
    problem: str | None = None
    """Why the root has no FLOPs at all."""
    replays: dict[int, list[tuple[int, _Replayed]]] = field(default_factory=dict)
    """The replays matched, per step (or the profile) they ran in: (real calls, replay). Their
    backward no module owns is matched with the rest of it (:func:`plan_outside`)."""

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


def outside_wanted(builder: TreeBuilder) -> tuple[set[str], bool]:
    """What of the work outside modules the tree holds, to replay: the optimizer steps' ranges
    (by name), and whether any step (or the profile) has ops or backward of its own."""
    nodes = builder.nodes
    steps = {label for nid, label in enumerate(nodes.label) if nodes.kind[nid] == REGION and label.startswith(OPTIMIZER_STEP_PREFIX)}
    containers = [builder.root] if not builder.steps else [s["node"] for s in builder.steps]
    places = [place for c in containers for place in (c, *_regions_below(nodes, c))]
    calls = any(KEY_UNATTRIBUTED in nodes.children[c] or any(nodes.kind[k] == OP for k in nodes.children[c].values())
                for c in places)  # fmt: skip
    return steps, calls


def _regions_below(nodes: Nodes, container: int) -> list[int]:
    """The ranges in a step (or the profile) where calls outside modules may run besides the step
    itself: a user's ``record_function``, a trainer's (Lightning's ``training_step``), an optimizer
    step's closure. Only ranges are walked (never a layer or an op); an optimizer's own ranges
    hold its work, not calls, and are only walked through to their closures."""
    found: list[int] = []
    stack = [c for c in nodes.children[container].values() if nodes.kind[c] == REGION]
    while stack:
        nid = stack.pop()
        label = nodes.label[nid]
        if label != UNATTRIBUTED_BACKWARD and not label.startswith(OPTIMIZER_PREFIX):
            found.append(nid)
        if label != UNATTRIBUTED_BACKWARD:
            stack.extend(c for c in nodes.children[nid].values() if nodes.kind[c] == REGION)
    return found


def plan_replays(builder: TreeBuilder, runs: list[ReplayRun]) -> dict[str, RootPlan]:
    """Match each root's replays against ``builder``'s tree (see the module docstring). Where a
    signature was replayed several ways (answers to the forward's reads of values), each way is
    matched and the closest kept."""
    nodes = builder.nodes
    by_path: dict[str, list[ReplayRun]] = {}
    for run in runs:
        if run.kind != "outside":
            by_path.setdefault(run.path, []).append(run)
    kinds = {path: MODULE if path_runs[0].kind == "module" else REGION for path, path_runs in by_path.items()}
    instances_of: dict[str, list[int]] = {}
    for nid in range(len(nodes)):
        label = nodes.label[nid]
        if label in kinds and nodes.kind[nid] == kinds[label]:
            instances_of.setdefault(label, []).append(nid)
    plans: dict[str, RootPlan] = {}
    # FLOPs already in the tree (a compiled graph's map): looked for below each root only if any.
    counted = any(nodes.flops) or any(nodes.macs)
    for path, path_runs in by_path.items():
        instances = instances_of.get(path, [])
        if not instances:
            continue
        tried = [_plan_root(nodes, instances, alternative, counted) for alternative in _alternatives(path_runs)]
        best = min(tried, key=RootPlan.missing)
        # Ways that match the run equally well but count differently (a branch on a value whose
        # two sides run the same ops on other sizes): which one ran is not known, so neither is.
        if best.problem is None and any(plan is not best and plan.problem is None and plan.missing() == best.missing()
                                        and sorted(plan.assign) != sorted(best.assign) for plan in tried):  # fmt: skip
            best = RootPlan(problem="its forward read values, and replays down different branches match the run "
                                    "equally with different FLOPs")  # fmt: skip
        plans[path] = best
    return plans


def _alternatives(runs: list[ReplayRun], limit: int = 16) -> list[list[ReplayRun]]:
    """The ways to take one replay per signature (most roots have one signature and one way)."""
    by_signature: dict[int, list[ReplayRun]] = {}
    for run in runs:
        by_signature.setdefault(run.signature, []).append(run)
    options = list(by_signature.values())
    # The same way of answering the forward's reads for every signature first (calls that
    # differ only in sizes, as generate()'s growing sequence, read the same values): the n-th
    # replay of each. Then the others, as many as the limit leaves.
    ways: list[list[ReplayRun]] = [[runs_of[min(n, len(runs_of) - 1)] for runs_of in options]
                                   for n in range(max(len(runs_of) for runs_of in options))] if options else [[]]  # fmt: skip
    every: list[list[ReplayRun]] = [[]]
    for runs_of in options:
        every = [[*way, run] for way in every for run in runs_of][:limit]
    seen = {tuple(map(id, way)) for way in ways}
    return ways + [way for way in every if tuple(map(id, way)) not in seen]


def _plan_root(nodes: Nodes, instances: list[int], path_runs: list[ReplayRun], counted: bool = True) -> RootPlan:
    plan = RootPlan()
    plan.problem = next((r.error for r in path_runs if r.error is not None), None)
    if plan.problem is not None:
        return plan
    replays = [(run, _expected_of(run)) for run in path_runs]
    parts = [(run, r) for run, r in replays if r is not None]
    if len(parts) < len(replays):
        plan.problem = "its replay recorded no call of it"
        return plan
    per_step = any(run.steps is not None for run, _ in parts)
    # The root's calls per step (or in the profile) over the places they ran in, and the steps
    # whose replays were handed on already (each step's once, however many places it has).
    calls_in: dict[int, int] = {}
    for inst in instances:
        if not _has_flops(nodes, inst):
            container = _container(nodes, inst)
            calls_in[container] = calls_in.get(container, 0) + nodes.calls[inst]
    handed: set[int] = set()
    for inst in instances:
        if counted and _has_flops(nodes, inst):
            plan.covered.append(inst)  # counted already (a compiled graph's map)
            continue
        container = _container(nodes, inst)
        if per_step and len(parts) > 1:  # a schedule: the signatures each step made, as often as it made them
            step = _step_number(nodes, container)
            here = [(run.steps.get(step, 0) if run.steps else 0, r) for run, r in parts]
            weights = [(w, r) for w, r in here if w]
        else:
            weights = [(run.count, r) for run, r in parts]
        if len(parts) == 1:  # one signature: each place it ran in takes its own calls of it
            rep = weights[0][1]
            exp, top = rep.exp, rep.top
            scale, rest = divmod(nodes.calls[inst], exp.calls[top])
            if rest or not scale:
                plan.problem = "its calls do not match its replay"
                break
            weights = [(scale, rep)]
        else:
            # Several argument sizes (or a step's share): their counts say how the calls split,
            # which one node holding every call of them can use (not a tree with one node per step).
            made = sum(w * r.exp.calls[r.top] for w, r in weights)
            if weights and nodes.calls[inst] != made and _one_cost(weights):
                # Signatures that differ in nothing the replay counts (a batch index, a no_sync
                # flag): one signature, and each place of the step takes its own calls of it.
                rep = weights[0][1]
                scale, rest = divmod(nodes.calls[inst], rep.exp.calls[rep.top])
                if rest or not scale:
                    plan.problem = "its calls do not match its replay"
                    break
                weights = [(scale, rep)]
                exp, top = rep.exp, rep.top
            elif weights and nodes.calls[inst] != made and calls_in[container] == made and _one_cost(weights, forward_only=True):
                # Signatures that differ only in the backward no module owns (which gradients
                # existed to add into: micro-batches of gradient accumulation), in several places
                # of the step: each place takes its own calls' forward and backward, and the step's
                # replays, each as often as it ran, go to that backward (matched in plan_outside).
                rep = weights[0][1]
                scale, rest = divmod(nodes.calls[inst], rep.exp.calls[rep.top])
                if rest or not scale:
                    plan.problem = "its calls do not match its replay"
                    break
                _carry_over(nodes, inst, rep.exp, scale, plan, rep.top)
                plan.covered.append(inst)
                if container not in handed:
                    handed.add(container)
                    plan.replays.setdefault(container, []).extend(weights)
                continue
            elif not weights or nodes.calls[inst] != made or (not per_step and len(instances) > 1):
                plan.problem = "it was called with several argument sizes in different steps"
                break
            else:
                exp, top, scale = _combined([(w, r.exp, r.top) for w, r in weights]), 0, 1
        _carry_over(nodes, inst, exp, scale, plan, top)
        plan.covered.append(inst)
        plan.replays.setdefault(container, []).extend(weights)
    return plan


def _one_cost(weights: list[tuple[int, _Replayed]], forward_only: bool = False) -> bool:
    """Whether every replay in ``weights`` has the same tree below its top, calls and counts
    alike (signatures that differ only where the replay counts nothing); ``forward_only``: below
    its top alone (the backward no module owns may differ)."""
    first = weights[0][1]
    return all(_same_subtree(first.exp, first.top, r.exp, r.top) and (forward_only or (
               (first.unattributed < 0) == (r.unattributed < 0)
               and (first.unattributed < 0 or _same_subtree(first.exp, first.unattributed, r.exp, r.unattributed))))
               for _, r in weights[1:])  # fmt: skip


def _same_subtree(a: _Expected, at: int, b: _Expected, bt: int) -> bool:
    stack = [(at, bt)]
    while stack:
        i, j = stack.pop()
        if (a.calls[i], a.macs[i], a.flops[i], a.bwd[i]) != (b.calls[j], b.macs[j], b.flops[j], b.bwd[j]):
            return False
        kids_a, kids_b = a.children[i], b.children[j]
        if kids_a.keys() != kids_b.keys():
            return False
        stack.extend((kids_a[k], kids_b[k]) for k in kids_a)
    return True


def _container(nodes: Nodes, nid: int) -> int:
    """The step (``ProfilerStep#N``) or the profile a node ran in."""
    while nodes.parent[nid] >= 0 and not (nodes.kind[nid] == REGION and nodes.label[nid].startswith(STEP_PREFIX)):
        nid = nodes.parent[nid]
    return nid


def _step_number(nodes: Nodes, container: int) -> int:
    label = nodes.label[container]
    number = label[len(STEP_PREFIX):] if label.startswith(STEP_PREFIX) else ""
    return int(number) if number.isdigit() else -1


#: How notes name the calls made outside every module (``FLOPs of ... are unknown: why``).
OUTSIDE_CALLS = "the calls outside modules"


def plan_outside(builder: TreeBuilder, plans: dict[str, RootPlan], runs: list[ReplayRun]) -> RootPlan:
    """The work no module owns, matched to its replays: the calls made outside every module
    (``runs``: their replays, each call as often as it ran), and the backward no module owns
    (gradient accumulation into parameters that had gradients, and the backward of those
    calls), which every replay adds to. Per recorded step where a schedule made steps."""
    nodes = builder.nodes
    root = builder.root
    plans = _without_nested(nodes, plans)  # (a recomputed layer's replay shares nothing no module owns)
    plan = RootPlan()
    containers = [root] if not builder.steps else [s["node"] for s in builder.steps]
    # A call that could not be replayed leaves its ops unmatched (listed), and the backward no
    # module owns unknown if it had one; the other calls are still matched.
    problem = next((r.error for r in runs if r.error is not None), None)
    if problem is not None:
        builder.replay_problems[OUTSIDE_CALLS] = problem
    replays = [(run, _expected_of(run)) for run in runs if run.error is None]
    for container in containers:
        step = _step_number(nodes, container)
        calls = [((run.steps or {}).get(step, 0) if builder.steps else run.count, r) for run, r in replays if r is not None]
        calls = [(w, r) for w, r in calls if w]
        # The calls run in the step itself or in ranges inside it (an optimizer step's closure, a
        # trainer's training_step); the backward of those in a range is that range's.
        places = [container, *_regions_below(nodes, container)]
        calls_backward = [(w, r.exp, r.unattributed) for w, r in calls if r.unattributed >= 0]
        in_ranges = False
        if calls:
            outside = _combined([(w, r.exp, 0) for w, r in calls])
            spots: dict[str, list[int]] = {}  # each op's nodes over the places (a call may run in several)
            for place in places:
                for key, child in nodes.children[place].items():
                    if nodes.kind[child] == OP:
                        spots.setdefault(key, []).append(child)
            for key, children in spots.items():
                c = outside.children[0].get(key)
                if c is not None and len(children) == 1 and nodes.calls[children[0]] == outside.calls[c]:
                    _carry_over(nodes, children[0], outside, 1, plan, c)
                    plan.covered.append(children[0])
                elif c is not None:
                    _split_over(nodes, key, children, [(w, r.exp, 0) for w, r in calls], plan)
                elif calls_backward and "AccumulateGrad" not in key:
                    # the backward of calls made in a range: that range's, not no module's
                    ranged = [n for n in children if nodes.bwd[n] and nodes.parent[n] != container]
                    if ranged and len(ranged) == len(children):
                        in_ranges = _split_over(nodes, key, ranged, calls_backward, plan) or in_ranges
        # Backward of the calls matched in ranges is not looked for again with no module's.
        backward_parts = [] if in_ranges else calls_backward
        for root_plan in plans.values():
            if root_plan.problem is None:
                backward_parts += [(w, r.exp, r.unattributed) for w, r in root_plan.replays.get(container, []) if r.unattributed >= 0]
        # The backward no module owns is matched where it is: in one place, or split over several
        # (micro-batches whose backward ran in different ranges) where only one split fits.
        holders = [nodes.children[place][KEY_UNATTRIBUTED] for place in places if KEY_UNATTRIBUTED in nodes.children[place]]
        if not holders or not backward_parts or (problem is not None and any(_calls_have_backward(nodes, h) for h in holders)):
            continue
        if len(holders) == 1:
            _carry_over(nodes, holders[0], _combined(backward_parts), 1, plan)
            plan.covered.append(holders[0])
        else:
            _split_backward(nodes, holders, backward_parts, plan)
    return plan


#: Ways to split the backward no module owns over its places tried at most (else it stays unknown).
_MAX_SPLITS = 256


def _split_backward(nodes: Nodes, holders: list[int], parts: list[tuple[int, _Expected, int]], plan: RootPlan) -> bool:
    """Match the backward no module owns, found in several places of one step (Lightning runs
    the last micro-batch's backward in the optimizer's closure, the others before the step), to
    the replays' shares of it (``parts``: each as often as its calls ran). Each way of sharing
    the calls out over the places is tried: one fits where each place's ops and calls are exactly
    those of the shares it was given (the gradient adds of a micro-batch that found gradients to
    add into, the copies of one that found none). Carried over only where every way that fits
    gives each place the same FLOPs; else nothing is (the adds stay unknown, and listed)."""
    merged: dict[tuple[int, int], tuple[int, _Expected, int]] = {}  # one replay's share given by several places: one share
    for weight, exp, top in parts:
        had = merged.get((id(exp), top))
        merged[id(exp), top] = (weight + (had[0] if had else 0), exp, top)
    parts = list(merged.values())
    if math.prod(math.comb(weight + len(holders) - 1, len(holders) - 1) for weight, _, _ in parts) > _MAX_SPLITS:
        return False
    ways: list[list[tuple[int, ...]]] = [[]]
    for weight, _, _ in parts:
        ways = [[*way, share] for way in ways for share in _shares(weight, len(holders))]
    tried: dict[tuple[int, tuple[int, ...]], tuple[tuple[int, int, int], ...] | None] = {}
    found: set[tuple[tuple[int, int, int], ...]] = set()
    for way in ways:
        assign: list[tuple[int, int, int]] = []
        for h, holder in enumerate(holders):
            given = tuple(share[h] for share in way)
            if (holder, given) not in tried:
                tried[holder, given] = _fits(nodes, holder, [(n, exp, top) for n, (_, exp, top) in zip(given, parts) if n])
            fit = tried[holder, given]
            if fit is None:
                break
            assign += fit
        else:
            found.add(tuple(sorted(assign)))
    if len(found) != 1:
        return False
    plan.assign += found.pop()
    plan.covered += holders
    return True


def _shares(count: int, places: int) -> list[tuple[int, ...]]:
    """Every way to share ``count`` calls out over ``places`` (in order, each may get none)."""
    ways: list[tuple[int, ...]] = [()]
    for _ in range(places - 1):
        ways = [(*way, n) for way in ways for n in range(count - sum(way) + 1)]
    return [(*way, count - sum(way)) for way in ways]


def _fits(nodes: Nodes, holder: int, given: list[tuple[int, _Expected, int]]) -> tuple[tuple[int, int, int], ...] | None:
    """What ``holder`` takes of the replays' shares ``given``, if its ops and calls are exactly
    theirs: every op with work matched, and all of their FLOPs and MACs carried over (nothing
    left on a node where the run had no op to take it). None where they do not fit."""
    if not given:
        trial = RootPlan()
        _list_unknown(nodes, holder, trial)
        return () if not trial.unknown else None
    exp = _combined(given)
    trial = RootPlan()
    _carry_over(nodes, holder, exp, 1, trial)
    if trial.unknown or sum(m for _, m, _ in trial.assign) != exp.macs[0] or sum(f for _, _, f in trial.assign) != exp.flops[0]:
        return None
    return tuple(trial.assign)


def _split_over(nodes: Nodes, key: str, children: list[int], parts: list[tuple[int, _Expected, int]], plan: RootPlan) -> bool:
    """Match one op's nodes in several places (a loss in the first micro-batch's range and in the
    optimizer's closure) to the one replay that made the op: each node takes its own calls' share.
    Nothing is matched (the op stays unknown) where several replays made it or the calls differ."""
    made = [(w, exp, exp.children[top][key]) for w, exp, top in parts if key in exp.children[top]]
    if len(made) != 1:
        return False
    weight, exp, at = made[0]
    unit = exp.calls[at]
    if not unit or sum(nodes.calls[n] for n in children) != weight * unit or any(nodes.calls[n] % unit for n in children):
        return False
    for n in children:
        _carry_over(nodes, n, exp, nodes.calls[n] // unit, plan, at)
        plan.covered.append(n)
    return True


def _calls_have_backward(nodes: Nodes, unattributed: int) -> bool:
    """Backward no module owns, other than gradient accumulation (``AccumulateGrad``): the
    backward of calls outside modules."""
    return any("AccumulateGrad" not in key for key in nodes.children[unattributed])


def commit_replays(builder: TreeBuilder, plans: dict[str, RootPlan], outside: RootPlan | None = None) -> dict[str, str]:
    """Write the plans into the tree, once; returns why each root without FLOPs has none.
    ``outside``: the plan for the work no module owns (:func:`plan_outside`)."""
    if builder.replayed:
        return dict(builder.replay_problems)
    builder.replayed = True
    nodes = builder.nodes
    plans = _without_nested(nodes, plans)
    covered: list[int] = []
    for path, plan in [*plans.items(), *([("", outside)] if outside is not None else [])]:
        if plan.problem is not None:
            builder.replay_problems[path] = plan.problem
            continue
        for nid, macs, flops in plan.assign:
            nodes.macs[nid] += macs
            nodes.flops[nid] += flops
        for name, calls in plan.unknown.items():
            builder.shapeless[name] = builder.shapeless.get(name, 0) + calls
        builder.unknown_flop_nodes.update(plan.unknown_nodes)
        covered += plan.covered
    if covered or builder.unmapped_graph_nodes:
        # FLOPs are known but for what is listed (a compiled graph without its map is listed).
        builder.saw_shapes = True
    _note_uncovered(builder, covered)
    if OUTSIDE_CALLS in builder.replay_problems and not builder.shapeless and not builder.unknown_flop_nodes:
        # The calls outside modules could not be replayed, but none of them had a cost (a grad
        # seed's ones_like): nothing is unknown, so nothing is said.
        del builder.replay_problems[OUTSIDE_CALLS]
    return dict(builder.replay_problems)


def _without_nested(nodes: Nodes, plans: dict[str, RootPlan]) -> dict[str, RootPlan]:
    """The plans less those of roots whose every call ran inside another root's call that its
    plan covers: a layer a checkpoint recomputes in the backward (its calls there are made
    outside every module, so it is a root of its own) ran inside its model's call, whose replay
    ran that recomputation too and accounts for it. Its own plan would list the work again as
    unknown, or count it twice."""
    # (Module calls only: an optimizer step's replay covers its update, not its closure's layers.)
    covering = {nid for plan in plans.values() if plan.problem is None for nid in plan.covered if nodes.kind[nid] == MODULE}
    if not covering:
        return plans
    kept: dict[str, RootPlan] = {}
    for path, plan in plans.items():
        own = set(plan.covered)
        tops = plan.covered if plan.problem is None else [nid for nid in range(len(nodes)) if nodes.label[nid] == path and nodes.kind[nid] == MODULE]
        if tops and all(_inside(nodes, nid, covering - own) for nid in tops):
            continue
        kept[path] = plan
    return kept


def _inside(nodes: Nodes, nid: int, tops: set[int]) -> bool:
    """Whether a node above ``nid`` is one of ``tops`` (not across an optimizer step's closure)."""
    nid = nodes.parent[nid]
    while nid >= 0:
        if nid in tops:
            return True
        if nodes.kind[nid] == REGION and nodes.label[nid] == OPTIMIZER_CLOSURE:
            return False
        nid = nodes.parent[nid]
    return False


def _has_flops(nodes: Nodes, top: int) -> bool:
    stack = [top]
    while stack:
        nid = stack.pop()
        if nodes.flops[nid] or nodes.macs[nid]:
            return True
        stack.extend(nodes.children[nid].values())
    return False


@dataclass
class _Replayed:
    """One replay's tree as :class:`_Expected`, and where its parts are: the root module's (or
    optimizer step's) node, and the backward no module owns (gradient accumulation, the backward
    of calls outside modules), -1 where absent."""

    exp: _Expected
    top: int
    unattributed: int


def _expected_of(run: ReplayRun) -> _Replayed | None:
    """The replay's tree: per node, calls and subtree totals (made once per replay)."""
    if run.events is None:
        return None
    made = run.__dict__.get(_MADE, _MADE)
    if made is _MADE:  # plans are made again (fake-tensor replays, alternatives): the tree once
        made = run.__dict__[_MADE] = _expected_tree(run)
    return made


_MADE = "_torchprof_expected"


def _expected_tree(run: ReplayRun) -> _Replayed | None:
    assert run.events is not None
    replay = TreeBuilder(label="replay", modules=dict(run.modules), flops=True, shapes=False)
    replay.add(run.events)
    nodes = replay.nodes
    root = replay.root
    if run.classes:
        return _weighed_kinds(run, nodes, root)
    top = root
    if run.kind != "outside":
        want = (TAG_MODULE if run.kind == "module" else TAG_REGION) + run.path
        look = [root]
        top = -1
        while look and top < 0:  # below the root, or below a dispatch range there
            at = look.pop()
            top = nodes.children[at].get(want, -1)
            look += [c for k, c in nodes.children[at].items() if k in DISPATCH_RANGES]
        if top < 0:
            return None
    count = len(nodes)
    macs, flops_ = list(nodes.macs), list(nodes.flops)
    for nid in range(count - 1, 0, -1):  # children have larger ids: subtree totals in one sweep
        parent = nodes.parent[nid]
        macs[parent] += macs[nid]
        flops_[parent] += flops_[nid]
    un = nodes.children[root].get(KEY_UNATTRIBUTED, -1)
    if not DISPATCH_RANGES.intersection(nodes.label):
        # The common case: the replay's tree as it is, node ids for indices (no copy).
        out = _Expected()
        out.calls, out.macs, out.flops, out.bwd, out.children = nodes.calls, macs, flops_, nodes.bwd, nodes.children
        return _Replayed(out, top, un)
    out = _Expected()
    index = {root: out.add(nodes.calls[root], macs[root], flops_[root], nodes.bwd[root])}
    # (node, where its children go, the key of that place, whether it is a dispatch range there)
    stack: list[tuple[int, int, str, bool]] = [(root, index[root], "", False)]
    while stack:
        nid, at, at_key, dispatched = stack.pop()
        kids = out.children[at]
        for key, child in nodes.children[nid].items():
            if key in DISPATCH_RANGES:
                # The replay's own stand-ins run under a Python dispatch mode, which torch records
                # as a range around what runs inside it: what is inside belongs where it is.
                stack.append((child, at, at_key, True))
                continue
            if dispatched and key == at_key:
                # ... and the op the mode runs on is recorded again inside it: one op, not two.
                index[child] = at
                stack.append((child, at, at_key, False))
                continue
            made = kids.get(key)
            if made is None:
                kids[key] = made = out.add(nodes.calls[child], macs[child], flops_[child], nodes.bwd[child])
            else:
                out.calls[made] += nodes.calls[child]
                out.macs[made] += macs[child]
                out.flops[made] += flops_[child]
            index[child] = made
            stack.append((child, made, key, False))
    return _Replayed(out, index[top], index[un] if un >= 0 else -1)



def _weighed_kinds(run: ReplayRun, nodes: Nodes, root: int) -> _Replayed | None:
    """An optimizer step replayed one parameter of each kind at a time (``ReplayRun.classes``):
    each kind's step weighed by how many parameters are of that kind, as one step."""
    whole = _expected_nodes(nodes, root)
    parts = []
    for name, weight in run.classes or []:
        kind = whole.children[0].get(name, whole.children[0].get(TAG_REGION + name))  # (torch records it as an op)
        step = whole.children[kind].get(TAG_REGION + run.path) if kind is not None else None
        if step is None:
            return None
        parts.append((weight, whole, step))
    out = _combined(parts)
    out.calls[0] = 1  # one step of all of them
    return _Replayed(out, 0, -1)


def _expected_nodes(nodes: Nodes, root: int) -> _Expected:
    """A replay tree as :class:`_Expected`, node for node (index 0 is ``root``)."""
    out = _Expected()
    index = {root: out.add(nodes.calls[root], 0, 0, nodes.bwd[root])}
    order = [root]
    stack = [root]
    while stack:
        nid = stack.pop()
        for key, child in nodes.children[nid].items():
            out.children[index[nid]][key] = index[child] = out.add(nodes.calls[child], nodes.macs[child], nodes.flops[child], nodes.bwd[child])
            order.append(child)
            stack.append(child)
    for nid in reversed(order[1:]):  # subtree totals: children were added after their parents
        parent = index[nodes.parent[nid]]
        out.macs[parent] += out.macs[index[nid]]
        out.flops[parent] += out.flops[index[nid]]
    return out


def _combined(parts: list[tuple[int, _Expected, int]]) -> _Expected:
    """Several replays' subtrees (each from its own start node) as one: each weighted by its
    number of real calls."""
    out = _Expected()
    out.add(0, 0, 0, False)
    for count, exp, start in parts:
        stack = [(start, 0)]
        while stack:
            at, into = stack.pop()
            out.calls[into] += exp.calls[at] * count
            out.macs[into] += exp.macs[at] * count
            out.flops[into] += exp.flops[at] * count
            out.bwd[into] = exp.bwd[at]
            kids = out.children[into]
            for key, child in exp.children[at].items():
                made = kids.get(key)
                if made is None:
                    kids[key] = made = out.add(0, 0, 0, exp.bwd[child])
                stack.append((child, made))
    return out


def _carry_over(nodes: Nodes, inst: int, exp: _Expected, scale: int, plan: RootPlan, top: int = 0) -> None:
    """Match the real subtree of ``inst`` to the replay (``exp``, times ``scale``), then give each
    matched node the replay's subtree total less what its matched children take.

    O(nodes of both subtrees): each real node is matched through its parent's match by its own
    key, and each node's children are read a constant number of times."""
    e_calls, e_macs, e_flops, e_bwd, e_children = exp.calls, exp.macs, exp.flops, exp.bwd, exp.children
    n_calls, n_children, n_label, n_kind, n_bwd = nodes.calls, nodes.children, nodes.label, nodes.kind, nodes.bwd
    formulas = _flops.FORMULAS
    # The real subtree, parents before children, and which nodes hold work with a formula.
    # A step's closure (its range) is not the step's own work: its layers and calls have replays
    # of their own, so the step's update is matched to what is outside it.
    order: list[int] = []
    stack = [inst]
    while stack:
        nid = stack.pop()
        order.append(nid)
        if not (n_kind[nid] == REGION and n_label[nid] == OPTIMIZER_CLOSURE and nid != inst):
            stack.extend(n_children[nid].values())
    # (Only outermost formula ops count: what runs inside one is its own business, and may differ.)
    # (An op counted as zero, data movement or a collective's bookkeeping, is no work either.)
    covered, parent_of = nodes.covered, nodes.parent
    work = {nid: n_kind[nid] == OP and n_label[nid] in formulas and n_label[nid] not in _flops.NO_ARITHMETIC
            and not (nid != inst and covered[parent_of[nid]]) for nid in order}  # fmt: skip
    for nid in reversed(order):
        if work[nid] and nid != inst:
            work[parent_of[nid]] = True

    def backward_done(nid: int, at: int) -> bool:
        """Did the real run do this node's backward, all of it? Its autograd entries (backward
        children of a forward node) ran as often on both sides. Asked per node: a replay that
        took another branch somewhere (an extra mask addition) loses that node's backward only."""
        if e_bwd[at]:
            return True
        # (A cast's backward with no work in it is not counted: CPU autocast casts each layer's
        # weight, and the meta replay, whose tensors autocast never casts, has no such entries.)
        real = sum(n_calls[c] for key, c in n_children[nid].items() if n_bwd[c] and not (key.endswith(_CAST) and not work[c]))
        replayed = sum(e_calls[c] for key, c in e_children[at].items()
                       if e_bwd[c] and not key.endswith(_GRAPH_ROOT) and not (key.endswith(_CAST) and not (e_flops[c] or e_macs[c])))  # fmt: skip
        return real == replayed * scale and real > 0

    # 1. Match top-down: same key (or its in-place twin) under matched parents, and the same calls.
    match: dict[int, int] = {inst: top}
    done_of: dict[int, bool] = {}
    consistent: dict[int, bool] = {}
    loose_of: dict[int, list[int]] = {}  # real children with work that match nothing
    for nid in order:
        at = match.get(nid)
        if at is None:
            continue
        kids = e_children[at]
        # (No real child: no backward done here, the common case of a leaf op, asked cheaply.)
        done = done_of[nid] = e_bwd[at] or (bool(n_children[nid]) and backward_done(nid, at))
        if work[nid] and n_kind[nid] == OP and n_label[nid] in formulas:
            consistent[nid] = True  # an outermost formula op: counted whole, its inside unread
            continue
        ok = True
        taken: set[int] = set()
        loose: list[int] = []
        for key, child in n_children[nid].items():
            c = kids.get(key)
            if c is None or n_calls[child] != e_calls[c] * scale:
                # The same work in place or not (``add_`` on CPU, ``add`` on meta).
                t = kids.get(key[:-1] if key.endswith("_") else key + "_")
                c = t if t is not None and t not in taken and n_calls[child] == e_calls[t] * scale else None
            if c is not None and e_bwd[c] and not e_bwd[at] and not done:
                # backward the real run did not do, or did only partly
                if work[child]:
                    _list_unknown(nodes, child, plan)
                continue
            if c is None:
                if work[child]:
                    loose.append(child)
                continue
            taken.add(c)
            match[child] = c
        # In place or not, mixed (the autograd engine sums some gradients with ``add_``, others
        # with ``add``, on the CPU; all with ``add`` on meta): the same work when the calls of
        # each name and its twin add up. Their total stays on this node.
        real_calls: dict[str, int] = {}
        for child in loose:
            base = n_label[child].rstrip("_")
            real_calls[base] = real_calls.get(base, 0) + n_calls[child]
        replayed_calls: dict[str, int] = {}
        for key, c in kids.items() if loose or len(taken) != len(kids) else ():  # (all matched: nothing left to read)
            if c in taken:
                continue
            base = key.rstrip("_")
            if base in real_calls:
                replayed_calls[base] = replayed_calls.get(base, 0) + e_calls[c]
            elif (e_flops[c] or e_macs[c]) and not (e_bwd[c] and not e_bwd[at] and not done):
                # Work the replay did that the real run did not (a forward that takes another
                # branch without real data, e.g. adds an attention mask it would have dropped),
                # unless it is replayed backward that is not carried over.
                ok = False
        for base, calls in real_calls.items():
            ok = ok and calls == replayed_calls.get(base, 0) * scale
        consistent[nid] = ok
        loose_of[nid] = loose

    # 2. Carry the totals over, top-down. A node whose children do not all match (an op that
    # runs other ops on the meta device than on the real one; a forward that took another branch
    # without real data) takes nothing of its own: its unmatched work is listed as of unknown
    # cost (and its rows are unknown), its parent does not take its replayed total either, and
    # its matched children (a layer inside it) are still carried over, each checked the same way.
    walk = [inst]
    while walk:
        nid = walk.pop()
        at = match[nid]
        if not consistent[nid]:
            for child in loose_of[nid]:
                _list_unknown(nodes, child, plan)
            walk.extend(child for child in n_children[nid].values() if child in match)
            continue
        if not work[nid]:
            # No op with a formula ran here on the real device (a CPU kernel in one piece): what
            # the replay counts is how the meta kernel computes (index arithmetic), not work.
            continue
        macs, flops = e_macs[at] * scale, e_flops[at] * scale
        for child in n_children[nid].values():
            c = match.get(child)
            if c is not None:
                macs -= e_macs[c] * scale
                flops -= e_flops[c] * scale
                walk.append(child)
        if not e_bwd[at] and not done_of[nid]:
            for c in e_children[at].values():
                if e_bwd[c]:  # replayed backward that is not carried over
                    macs -= e_macs[c] * scale
                    flops -= e_flops[c] * scale
        if macs or flops:
            plan.assign.append((nid, macs, flops))


def _list_unknown(nodes: Nodes, top: int, plan: RootPlan) -> None:
    """The outermost ops with a formula at or below ``top``: FLOPs unknown, and so are the rows
    that hold them."""
    unknown = plan.unknown
    stack = [top]
    while stack:
        nid = stack.pop()
        if nodes.kind[nid] == OP and nodes.label[nid] in _flops.FORMULAS:
            if nodes.label[nid] not in _flops.NO_ARITHMETIC:
                unknown[nodes.label[nid]] = unknown.get(nodes.label[nid], 0) + nodes.calls[nid]
                plan.unknown_nodes.append(nid)
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
        if inside[parent] and not (nodes.kind[nid] == REGION and nodes.label[nid] == OPTIMIZER_CLOSURE):
            inside[nid] = True  # (a step's replay covers its update, not its closure: see _carry_over)
        elif not inside[nid] and nodes.kind[nid] == OP and nodes.label[nid] in _flops.FORMULAS and not nodes.covered[parent] \
                and not nodes.flops[nid] and not nodes.macs[nid] and nodes.label[nid] not in _flops.NO_ARITHMETIC:  # fmt: skip
            builder.shapeless[nodes.label[nid]] = builder.shapeless.get(nodes.label[nid], 0) + nodes.calls[nid]
            builder.unknown_flop_nodes.add(nid)



def mark_transformed(builder: TreeBuilder) -> None:
    """Roots called inside a ``torch.func`` transform (``vmap``, ``grad``): torch records their
    ops per example (a vmapped matmul with one example's sizes, the batch's work inside it as
    other ops), so neither recorded shapes nor a replay give the batch's FLOPs. Their ops are
    listed as of unknown cost and their rows unknown, with the reason."""
    nodes, modules = builder.nodes, builder.modules
    for nid in range(len(nodes)):
        if nodes.kind[nid] != MODULE:
            continue
        info = modules.get(nodes.label[nid])
        if info is None or not info.transformed:
            continue
        builder.replay_problems[nodes.label[nid]] = (
            "it ran inside torch.func (vmap, grad), whose ops torch records once per example, with one "
            "example's sizes: neither recorded shapes nor a replay count the batch")  # fmt: skip
        stack = [nid]
        while stack:
            at = stack.pop()
            if nodes.kind[at] == OP and nodes.label[at] in _flops.FORMULAS and at not in builder.unknown_flop_nodes:
                builder.shapeless[nodes.label[at]] = builder.shapeless.get(nodes.label[at], 0) + nodes.calls[at]
                builder.unknown_flop_nodes.add(at)
                continue
            stack.extend(nodes.children[at].values())


def replay_note(path: str, why: str) -> str:
    """What the user reads when a root module's FLOPs are unknown."""
    return (f"FLOPs of {path} are unknown: {why}. Profiler(shapes=True) counts them from shapes recorded "
            "during the run instead (at the cost of recording every op's shapes).")
