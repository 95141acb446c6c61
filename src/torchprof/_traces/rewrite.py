"""Edits to the chrome traces torchprof exports: names kineto's JSON writer mangled are restored,
and torchprof's block is added without touching a single number of the events.

kineto's writer (``libkineto/src/output_json.cpp``) replaces any name holding a byte outside
printable ASCII with ``unknown``, drops newlines, turns backslashes into slashes and quotes into
apostrophes or escapes, so ``nn.Module: Net.données [Linear]`` would come back as an op named
``unknown``. The capture knows the real names and the exact times of its events; an event of the
file is matched to one by its start and end.
"""

from __future__ import annotations

import os
from decimal import Decimal
from typing import Any

from .._errors import TraceError
from .._files import dumps, parse_json, read_bytes, write_atomic
from .._vocab import CATEGORY_KIND, PYTHON_CATEGORY, EventKind
from .reader import span_ns

#: Categories of the host events whose names come from user code (ops, regions, module ranges,
#: Python frames).
_NAMED_CATEGORIES = frozenset(
    [c for c, k in CATEGORY_KIND.items() if k in (EventKind.OP, EventKind.REGION)] + [PYTHON_CATEGORY]
)
#: Top-level key kineto writes since 2024: ``ts`` counts µs from this many ns since the epoch.
BASE_TIME_KEY = "baseTimeNanoseconds"


def mangled_by_kineto(name: str) -> bool:
    """Would kineto's JSON writer change this name? (Anything but printable ASCII, a quote or a
    backslash.)"""
    return not (name.isascii() and name.isprintable()) or '"' in name or "\\" in name


def restore_names(path: str, names: dict[tuple[int, int], str]) -> None:
    """Give the events of the trace at ``path`` their real names back: ``names`` maps an event's
    ``(start, end)`` in ns since the epoch to its name. Rewrites the file only when a name
    changes; the numbers keep their digits (the file is read exactly)."""
    if not names:
        return
    raw = read_bytes(path)
    changed = False
    try:
        data = parse_json(raw, path, exact=True)
    except TraceError:
        fixed = _escape_raw_quotes(raw, names.values())
        if fixed == raw:
            raise
        data = parse_json(fixed, path, exact=True)
        changed = True  # the file is written again, valid, whatever names change below
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        return
    base = data.get(BASE_TIME_KEY)
    # Older kineto wrote whole µs since the epoch: match at that resolution.
    resolution = 1 if type(base) is int else 1000
    base = base if type(base) is int else 0
    by_time = {(s // resolution, e // resolution): name for (s, e), name in names.items()}
    for e in data["traceEvents"]:
        if not isinstance(e, dict) or e.get("ph") != "X" or e.get("cat") not in _NAMED_CATEGORIES:
            continue
        try:
            start, end = span_ns(e.get("ts"), e.get("dur", 0))
        except ValueError:
            continue
        real = by_time.get(((start + base) // resolution, (end + base) // resolution))
        if real is not None and e.get("name") != real:
            e["name"] = real
            changed = True
    if changed:
        write_atomic(path, dumps(data))


#: Categories of device work and of the runtime calls that launch it (one correlation id each).
_DEVICE_CATEGORIES = frozenset(c for c, k in CATEGORY_KIND.items() if k in (EventKind.DEVICE, EventKind.RUNTIME))


def retime_device_work(path: str, times: dict[tuple[bool, int], tuple[int, int]]) -> int:
    """Give the device work and runtime calls of the trace at ``path`` the times the capture
    read, where kineto wrote them without (torch 2.11 on an H200 wrote every one at ``ts`` 0 with
    ``dur`` 0). ``times`` maps ``(is device work, correlation id)`` to ``(start, end)`` in ns
    since the epoch. Rewrites the file only when every device event there is untimed; returns how
    many events got their times."""
    if not times:
        return 0
    data = parse_json(read_bytes(path), path, exact=True)
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        return 0
    base = data.get(BASE_TIME_KEY)
    if type(base) is not int:
        return 0  # older kineto's absolute µs: not the file this repairs
    device = [e for e in data["traceEvents"]
              if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in _DEVICE_CATEGORIES]  # fmt: skip
    if not device or any(e.get("ts") or e.get("dur") for e in device):
        return 0
    fixed = 0
    for e in device:
        args = e.get("args")
        corr = args.get("correlation") if isinstance(args, dict) else None
        span = times.get((CATEGORY_KIND[e["cat"]] == EventKind.DEVICE, corr)) if type(corr) is int else None
        if span is None:
            continue
        start, end = span
        e["ts"] = Decimal(start - base) / 1000
        e["dur"] = Decimal(end - start) / 1000
        fixed += 1
    if fixed:
        write_atomic(path, dumps(data))
    return fixed


def _escape_raw_quotes(raw: bytes, names: Any) -> bytes:
    """kineto of torch 2.11 writes a name's quotes as they are (``"name": "say "hi""``), which is
    no JSON: each such name, as that writer spells it (backslashes as slashes, newlines dropped),
    is written escaped. Names it writes otherwise (``unknown`` for any byte outside printable
    ASCII) are valid already."""
    for name in set(names):
        if '"' not in name:
            continue
        written = name.replace("\\", "/").replace("\n", "")
        if not (written.isascii() and written.isprintable()):
            continue
        raw = raw.replace(b'"name": "' + written.encode() + b'"', b'"name": ' + dumps(written))
    return raw


def with_block(raw: bytes, key: str, block: dict[str, Any]) -> bytes:
    """The chrome trace ``raw`` (an object or a bare event list) with ``block`` as its last
    top-level key ``key``, replacing the one an earlier export appended, without parsing or
    re-writing the events (a re-written double would lose digits of an epoch time)."""
    marker = b',' + dumps(key) + b":"
    payload = marker + dumps(block) + b"}"
    body = raw.rstrip()
    if body.lstrip()[:1] == b"[":
        return b'{"traceEvents":' + body + payload
    if body[-1:] != b"}":
        raise ValueError("not a JSON object or list")
    cut = body.rfind(marker)
    if cut >= 0:
        try:
            earlier = parse_json(body[cut + len(marker) : -1], "torchprof's block")
        except ValueError:
            earlier = None
        if isinstance(earlier, dict):  # the block an earlier export appended: replace it
            return body[:cut] + payload
    inner = body[:-1].rstrip()
    if inner.endswith(b"{"):  # an empty object
        return inner + payload[1:]
    return inner + payload


def write_with_block(source: str, key: str, block: dict[str, Any], path: str | os.PathLike[str]) -> str:
    """Write the trace at ``source`` to ``path`` with ``block`` added (see :func:`with_block`)."""
    return write_atomic(path, with_block(read_bytes(source), key, block))
