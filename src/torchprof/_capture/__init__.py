"""Capture: run code under ``torch.profiler`` with module ranges and hand out plain records.

The only stage that touches torch's profiler internals: ``hooks`` names module calls, ``kineto``
reads torch's results into :class:`~torchprof._records.EventColumns`, ``session`` starts and stops
the two together, ``quiet`` keeps kineto's log lines out of the user's output.
"""
