"""torchprof inside the trainers people use: record chosen optimizer steps into the layer tree.

- :class:`torchprof.integrations.hf.TorchprofCallback`: a Hugging Face ``TrainerCallback``
  (``pip install 'jupyter-torchprof[hf]'``).
- :class:`torchprof.integrations.lightning.TorchprofProfiler`: a Lightning ``Profiler``
  (``pip install 'jupyter-torchprof[lightning]'``).
- Any loop of your own (accelerate's included): ``torchprof.Profiler(steps=[...])`` around it,
  ``prof.step()`` once per iteration, and :func:`gather_ranks` for the job's merged view.

Each submodule imports its framework; this package imports none of them.
"""

from __future__ import annotations

from ._ranks import gather_ranks

__all__ = ["gather_ranks"]
