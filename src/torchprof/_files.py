"""Reading and writing the files torchprof works with: JSON (optionally gzipped), written atomically."""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections.abc import Iterable
from typing import Any


class TraceError(ValueError):
    """A trace or saved-profile file that cannot be read: what is wrong, and where."""


def read_json(path: str | os.PathLike[str]) -> Any:
    """The JSON value in a ``.json`` or gzipped ``.json.gz`` file; :class:`TraceError` when it is
    unreadable, truncated or not JSON."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such trace file: {path}")
    if os.path.isdir(path):
        raise TraceError(f"{path} is a directory, not a trace file")
    try:
        with open(path, "rb") as f:
            raw = f.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise TraceError(f"cannot read {path}: {exc} (is it a truncated .json.gz?)") from exc
    try:
        try:
            import orjson

            return orjson.loads(raw)
        except ImportError:
            return json.loads(raw)
    except ValueError as exc:
        raise TraceError(f"{path} is not valid JSON ({exc}); expected a torch.profiler chrome trace") from exc


def dumps(data: Any) -> bytes:
    """Compact JSON bytes (orjson when installed)."""
    try:
        import orjson

        return orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY)
    except ImportError:
        return json.dumps(data).encode("utf-8")


def write_atomic(path: str | os.PathLike[str], payload: bytes) -> str:
    """Write ``payload`` to ``path`` (gzipped for ``.gz``) through a temporary file in the same
    folder and a rename, so a failure never leaves half a file behind. Returns the path."""
    return write_atomic_chunks(path, (payload,))


def write_atomic_chunks(path: str | os.PathLike[str], chunks: Iterable[bytes]) -> str:
    """:func:`write_atomic` of the concatenated ``chunks``, written as they come (a large
    output is never held whole in memory)."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"cannot write {path}: directory {directory} does not exist")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".torchprof-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as raw:
            out: Any = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6) if path.endswith(".gz") else raw
            try:
                for chunk in chunks:
                    out.write(chunk)
            finally:
                if out is not raw:
                    out.close()
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
