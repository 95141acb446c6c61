"""Widget scale benchmark: a synthetic 50,000-node profile in headless Chromium.

    .venv/bin/python tests/bench/bench_widget.py [--nodes 50000] [--repeat 5]

Measures, against the targets: first render (payload decode + view + DOM), slider, sort, ops
toggle and search updates (each from the input event to a laid-out page), the number of row
elements in the DOM while scrolling to the bottom and back, and the payload's bytes per node.
Prints a table of measured vs target and exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from synthetic import columns, ev  # noqa: E402
from torchprof._records import ModuleInfo, Recording  # noqa: E402
from torchprof._result import Result  # noqa: E402
from torchprof._tree.builder import TreeBuilder  # noqa: E402

TARGETS = {"render_ms": 300.0, "update_ms": 100.0, "dom_rows": 300, "bytes_per_node": 150.0}


def big_profile(nodes: int = 50_000, seed: int = 0) -> Result:
    """A training-step-like profile of about ``nodes`` tree nodes, built by the real tree builder
    from synthetic events: stages of blocks of layers, each layer running linear/addmm, relu and
    add forward and their autograd nodes backward (15 nodes per layer), with shapes and params,
    times drawn at random so sorting and thresholds have work to do."""
    rng = random.Random(seed)
    per_layer = 15
    layers_wanted = max(1, nodes // per_layer)
    stages = max(1, round(layers_wanted ** (1 / 3)))
    blocks = stages
    layers = max(1, -(-layers_wanted // (stages * blocks)))  # ceil: at least `nodes` nodes
    events: list[dict[str, Any]] = []
    modules: dict[str, ModuleInfo] = {}
    forward: list[tuple[int, str]] = []  # (seq, which op) for the backward pass
    t = 0.0
    seq = 0
    root_start = t
    events.append(None)  # the model's range, filled in when its end is known
    for s in range(stages):
        stage = f"Model.stage{s}"
        stage_start = t
        stage_index = len(events)
        events.append(None)
        for b in range(blocks):
            block = f"{stage}.block{b}"
            block_start = t
            block_index = len(events)
            events.append(None)
            for k in range(layers):
                layer = f"{block}.layer{k}"
                width = rng.choice((64, 128, 256, 512))
                start = t
                index = len(events)
                events.append(None)
                d = rng.uniform(5, 60)
                events.append(ev("op", "aten::linear", t + 1, t + 1 + d, seq=seq, shapes=[[32, width], [width, width], [width]]))
                events.append(ev("op", "aten::addmm", t + 2, t + d, seq=seq + 1, shapes=[[width], [32, width], [width, width]]))
                forward.append((seq, "linear"))
                t += d + 2
                d = rng.uniform(1, 10)
                events.append(ev("op", "aten::relu", t, t + d, seq=seq + 2, shapes=[[32, width]]))
                events.append(ev("op", "aten::clamp_min", t + 0.2, t + d - 0.2, shapes=[[32, width], []]))
                forward.append((seq + 2, "relu"))
                t += d + 1
                d = rng.uniform(1, 8)
                events.append(ev("op", "aten::add", t, t + d, seq=seq + 3, shapes=[[32, width], [32, width], []]))
                forward.append((seq + 3, "add"))
                seq += 4
                t += d + 1
                events[index] = ev("module", layer, start, t, type_="Linear")
                modules[layer] = ModuleInfo("Linear", width * width + width, 4 * (width * width + width))
                t += 0.5
            events[block_index] = ev("module", block, block_start, t, type_="Block")
            modules[block] = ModuleInfo("Block", sum(m.params for p, m in modules.items() if p.startswith(block + ".")), 0)
            t += 0.5
        events[stage_index] = ev("module", stage, stage_start, t, type_="Stage")
        modules[stage] = ModuleInfo("Stage", sum(m.params for p, m in modules.items() if p.startswith(stage + ".")), 0)
        t += 0.5
    events[0] = ev("module", "Model", root_start, t, type_="Model")
    modules["Model"] = ModuleInfo("Model", sum(m.params for p, m in modules.items() if p.count(".") == 1), 0)
    # Backward on the autograd thread, last forward op first.
    t += 10
    for fseq, op in reversed(forward):
        d = rng.uniform(3, 80)
        name = {"linear": "AddmmBackward0", "relu": "ReluBackward0", "add": "AddBackward0"}[op]
        events.append(ev("op", f"autograd::engine::evaluate_function: {name}", t, t + d, tid=2, seq=fseq + (1 if op == "linear" else 0), fwd=1))
        events.append(ev("op", name, t + 0.5, t + d - 0.5, tid=2, seq=fseq + (1 if op == "linear" else 0), fwd=1))
        if op == "linear":
            events.append(ev("op", "aten::mm", t + 1, t + d / 2, tid=2))
            events.append(ev("op", "aten::t", t + d / 2 + 0.1, t + d / 2 + 0.5, tid=2))
        elif op == "relu":
            events.append(ev("op", "aten::threshold_backward", t + 1, t + d - 1, tid=2))
        t += d + 1
    builder = TreeBuilder(label="profile", modules=modules)
    builder.add(columns(events))
    return Result(builder.finish(), Recording(modules=modules, wall_us=t))


BENCH_JS = """
async ({ repeat }) => {
  const root = document.querySelector('[data-testid="torchprof"]');
  const q = (sel) => root.querySelector(sel);
  const settle = async () => { await null; await null; return root.offsetHeight; };
  const time = async (action) => {
    const t0 = performance.now();
    action();
    await settle();
    return performance.now() - t0;
  };
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)];
  const out = {};
  const slider = q('[data-testid="min-pct"]');
  const search = q('[data-testid="search"]');
  const ops = q('[data-testid="show-ops"]');
  const input = (el, value) => { el.value = value; el.dispatchEvent(new Event("input", { bubbles: true })); };
  const measure = async (prefix) => {
    const runs = { slider: [], sort: [], ops: [], search: [] };
    for (let r = 0; r < repeat; r++) {
      runs.slider.push(await time(() => input(slider, String(r % 2 ? 425 : 0))));  // 0.5% on the log scale
      runs.sort.push(await time(() => q(r % 2 ? '.tp-th[data-col="calls"]' : '.tp-th[data-col="self_cpu_us"]').click()));
      runs.ops.push(await time(() => ops.click()));
      runs.search.push(await time(() => input(search, r % 2 ? "" : "layer1")));
    }
    for (const [k, v] of Object.entries(runs)) out[prefix + k + "_ms"] = median(v);
  };
  await measure("");
  // Everything visible: ops on, all expanded, no filter; the same updates on ~50k shown rows.
  input(search, ""); input(slider, "0");
  if (!ops.checked) ops.click();
  out.expand_all_ms = await time(() => q('[data-testid="expand-all"]').click());
  await measure("all_");
  input(search, ""); input(slider, "0");
  if (!ops.checked) ops.click();
  q('[data-testid="expand-all"]').click();
  await settle();
  const scroller = q('[data-testid="scroller"]');
  const count = () => scroller.querySelectorAll('[role="row"]').length;
  const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
  let maxRows = count();
  const steps = 60;
  const t0 = performance.now();
  for (let s = 1; s <= steps; s++) {
    scroller.scrollTop = (scroller.scrollHeight * s) / steps;
    await frame();
    maxRows = Math.max(maxRows, count());
  }
  const atBottom = scroller.querySelector('[role="row"]:last-child').getAttribute("data-path");
  for (let s = steps - 1; s >= 0; s--) {
    scroller.scrollTop = (scroller.scrollHeight * s) / steps;
    await frame();
    maxRows = Math.max(maxRows, count());
  }
  out.scroll_frame_ms = (performance.now() - t0) / (2 * steps);
  out.max_dom_rows = maxRows;
  out.rows_shown = q('[data-testid="row-count"]').textContent;
  out.last_row = atBottom;
  return out;
}
"""


def run(nodes: int, repeat: int) -> dict[str, Any]:
    from browser_util import chromium, new_page, serve, write_widget_page
    from torchprof._views.payload import payload, payload_bytes

    t0 = time.perf_counter()
    prof = big_profile(nodes)
    n = len(prof.tree)
    t1 = time.perf_counter()
    packed = payload_bytes(payload(prof.tree, prof.summary))
    t2 = time.perf_counter()
    raw = payload_bytes(payload(prof.tree, prof.summary), level=0)

    widget = prof.widget()
    results: dict[str, Any] = {
        "nodes": n,
        "build_tree_s": t1 - t0,
        "pack_s": t2 - t1,
        "bytes_per_node": len(packed) / n,
        "raw_bytes_per_node": len(raw) / n,
    }
    with tempfile.TemporaryDirectory() as tmp, chromium() as browser:
        write_widget_page(widget, Path(tmp))
        with serve(Path(tmp)) as url:
            renders = []
            for _ in range(repeat):
                page = new_page(browser, viewport={"width": 1400, "height": 900})
                page.goto(url + "index.html?" + str(time.time()))
                page.wait_for_selector("body[data-ready='1']")
                # First render: from the module's render() call to rows laid out on screen.
                renders.append(page.evaluate("""async () => {
                    const { widget, createModel, model } = window.torchprofPage;
                    const el = document.createElement("div");
                    document.body.append(el);
                    const fresh = createModel({ ...Object.fromEntries(["min_pct", "sort_by", "ascending",
                      "show_ops", "search", "expanded"].map((k) => [k, model.get(k)])), data: model.get("data") });
                    const t0 = performance.now();
                    await widget.render({ model: fresh, el });
                    el.offsetHeight;
                    const ms = performance.now() - t0;
                    el.remove();
                    return ms;
                }"""))
                if len(renders) < repeat:
                    page.context.close()
            results["render_ms"] = statistics.median(renders)
            results.update(page.evaluate(BENCH_JS, {"repeat": repeat}))
            assert not page.errors, page.errors
            assert not page.blocked, page.blocked
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    r = run(args.nodes, args.repeat)
    rows = [
        ("first render (decode + view + DOM)", r["render_ms"], TARGETS["render_ms"], "ms"),
        ("slider update", r["slider_ms"], TARGETS["update_ms"], "ms"),
        ("sort update (header click)", r["sort_ms"], TARGETS["update_ms"], "ms"),
        ("ops toggle update", r["ops_ms"], TARGETS["update_ms"], "ms"),
        ("search update", r["search_ms"], TARGETS["update_ms"], "ms"),
        ("slider update, all ~50k rows expanded", r["all_slider_ms"], TARGETS["update_ms"], "ms"),
        ("sort update, all expanded", r["all_sort_ms"], TARGETS["update_ms"], "ms"),
        ("ops toggle update, all expanded", r["all_ops_ms"], TARGETS["update_ms"], "ms"),
        ("search update, all expanded", r["all_search_ms"], TARGETS["update_ms"], "ms"),
        ("row elements in the DOM while scrolling", r["max_dom_rows"], TARGETS["dom_rows"], ""),
        ("payload bytes per node (zlib)", r["bytes_per_node"], TARGETS["bytes_per_node"], "B"),
    ]
    print(f"torchprof widget benchmark: {r['nodes']:,} nodes (tree built in {r['build_tree_s']:.2f} s, "
          f"payload packed in {r['pack_s'] * 1000:.0f} ms)")
    print(f"{'measure':<42} {'measured':>10} {'target':>10} {'ratio':>7}")
    ok = True
    for label, value, target, unit in rows:
        ratio = value / target
        ok &= ratio <= 1
        print(f"{label:<42} {value:>8.1f}{unit:>2} {'<' + format(target, 'g'):>8}{unit:>2} {ratio:>6.2f}{'' if ratio <= 1 else '  MISSED'}")
    print(f"\nalso: expand all (~{r['nodes']:,} rows) {r['expand_all_ms']:.1f} ms, scroll {r['scroll_frame_ms']:.1f} ms per step "
          f"(incl. a frame), rows shown '{r['rows_shown']}', last row at the bottom {r['last_row']!r}, "
          f"payload without compression {r['raw_bytes_per_node']:.1f} B/node")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
