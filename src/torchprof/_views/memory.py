"""Memory over time as tables (``prof.memory_timeline()``, ``prof.memory_breakdown()``) and as the
widget's Memory view data (:func:`memory_payload`), from a finished tree's ``memory``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._tree.memory import minmax_thin
from .._tree.tree import Tree
from .._vocab import BEFORE_PROFILING, MEMORY_CATEGORIES, PHASES, STEP_PREFIX, NodeKind

if TYPE_CHECKING:
    import pandas as pd

#: Where each category of ``memory_breakdown`` comes from, in one line.
CATEGORY_SOURCES: dict[str, str] = {
    "parameter": "a parameter's storage address, read from the profiled modules when the profiler stopped",
    "gradient": "a parameter's .grad address, read at each optimizer step's end and at stop; else allocated in "
                "backward and freed in Optimizer.zero_grad or still alive when the profile ends",
    "optimizer_state": "optimizer.state addresses, read at each optimizer step's end; else allocated in an "
                       "Optimizer.step# range and alive when it ends",
    "activation": "allocated in a layer's forward and still alive when that forward ended",
    "temporary": "freed before the end of the layer (or, outside layers, the range) that allocated it",
    "autograd_detail": "allocated in backward and passed on past the backward node that made it (gradients "
                       "flowing between layers)",
    "other": "allocated outside layers and never freed there, or before profiling (inputs, caches, tensors of "
             "earlier steps)",
}  # fmt: skip
#: Points per device the widget receives at most (min/max per time bucket: the peak survives).
PAYLOAD_POINTS = 4000
#: Phase bands narrower than this share of the run are merged into their neighbour in the payload.
BAND_MIN_SHARE = 1 / 2000

_LAYERS = (NodeKind.MODULE.label, NodeKind.REGION.label)


def _require(tree: Tree) -> dict[str, Any]:
    if not tree.has_memory or not tree.memory.get("timeline"):
        raise ValueError("this profile recorded no memory: profile with torchprof.Profiler(memory=True), or load a trace "
                         "recorded with profile_memory=True")  # fmt: skip
    return tree.memory


def _device(memory: dict[str, Any], device: str | None) -> str:
    names = list(memory["devices"]) or list(memory["timeline"])
    if device is None:
        on_device = [d for d in names if d != "cpu"]
        return on_device[0] if on_device else names[0]
    if device not in names:
        raise ValueError(f"no memory was recorded on {device!r}; recorded: {', '.join(names)}")
    return device


def layer_rows(tree: Tree) -> list[int]:
    """For each row, the nearest row at or above it that is a layer (a module, or a region that
    is not a ``ProfilerStep#``); 0 (the root) when none. One pre-order pass."""
    cols = tree.columns
    kinds, names, parent = cols["kind"], cols["name"], tree.parent_index
    out = [0] * len(tree)
    for i in range(1, len(tree)):
        is_layer = kinds[i] in _LAYERS and not (kinds[i] == NodeKind.REGION.label and names[i].startswith(STEP_PREFIX))
        out[i] = i if is_layer else out[parent[i]]
    return out


def timeline_frame(tree: Tree, device: str | None = None) -> pd.DataFrame:
    """Allocated bytes after each memory event: ``device``, ``time_us`` since the run's first
    event, ``allocated``, the deepest node running (``path``), the layer around it (``layer``)
    and the ``phase``; every device, or one."""
    import pandas as pd

    memory = _require(tree)
    names = [_device(memory, device)] if device is not None else list(memory["timeline"])
    paths = tree.columns["path"]
    layer_of = layer_rows(tree)
    parts = []
    for name in names:
        line = memory["timeline"][name]
        rows = line["row"]
        parts.append(pd.DataFrame({
            "device": name,
            "time_us": line["time_us"],
            "allocated": pd.array(line["allocated"], dtype="int64"),
            "path": [paths[r] for r in rows],
            "layer": [paths[layer_of[r]] for r in rows],
            "phase": pd.Categorical([PHASES[p] for p in line["phase"]], categories=list(PHASES)),
        }))  # fmt: skip
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def breakdown_frame(tree: Tree, by: str = "category", device: str | None = None) -> pd.DataFrame:
    """Bytes alive at the peak of one device (default: the first accelerator, else the host).

    ``by="category"``: one row per category (:data:`~torchprof._vocab.MEMORY_CATEGORIES`) with
    ``bytes`` in the peak, its ``share`` of the peak, ``not_in_peak`` (known tensors the
    allocator's total does not count: host parameters made before profiling) and ``source``.
    ``by="layer"``: one row per layer (its path; bytes allocated before profiling under
    ``(allocated before profiling)``), a column of bytes per category and ``total``, largest
    first. ``attrs`` holds the device, the peak, its phase and the node running then.
    """
    import pandas as pd

    memory = _require(tree)
    name = _device(memory, device)
    peak = memory["devices"].get(name)
    if peak is None or peak.get("breakdown") is None:
        raise ValueError(f"what the {name} peak is made of is unknown: the source recorded no allocation addresses")
    parts = peak["breakdown"]
    if by == "category":
        inside = dict.fromkeys(MEMORY_CATEGORIES, 0)
        outside = dict.fromkeys(MEMORY_CATEGORIES, 0)
        for category, _, nbytes, counted in parts:
            (inside if counted else outside)[category] += nbytes
        df = pd.DataFrame({
            "bytes": pd.array([inside[c] for c in MEMORY_CATEGORIES], dtype="int64"),
            "share": [inside[c] / peak["peak"] if peak["peak"] else float("nan") for c in MEMORY_CATEGORIES],
            "not_in_peak": pd.array([outside[c] for c in MEMORY_CATEGORIES], dtype="int64"),
            "source": [CATEGORY_SOURCES[c] for c in MEMORY_CATEGORIES],
        }, index=pd.Index(MEMORY_CATEGORIES, name="category"))  # fmt: skip
    elif by == "layer":
        table: dict[str, dict[str, int]] = {}
        for category, layer, nbytes, counted in parts:
            if counted:
                row = table.setdefault(layer if layer is not None else BEFORE_PROFILING, dict.fromkeys(MEMORY_CATEGORIES, 0))
                row[category] += nbytes
        df = pd.DataFrame.from_dict(table, orient="index", columns=list(MEMORY_CATEGORIES), dtype="int64")
        df["total"] = df.sum(axis=1)
        df = df.sort_values("total", ascending=False, kind="stable")
        df.index.name = "layer"
    else:
        raise ValueError(f"by must be 'category' or 'layer', not {by!r}")
    paths = tree.paths
    layer = peak.get("layer_row")
    df.attrs.update(device=name, peak=peak["peak"], phase=peak["phase"], path=paths[peak["row"]],
                    layer=paths[layer] if layer is not None else None)  # fmt: skip
    return df


def memory_payload(tree: Tree) -> dict[str, Any] | None:
    """The Memory view's data: per device at most :data:`PAYLOAD_POINTS` timeline points
    (``t`` µs, ``v`` bytes, ``row`` of the layer running, which a click selects), the peak
    (``t``, ``v``, ``row`` of its layer, ``phase``), and the phase bands of the run
    (``[start µs, end µs, phase code]``; narrow ones merged into their neighbour). None
    without memory."""
    memory = tree.memory
    if not tree.has_memory or not memory.get("timeline"):
        return None
    layer_of = layer_rows(tree)
    devices = []
    bands: list[list[Any]] = []
    for name, line in memory["timeline"].items():
        times, values, rows = line["time_us"], line["allocated"], line["row"]
        keep = minmax_thin(times, values, PAYLOAD_POINTS // 2)
        peak = memory["devices"].get(name)
        entry: dict[str, Any] = {
            "name": name,
            "t": [times[k] for k in keep],
            "v": [values[k] for k in keep],
            "row": [layer_of[rows[k]] for k in keep],
        }
        if peak is not None:
            layer = peak.get("layer_row")
            entry["peak"] = {"t": peak["time_us"], "v": peak["peak"], "row": layer if layer is not None else peak["row"],
                             "phase": peak["phase"]}  # fmt: skip
            entry["makeup"] = makeup(tree, peak)
        devices.append(entry)
        if not bands:  # the phases of one device's events draw the bands (the first: host, or a device)
            bands = phase_bands(times, line["phase"])
    return {"devices": devices, "bands": bands, "phases": list(PHASES)}


#: Layers the Memory view's make-up lists (the most bytes at the peak first).
MAKEUP_LAYERS = 10


def makeup(tree: Tree, peak: dict[str, Any]) -> dict[str, Any] | None:
    """What one device's peak is made of, for a stacked bar and a list of layers: ``categories``
    (bytes in the peak per :data:`~torchprof._vocab.MEMORY_CATEGORIES`, in that order), ``layers``
    (the :data:`MAKEUP_LAYERS` layers holding the most at the peak: ``[path, row or -1, bytes,
    bytes per category]``), ``allocator`` (the allocator's own total at the peak) and ``before``
    (bytes it leaves out: host tensors from before profiling). None without addresses."""
    parts = peak.get("breakdown")
    if parts is None:
        return None
    categories = dict.fromkeys(MEMORY_CATEGORIES, 0)
    layers: dict[str, list[int]] = {}
    for category, layer, nbytes, inside in parts:
        if not inside:
            continue
        categories[category] += nbytes
        per = layers.setdefault(layer if layer is not None else BEFORE_PROFILING, [0] * len(MEMORY_CATEGORIES))
        per[MEMORY_CATEGORIES.index(category)] += nbytes
    top = sorted(layers.items(), key=lambda kv: -sum(kv[1]))[:MAKEUP_LAYERS]
    row_of = _rows_of(tree, [path for path, _ in top])
    return {
        "categories": [categories[c] for c in MEMORY_CATEGORIES],
        "layers": [[path, row_of.get(path, -1), sum(per), per] for path, per in top],
        "allocator": peak.get("allocator_peak", peak["peak"]),
        "before": peak.get("before_block", 0.0),
    }


def _rows_of(tree: Tree, wanted: list[str]) -> dict[str, int]:
    """The first row of each of a few paths, building only the paths of rows whose own label
    ends one of them (the whole path column is never made: deep trees keep it compact)."""
    paths = tree.paths
    labels = paths.label if hasattr(paths, "label") else None
    left = set(wanted)
    out: dict[str, int] = {}
    for i in range(len(tree)):
        if not left:
            break
        if labels is not None and not any(w.endswith(labels[i]) for w in left):
            continue
        p = paths[i]
        if p in left:
            out[p] = i
            left.discard(p)
    return out


def phase_bands(times: list[float], phase: list[int]) -> list[list[Any]]:
    """Runs of equal phase as ``[start, end, phase]``; a run narrower than
    :data:`BAND_MIN_SHARE` of the span is absorbed by the run before it."""
    if not times:
        return []
    span = (times[-1] - times[0]) or 1.0
    bands: list[list[Any]] = []
    for t, p in zip(times, phase):
        if bands and bands[-1][2] == p:
            bands[-1][1] = t
            continue
        if bands:
            bands[-1][1] = t
            if bands[-1][1] - bands[-1][0] < span * BAND_MIN_SHARE and len(bands) > 1:
                last = bands.pop()
                bands[-1][1] = last[1]
                if bands[-1][2] == p:
                    continue
        bands.append([t, t, p])
    return bands
