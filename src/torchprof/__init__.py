"""torchprof: a Jupyter-native, layer-by-layer profiler for PyTorch.

``with torchprof.Profiler() as prof: ...`` then ``prof.df``, ``print(prof)`` or ``display(prof)``;
``torchprof.load_trace(path)`` opens traces recorded elsewhere (every rank's trace of a distributed
job as one profile); ``torchprof.compare(base, new)`` sets two runs side by side; ``%load_ext
torchprof`` adds the ``%%torchprof`` cell magic. A run's profile is a :class:`Result`;
:class:`Profile` is the 2020 torchprof API (``with torchprof.Profile(model, use_cuda=True) as prof``).
"""

from __future__ import annotations

from typing import Any

from ._capture.compiled import capture_compiled
from ._capture.session import ProfilerError, ProfilerWarning
from ._comparison import Comparison, compare
from ._files import TraceError
from ._legacy import Profile
from ._load import load, load_trace
from ._profile import Result
from ._profiler import Profiler, profile

__version__ = "0.1.0"

__all__ = [
    "Comparison",
    "Profile",
    "ProfileWidget",
    "Profiler",
    "ProfilerError",
    "ProfilerWarning",
    "Result",
    "TraceError",
    "capture_compiled",
    "compare",
    "load",
    "load_ipython_extension",
    "load_trace",
    "profile",
    "unload_ipython_extension",
]


def __getattr__(name: str) -> Any:
    # The widget pulls in anywidget and ipywidgets: only when asked for.
    if name == "ProfileWidget":
        from ._views.widget import ProfileWidget

        return ProfileWidget
    raise AttributeError(f"module 'torchprof' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext torchprof``: registers ``%%torchprof`` and ``%torchprof``."""
    from ._magic import register

    register(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from ._magic import unregister

    unregister(ipython)
