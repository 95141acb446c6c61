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
from ._comparison import Comparison, compare
from ._errors import ProfilerError, ProfilerWarning, TraceError
from ._legacy import Profile
from ._load import load, load_trace
from ._profiler import Profiler, profile
from ._result import Result

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
    if name == "__version__":
        return _version()
    # The widget pulls in anywidget and ipywidgets: only when asked for.
    if name == "ProfileWidget":
        from ._views.widget import ProfileWidget

        return ProfileWidget
    raise AttributeError(f"module 'torchprof' has no attribute {name!r}")


#: The distribution torchprof is installed as (pyproject.toml's ``[project] name``).
DISTRIBUTION = "jupyter-torchprof"


def _version() -> str:
    """The version, written once in pyproject.toml: the installed package's metadata, or in a source
    checkout without metadata (``PYTHONPATH=src``), pyproject.toml's ``[project] version``."""
    import importlib.metadata

    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        pass
    import os
    import re

    pyproject = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "pyproject.toml")
    try:
        with open(pyproject, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return "0+unknown"
    project = re.search(r"^\[project\]$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    found = re.search(r'^version\s*=\s*"([^"]+)"', project.group(1), re.M) if project else None
    return found.group(1) if found else "0+unknown"


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext torchprof``: registers ``%%torchprof`` and ``%torchprof``."""
    from ._magic import register

    register(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from ._magic import unregister

    unregister(ipython)
