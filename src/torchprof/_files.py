"""Reading and writing the files torchprof works with: JSON (optionally gzipped), written atomically."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import secrets
import stat
import zlib
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from ._errors import TraceError as TraceError  # its home before _errors.py: kept importable from here


def _existing_file(path: str | os.PathLike[str], what: str) -> str:
    """``path`` as a string, once it names a file: FileNotFoundError or TraceError saying it does
    not (before any read, so a missing file is not blamed on its contents)."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no such {what}: {path}")
    if os.path.isdir(path):
        raise TraceError(f"{path} is a directory, not a {what}")
    return path


def write_text(path: str | os.PathLike[str], text: str) -> str:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`write_atomic`); returns the path as a
    string. A lone surrogate (from a name in a trace) is written as ``\\udXXX``, as JSON spells it."""
    return write_atomic(path, text.encode("utf-8", "backslashreplace"))


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of a ``.json`` file, or of a gzipped ``.json.gz`` file once decompressed;
    :class:`TraceError` when it is unreadable or a truncated gzip."""
    path = _existing_file(path, "trace file")
    try:
        with open(path, "rb") as f:
            raw = f.read()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        raise TraceError(f"cannot read {path}: {exc} (is it a truncated .json.gz?)") from exc
    return raw


def read_head(path: str | os.PathLike[str], size: int = 256) -> bytes:
    """The first ``size`` bytes of a ``.json`` file, or of a ``.json.gz`` file once decompressed
    (only that much is decompressed); :class:`TraceError` when it cannot be read."""
    path = _existing_file(path, "trace or saved-profile file")
    try:
        with open(path, "rb") as f:
            if f.read(2) != b"\x1f\x8b":
                f.seek(0)
                return f.read(size)
            f.seek(0)
            with gzip.open(f) as unzipped:
                return unzipped.read(size)
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceError(f"cannot read {path}: {exc} (is it a truncated .json.gz?)") from exc


def parse_json(raw: bytes, where: str, *, exact: bool = False, expected: str = "a torch.profiler chrome trace") -> Any:
    """The JSON value in ``raw``; :class:`TraceError` naming ``where`` when it is not JSON.

    By default numbers with a fraction or an exponent become floats (orjson when installed, which
    rejects NaN and Infinity). With ``exact`` they become :class:`~decimal.Decimal` with the
    literal's digits (the standard library's parser, about twice as slow as orjson), and NaN and
    Infinity are read as floats, for the caller to reject by name.
    """
    try:
        if exact:
            return json.loads(raw, parse_float=Decimal)
        try:
            import orjson
        except ImportError:
            return json.loads(raw)
        return orjson.loads(raw)
    except RecursionError as exc:
        raise TraceError(f"{where} is nested too deeply to be {expected}") from exc
    except ValueError as exc:  # json and orjson decode errors, invalid UTF-8, over-long integers
        raise TraceError(f"{where} is not valid JSON ({exc}); expected {expected}") from exc


def read_json(path: str | os.PathLike[str], expected: str = "a torch.profiler chrome trace") -> Any:
    """The JSON value in a ``.json`` or gzipped ``.json.gz`` file; :class:`TraceError` when it is
    unreadable, truncated or not JSON (saying it ``expected`` a chrome trace, or what it is given)."""
    return parse_json(read_bytes(path), os.fspath(path), expected=expected)


def plain_numbers(value: Any) -> Any:
    """``value`` with every :class:`~decimal.Decimal` (from an ``exact`` parse) turned into a float,
    for metadata handed to users. An explicit stack: nested JSON can be deep."""
    if isinstance(value, Decimal):
        return float(value)
    if not isinstance(value, (dict, list)):
        return value
    out: Any = {} if isinstance(value, dict) else []
    stack = [(value, out)]
    while stack:
        src, dst = stack.pop()
        for key, v in src.items() if isinstance(src, dict) else enumerate(src):
            if isinstance(v, (dict, list)):
                child: Any = {} if isinstance(v, dict) else []
                stack.append((v, child))
            else:
                child = float(v) if isinstance(v, Decimal) else v
            if isinstance(dst, dict):
                dst[key] = child
            else:
                dst.append(child)
    return out


def dumps(data: Any) -> bytes:
    """Compact JSON bytes (orjson when installed). A :class:`~decimal.Decimal` from an ``exact``
    parse is written with its own digits where orjson can (a float otherwise)."""
    try:
        import orjson
    except ImportError:
        return json.dumps(data, default=_json_number).encode("utf-8")
    return orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY, default=_orjson_number)


def _orjson_number(value: Any) -> Any:
    import orjson

    if isinstance(value, Decimal) and hasattr(orjson, "Fragment"):
        return orjson.Fragment(str(value).encode("ascii"))
    return _json_number(value)


def _json_number(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def _umask() -> int:
    """The process's umask (read by setting it and putting it back: there is no other way)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


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
    # The name is chosen before the file exists, and the file made inside the guarded block: an
    # interrupt (Ctrl-C) anywhere leaves the old file or the new one, and no temporary file.
    tmp = os.path.join(directory, f".torchprof-{secrets.token_hex(8)}.tmp")
    try:
        # The file written gets the mode open() would give it, as the HTML and CSV files do: an
        # existing file's own, else what the umask leaves of 0666.
        mode = 0o666 & ~_umask()
        with contextlib.suppress(OSError):
            mode = stat.S_IMODE(os.stat(path).st_mode)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
        with os.fdopen(fd, "wb") as raw:
            with contextlib.suppress(OSError):
                os.chmod(tmp, mode)
            out: Any = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6) if path.endswith(".gz") else raw
            try:
                for chunk in chunks:
                    out.write(chunk)
            finally:
                if out is not raw:
                    out.close()
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path
