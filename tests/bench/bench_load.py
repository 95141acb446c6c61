"""What ``torchprof.load()``'s structure checks cost, side by side with the load without them.

    .venv/bin/python tests/bench/bench_load.py             # 10k, 100k and 300k rows
    .venv/bin/python tests/bench/bench_load.py --rows 50000

For each size it writes a saved profile (every column of the registry, rows of a random tree in
tree order, a third of the float cells null) and loads it three times with the checks and three
times without (the check replaced by a no-op), printing the best CPU time of each and their
ratio. The checks run at C speed where they can (``map``, ``set``, ``min``/``max``); target:
well under half the time of the rest of a load.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time


def saved_profile(rows: int) -> dict:
    from torchprof._vocab import COLUMNS

    rng = random.Random(0)
    parents = [-1] + [rng.randrange(max(0, i - 50), i) for i in range(1, rows)]
    depth = [0] * rows
    for i in range(1, rows):
        depth[i] = depth[parents[i]] + 1
    columns: dict[str, list] = {}
    for col in COLUMNS:
        if col.name == "path":
            columns[col.name] = [f"row/{i}" for i in range(rows)]
        elif col.name == "name":
            columns[col.name] = [f"aten::op{i % 97}" for i in range(rows)]
        elif col.name == "kind":
            columns[col.name] = ["op"] * rows
        elif col.name == "depth":
            columns[col.name] = depth
        elif col.dtype == "int":
            columns[col.name] = [1] * rows
        elif col.dtype == "str":
            columns[col.name] = [None] * rows
        elif col.dtype == "bool":
            columns[col.name] = [False] * rows
        else:
            columns[col.name] = [rng.random() * 1e3 if i % 3 else None for i in range(rows)]
    return {"format": "torchprof-profile", "version": 1, "columns": columns, "parent_index": parents,
            "capture": {"label": "bench", "wall_us": 1.0, "modules": {}, "meta": {}}}  # fmt: skip


def best_cpu(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000, 300_000])
    args = parser.parse_args()

    import torchprof
    from torchprof._files import dumps
    from torchprof._tree import storage

    checks = storage.validate_saved
    print(f"{'rows':>8} {'MB':>6} {'load (s)':>9} {'no checks (s)':>14} {'checks share':>13}")
    for rows in args.rows:
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "saved.json")
            with open(path, "wb") as f:
                f.write(dumps(saved_profile(rows)))
            checked = best_cpu(lambda: torchprof.load(path))  # noqa: B023 - called at once
            storage.validate_saved = lambda data, where: None
            try:
                unchecked = best_cpu(lambda: torchprof.load(path))  # noqa: B023
            finally:
                storage.validate_saved = checks
            size = os.path.getsize(path) / 1e6
        print(f"{rows:>8} {size:>6.0f} {checked:>9.2f} {unchecked:>14.2f} {(checked - unchecked) / checked:>12.0%}")


if __name__ == "__main__":
    main()
