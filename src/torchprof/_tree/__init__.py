"""The tree: plain events in, one aggregated tree of layers out (pure Python: no torch, pandas
or IPython). ``builder`` folds events (with ``nesting``, ``backward`` and ``flops``), ``finish``
computes every registry column, ``summary`` and ``aggregate`` derive run totals and per-type
tables, ``storage`` turns a tree into JSON and back."""
