"""Reading and writing the files torchprof works with: JSON (optionally gzipped), written atomically."""

from __future__ import annotations

import codecs
import contextlib
import gzip
import json
import os
import re
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


#: A JSON escape of a UTF-16 surrogate (``\\ud800``): one that is not half of a pair is no text.
_SURROGATE_ESCAPE = re.compile(rb"(\\+)u([dD][89a-fA-F][0-9a-fA-F]{2})")


def escape_unwritable(raw: bytes) -> bytes:
    """JSON ``raw`` with what no text can hold written as text: an escaped lone surrogate
    (``\\ud800``, not half of a pair) becomes the six characters ``\\ud800``, and a byte that is
    not UTF-8 the four characters ``\\xff``. So names from any trace are text that every writer
    (orjson, a browser, a terminal) takes, escaped the same way each time, and a pair (an emoji
    written as two escapes) stays what it is."""
    if not raw.isascii():
        raw = raw.decode("utf-8", "torchprof-json-bytes").encode("utf-8")
    if not _SURROGATE_ESCAPE.search(raw):
        return raw
    out: list[bytes] = []
    at = 0
    matches = list(_SURROGATE_ESCAPE.finditer(raw))
    for k, m in enumerate(matches):
        slashes, code = m.group(1), int(m.group(2), 16)
        if len(slashes) % 2 == 0:
            continue  # an escaped backslash, then text
        high = code < 0xDC00
        if high:
            nxt = matches[k + 1] if k + 1 < len(matches) else None
            paired = (nxt is not None and nxt.start() == m.end() and len(nxt.group(1)) == 1
                      and int(nxt.group(2), 16) >= 0xDC00)  # fmt: skip
        else:
            prev = matches[k - 1] if k > 0 else None
            paired = (prev is not None and prev.end() == m.start() and len(prev.group(1)) % 2 == 1
                      and int(prev.group(2), 16) < 0xDC00)  # fmt: skip
        if paired:
            continue
        cut = m.end(1) - 1  # the escape's own backslash: doubled, it is text
        out.append(raw[at:cut])
        out.append(b"\\\\")
        at = cut + 1
    out.append(raw[at:])
    return b"".join(out)


def _json_bytes_as_text(exc: UnicodeError) -> tuple[str, int]:
    """A byte that is not UTF-8, in JSON text: an escaped backslash and its hex (``\\\\xff``)."""
    bad = exc.object[exc.start : exc.end]  # type: ignore[attr-defined]
    return "".join(f"\\\\x{b:02x}" for b in bad), exc.end  # type: ignore[attr-defined]


codecs.register_error("torchprof-json-bytes", _json_bytes_as_text)


def parse_json(raw: bytes, where: str, *, exact: bool = False, expected: str = "a torch.profiler chrome trace") -> Any:
    """The JSON value in ``raw``; :class:`TraceError` naming ``where`` when it is not JSON.

    By default numbers with a fraction or an exponent become floats (orjson when installed, which
    rejects NaN and Infinity). With ``exact`` they become :class:`~decimal.Decimal` with the
    literal's digits (the standard library's parser, about twice as slow as orjson), and NaN and
    Infinity are read as floats, for the caller to reject by name.
    """
    raw = escape_unwritable(raw)
    try:
        if exact:
            return json.loads(raw, parse_float=Decimal)
        try:
            import orjson
        except ImportError:
            return json.loads(raw)
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return json.loads(raw, parse_constant=_no_constant)  # integers past 64 bits: the standard parser reads them
    except RecursionError as exc:
        raise TraceError(f"{where} is nested too deeply to be {expected}") from exc
    except ValueError as exc:  # json and orjson decode errors, invalid UTF-8, over-long integers
        raise TraceError(f"{where} is not valid JSON ({exc}); expected {expected}") from exc


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


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
    try:
        return orjson.dumps(data, option=orjson.OPT_SERIALIZE_NUMPY, default=_orjson_number)
    except TypeError:
        # A lone surrogate or an integer past 64 bits (a trace's own metadata): the standard
        # writer spells both (the surrogate as an escape, read back as its text).
        return json.dumps(data, default=_json_number).encode("ascii")


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
