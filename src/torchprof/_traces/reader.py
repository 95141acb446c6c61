"""Reading chrome-trace JSON written by ``torch.profiler`` (or by torchprof) into plain records.

Times become exact integer nanoseconds whatever the epoch of the file. Chrome traces give them in
µs: kineto writes integers (before 2024), epoch µs with three decimals (spring 2024), or µs since
``baseTimeNanoseconds`` with three decimals (since). An integer times 1000 is exact. A double
holds a three-decimal value exactly enough to recover its nanoseconds only below 2**43 µs (102
days); above that (epoch µs are about 1.7e15) its spacing is 0.25 µs, so
``round(ts * 1000.0)`` moves events by up to 128 ns and nests events that touch. So the file is
parsed fast (orjson) and each fractional time checked; if one cannot be pinned to the nanosecond,
the file is parsed again keeping every literal's digits (:class:`~decimal.Decimal`).

Anything malformed in an event torchprof reads is a :class:`~torchprof.TraceError` naming the
event's index in ``traceEvents`` and the field.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import zlib
from array import array
from collections.abc import Callable
from decimal import ROUND_FLOOR, Context, Decimal
from itertools import compress, repeat
from operator import contains
from typing import Any, cast

from .._capture.distributed import checked_ddp_buckets
from .._errors import TraceError
from .._files import _existing_file, escape_unwritable, parse_json, plain_numbers, read_bytes
from .._records import (
    CompiledGraph,
    EventColumns,
    KnownTensor,
    ModuleInfo,
    Recording,
    checked_step_times,
    module_range_name,
    parse_module_range,
)
from .._vocab import (
    CATEGORY_KIND,
    COMPILED_REGION_PREFIX,
    CPU_DEVICE_TYPES,
    DEVICE_LINKED_KINDS,
    INSTANT_CATEGORY,
    LIGHTNING_MODULE_PREFIX,
    MEMORY_CATEGORIES,
    MEMORY_EVENT,
    MODULE_PREFIX,
    PROFILER_SPAN_PREFIX,
    PYTHON_CATEGORY,
    SPAN_CATEGORY,
    TRACE_META_KEY,
    EventKind,
    TraceArg,
)

OP, REGION, MODULE, DEVICE, MEMORY, IGNORED, PYFRAME = map(int, (
    EventKind.OP, EventKind.REGION, EventKind.MODULE, EventKind.DEVICE, EventKind.MEMORY, EventKind.IGNORED,
    EventKind.PYFRAME))  # fmt: skip
_LINKED = frozenset(int(k) for k in DEVICE_LINKED_KINDS)
_TORCH_MODULE = re.compile(r"^nn\.Module: (.+?)(?:_\d+)?$")
#: Name prefixes of events whose kind depends on more than their category.
_LOOK_CLOSER = (MODULE_PREFIX, COMPILED_REGION_PREFIX, LIGHTNING_MODULE_PREFIX)

#: The integer columns of the events, packed (see _EventReader); the memory columns are filled
#: at the end, from the memory events only.
_PACKED = ("start", "end", "seq", "fwd_tid", "ext_id", "link", "corr")
_MEMORY_PACKED = ("nbytes", "mem_total")
#: Event args read after the events (lazily): the rest are read as each event is, then dropped.
_KEPT_ARGS = frozenset({TraceArg.INPUT_DIMS, TraceArg.CONCRETE_INPUTS, TraceArg.MODULE_HIERARCHY})
_NO_ARGS: dict[str, Any] = {}
#: Times are int64 nanoseconds in kineto; anything beyond is not a time.
MAX_NS = 2**63 - 1
_MAX_US = MAX_NS // 1000
#: Event kinds by category, as plain ints (faster to compare than the enum).
_KIND_OF = {cat: int(kind) for cat, kind in CATEGORY_KIND.items()}
#: The categories whose complete events _EventReader._add_plain reads inline (their name decides
#: nothing more, unless it has a prefix of _LOOK_CLOSER); the others' events go through add.
_PLAIN_KIND: dict[Any, int] = {cat: kind for cat, kind in _KIND_OF.items() if kind != MEMORY}
#: Ids (sequence numbers, correlation ids, byte counts) are int64 or uint64 in kineto.
_ID_MIN, _ID_MAX = -(2**63), 2**64 - 1
#: Below this many µs a double is spaced finer than 1/1024 µs, so it pins a three-decimal
#: literal to one nanosecond.
_DOUBLE_EXACT_US = 2.0**43
#: Floors exactly: an integer of up to 60 digits is representable, so rounding a product or sum
#: down never crosses it.
_EXACT = Context(prec=60, rounding=ROUND_FLOOR, Emax=10**6, Emin=-(10**6))


class NeedsDigits(Exception):
    """A fractional time a double cannot pin to the nanosecond: read the file keeping digits."""


# -- numbers ----------------------------------------------------------------------------------------
def time_ns(value: Any) -> int:
    """A chrome-trace time (µs: ``ts``, ``dur``) as integer nanoseconds, floored where a literal
    has digits below the nanosecond; ValueError saying what is wrong; :class:`NeedsDigits` for a
    double that cannot say."""
    t = type(value)
    if t is int:
        ns = value * 1000
    elif t is float:
        ns = _double_ns(value)
    elif t is Decimal:
        if not value.is_finite():
            raise ValueError(f"is {value}")
        if value.copy_abs() > _MAX_US + 1:  # before scaling: "1e999999999" must not be expanded
            raise ValueError("is out of range")
        ns = math.floor(value.scaleb(3, _EXACT))
    else:
        raise ValueError(f"must be a number, not {_type_name(value)}")
    if not -MAX_NS <= ns <= MAX_NS:
        raise ValueError("is out of range")
    return ns


def _double_ns(x: float) -> int:
    # The literal was n/1000 µs for the n whose correctly rounded quotient is x (int / int is
    # correctly rounded, as the JSON parser is); below 2**43 at most one n qualifies.
    if -_DOUBLE_EXACT_US < x < _DOUBLE_EXACT_US:  # False for NaN
        n = round(x * 1000)
        if n / 1000 == x:
            return n
        for m in (n - 1, n + 1):
            if m / 1000 == x:
                return m
        raise NeedsDigits  # digits below the nanosecond: floor the literal itself
    if math.isnan(x):
        raise ValueError("is NaN")
    if math.isinf(x):
        raise ValueError("is infinite")
    raise NeedsDigits


def span_ns(ts: Any, dur: Any, start: int | None = None) -> tuple[int, int]:
    """``(start, end)`` of an event in integer nanoseconds (``start``: ``time_ns(ts)`` when known).
    The end is the floor of the exact ``ts + dur``, so events that touch in the file touch here,
    and a child never outgrows its parent."""
    if start is None:
        start = time_ns(ts)
    d = time_ns(dur)
    if d < 0:
        raise ValueError("is negative: a negative duration is not a real event")
    if type(ts) is Decimal or type(dur) is Decimal:
        return start, time_ns(_EXACT.add(Decimal(ts), Decimal(dur)))
    return start, start + d


def _id(args: dict[str, Any], key: str, default: int) -> int:
    value = args.get(key, default)
    if type(value) is int and _ID_MIN <= value <= _ID_MAX:
        return value
    if value is None:
        return default
    t = type(value)
    whole = (t is float and math.isfinite(value) and value.is_integer()) or (
        t is Decimal and value.is_finite() and value == value.to_integral_value())  # fmt: skip
    if t is not int and not whole:
        raise ValueError(f"{key!r} must be an integer, not {_describe(value)}")
    if not _ID_MIN <= value <= _ID_MAX:  # compared before int(): 1e999999999 must not be expanded
        raise ValueError(f"{key!r} is out of range ({_clip(value)})")
    return int(value)


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", Decimal: "a number", float: "a number"}
    return names.get(type(value), type(value).__name__)


def _describe(value: Any) -> str:
    """``a string '12'``, ``the number 2.5``: a wrong value, as an error names it."""
    if type(value) in (float, Decimal):
        return f"the number {value}"
    return f"{_type_name(value)} {_clip(value)}"


def _clip(value: Any) -> str:
    if type(value) is int and not -(10**40) < value < 10**40:
        return "an integer of more than 40 digits"
    text = str(value) if type(value) in (int, Decimal) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# -- events -----------------------------------------------------------------------------------------
class _EventReader:
    """Events of a chrome trace, column-wise, one event at a time: what each is (its kind), when
    (exact ns), on which thread, and the ids that join backward ops, launches and device work."""

    def __init__(self) -> None:
        self.cols = EventColumns()
        self.args_of: list[dict[str, Any]] = []
        self.facts: dict[str, Any] = {}
        self.torch_modules: list[int] = []  # torch's own "nn.Module: Linear_0" events
        self.lightning_modules: list[int] = []  # Lightning's "[pl][module]<type>: <name>" ranges
        # (event, address, device index, bytes, on the device, total allocated) of memory events
        self.memory: list[tuple[int, int, int, int, bool, int]] = []
        self.has_our_modules = False
        self._names: dict[str, str] = {}
        self._plain_names: dict[str, str] = {}  # the names read inline (none of _LOOK_CLOSER), as _names holds them
        self.seen = 0  # events of the file read so far, kept or not
        self._threads: dict[tuple[Any, Any], tuple[Any, Any]] = {}  # one (pid, tid) tuple per thread
        c = self.cols
        # Numbers as machine integers (8 bytes each, not a 32-byte int object and a pointer): a
        # column holding a number beyond int64 (an id up to 2**64) becomes a list (_widen).
        self.packed = True
        for field in _PACKED:
            setattr(c, field, cast(list[int], array("q")))
        c.kind = cast(list[int], bytearray())
        self._bind()

    def _columns(self) -> tuple[list[Any], ...]:
        c = self.cols
        assert c.seq is not None
        return (c.name, c.kind, c.tid, c.start, c.end, c.seq, c.fwd_tid, c.ext_id, c.link, c.corr, self.args_of)

    def _bind(self) -> None:
        self._appends: tuple[Callable[[Any], None], ...] = tuple(column.append for column in self._columns())

    def _widen(self) -> None:
        """After an event whose number does not fit 64 bits: its part-appended fields dropped, and
        every packed column a list (they hold any integer)."""
        n = min(len(column) for column in self._columns())
        for column in self._columns():
            del column[n:]
        c = self.cols
        for field in _PACKED:
            setattr(c, field, list(getattr(c, field)))
        self.packed = False
        self._bind()

    def add(self, e: Any) -> None:
        if type(e) is not dict:
            raise ValueError(f"is {_type_name(e)}, not an object")
        cat = e.get("cat")
        if cat is not None and type(cat) is not str:
            raise ValueError(f"'cat' must be a string, not {_type_name(cat)}")
        ph = e.get("ph")
        if ph == "X":
            kind = _KIND_OF.get(cat, IGNORED) if cat is not None else IGNORED
            name: Any = e.get("name")
            if kind == IGNORED or type(name) is not str or name.startswith(_LOOK_CLOSER):
                kind = self._kind(e, cat, kind)
                if kind == IGNORED:
                    return
            # The two common cases inline: integer µs (kineto before 2024), and three-decimal
            # µs since baseTimeNanoseconds that a double pins exactly (since); else _span.
            ts, dur = e.get("ts"), e.get("dur", 0)
            if type(ts) is int and type(dur) is int and dur >= 0 and -_MAX_US <= ts <= _MAX_US - dur:
                start = ts * 1000
                end = start + dur * 1000
            elif type(ts) is float and type(dur) is float and -_DOUBLE_EXACT_US < ts < _DOUBLE_EXACT_US and 0.0 <= dur < _DOUBLE_EXACT_US:
                start = round(ts * 1000)
                end = round(dur * 1000)
                if start / 1000 == ts and end / 1000 == dur:
                    end += start
                else:
                    start, end = self._span(e)
            else:
                start, end = self._span(e)
        elif ph == "i" and cat == INSTANT_CATEGORY and e.get("name") == MEMORY_EVENT:
            kind, name = MEMORY, MEMORY_EVENT
            start = end = self._time(e, "ts")
        else:
            if ph is not None and type(ph) is not str:
                raise ValueError(f"'ph' must be a string, not {_type_name(ph)}")
            return
        args = e.get("args")
        if args is None:
            args = {}
        elif type(args) is not dict:
            raise ValueError(f"'args' must be an object, not {_type_name(args)}")
        self._append(e, kind, name, start, end, args)

    def add_all(self, events: list[Any]) -> None:
        """Add ``events``, the next ones of the file (errors name an event by its index there)."""
        stop = self._add_plain(events) if self.packed else 0
        for i in range(stop, len(events)):
            self._add_one(events[i], self.seen + i)
        self.seen += len(events)

    def _add_one(self, e: Any, index: int) -> None:
        try:
            self.add(e)
        except ValueError as exc:
            raise TraceError(f"event {index} of traceEvents: {exc}") from None
        except OverflowError:  # a number array("q") cannot hold, checked valid by add
            self._widen()
            self.add(e)

    def _add_plain(self, events: list[Any]) -> int:
        """:meth:`add` of each event, with the common one read inline: a complete event of a
        category that says its kind, a name, integer or pinned µs, a thread and integer ids (a
        call and a dozen appends per event were most of a big trace's load). Anything else, and
        every error, goes through :meth:`add`. Returns where it stopped: after an event that
        widened the columns (then the others are read one at a time), else at the end."""
        (add_name, add_kind, add_tid, add_start, add_end, add_seq, add_fwd, add_ext, add_link, add_corr,
         add_args) = self._appends  # fmt: skip
        name_of, thread_of, kind_of = self._names.setdefault, self._threads.setdefault, _PLAIN_KIND.get
        plain_names = self._plain_names
        plain_name = plain_names.get
        seq_key, fwd_key, ext_key, old_key, corr_key = (TraceArg.SEQUENCE, TraceArg.FWD_THREAD, TraceArg.EXTERNAL_ID,
                                                        TraceArg.EXTERNAL_ID_OLD, TraceArg.CORRELATION)  # fmt: skip
        dims_key, concrete_key, hierarchy_key = TraceArg.INPUT_DIMS, TraceArg.CONCRETE_INPUTS, TraceArg.MODULE_HIERARCHY
        no_args, max_us, exact_us = _NO_ARGS, _MAX_US, _DOUBLE_EXACT_US
        first = self.seen
        last_pid: Any = None  # the thread of the event before: runs of events share it
        last_tid: Any = None
        last_thread: tuple[Any, Any] = (None, None)
        for i, e in enumerate(events):
            try:
                if type(e) is not dict:
                    pass
                elif (ph := e["ph"]) != "X":  # (subscripts, not get: faster; KeyError: add reads it)
                    if ph != "i" and (ph is None or type(ph) is str) and ((cat := e.get("cat")) is None or type(cat) is str):
                        continue  # not an event torchprof reads
                elif (kind := kind_of(e["cat"], -1)) == IGNORED:  # TypeError: an unhashable category
                    continue
                elif kind >= 0 and type(name := e["name"]) is str and (
                        (known := plain_name(name)) is not None or not name.startswith(_LOOK_CLOSER)):
                    # -1 from here on: not plain after all, add reads it.
                    ts, dur = e["ts"], e["dur"]
                    if type(ts) is int and type(dur) is int and dur >= 0 and -max_us <= ts <= max_us - dur:
                        start = ts * 1000
                        end = start + dur * 1000
                    elif (type(ts) is float and type(dur) is float and -exact_us < ts < exact_us and 0.0 <= dur < exact_us
                          and (start := round(ts * 1000)) / 1000 == ts and (end := round(dur * 1000)) / 1000 == dur):  # fmt: skip
                        end += start
                    else:
                        kind = -1
                    pid, tid, args = e["pid"], e["tid"], e.get("args")
                    if args is None:
                        args = no_args
                    if not ((type(pid) is int or type(pid) is str) and (type(tid) is int or type(tid) is str) and type(args) is dict):
                        kind = -1
                    elif not args:
                        seq, fwd, ext, link, corr = -1, 0, 0, 0, 0
                    else:
                        seq, fwd, ext = args.get(seq_key, -1), args.get(fwd_key, 0), args.get(ext_key, 0)
                        if ext == 0 and type(ext) is int:
                            ext = args.get(old_key, 0)
                        # Only the args read later (shapes, a TorchScript op's modules) are kept.
                        if kind in _LINKED:
                            link, corr, args = ext, args.get(corr_key, 0), no_args
                        else:
                            link = corr = 0
                            if not (dims_key in args or concrete_key in args or hierarchy_key in args):
                                args = no_args
                        if not (type(seq) is int and type(fwd) is int and type(ext) is int and type(corr) is int):
                            kind = -1
                    if kind >= 0:
                        # One string per distinct name and one tuple per thread, not one per event.
                        if tid != last_tid or pid != last_pid:
                            last_pid, last_tid = thread = (pid, tid)
                            last_thread = thread_of(thread, thread)
                        if known is None:
                            known = plain_names[name] = name_of(name, name)
                        add_name(known)
                        add_kind(kind)
                        add_tid(last_thread)
                        add_start(start)
                        add_end(end)
                        add_seq(seq)
                        add_fwd(fwd)
                        add_ext(ext)
                        add_link(link)
                        add_corr(corr)
                        add_args(args)
                        continue
            except (TypeError, KeyError):  # an unhashable category, a field left out: add reads it
                pass
            except OverflowError:  # an id beyond int64: add checks it, and the columns are widened
                self._widen()  # drops the event's part-appended fields
            self._add_one(e, first + i)
            if not self.packed:
                return i + 1
        return len(events)

    def truncate(self, n: int, seen: int) -> None:
        """Forget every event after the first ``n`` kept (``seen`` read): a chunk read again."""
        self.seen = seen
        for column in self._columns():
            del column[n:]
        self.torch_modules = [i for i in self.torch_modules if i < n]
        self.lightning_modules = [i for i in self.lightning_modules if i < n]
        self.memory = [m for m in self.memory if m[0] < n]

    def _kind(self, e: dict[str, Any], cat: str | None, kind: int) -> int:
        """What a complete ("X") event of category kind ``kind`` is, where its name or category
        needs a closer look; IGNORED for events not read (their other fields unchecked)."""
        if kind == IGNORED:
            if cat == SPAN_CATEGORY:
                # The profiler's own span is the window; kineto writes it first and each
                # backend's span (CUPTI's, MTIA's) after it, shorter. Several of its own (one
                # per cycle of a schedule, in torchprof's export of every cycle): all of them.
                name = e.get("name")
                own = isinstance(name, str) and name.startswith(PROFILER_SPAN_PREFIX)
                if "span" not in self.facts or (own and not self.facts.get("own_span")):
                    self.facts["span"] = self._span(e)
                    self.facts["own_span"] = own
                elif own:
                    lo, hi = self._span(e)
                    self.facts["span"] = (min(lo, self.facts["span"][0]), max(hi, self.facts["span"][1]))
            elif cat == PYTHON_CATEGORY:
                kind = MODULE if self._name(e).startswith(MODULE_PREFIX) else PYFRAME
                if kind == MODULE:
                    self.torch_modules.append(len(self.cols.name))
            return kind
        name = self._name(e)
        # Only an op can be one of our module ranges (the hooks open function-scope ranges, written
        # as cpu_op): a user_annotation with the same name is a user's region, not a module.
        if kind == OP and name.startswith(MODULE_PREFIX) and parse_module_range(name) is not None:
            self.has_our_modules = True
            return MODULE
        if kind == OP and name.startswith(COMPILED_REGION_PREFIX):
            return REGION  # a compiled frame, as the live capture sees it
        if kind == REGION and name.startswith(LIGHTNING_MODULE_PREFIX) and lightning_module(name) is not None:
            self.lightning_modules.append(len(self.cols.name))
            return MODULE
        return kind

    @staticmethod
    def _name(e: dict[str, Any]) -> str:
        name = e.get("name")
        if type(name) is not str:
            raise ValueError(f"'name' must be a string, not {_type_name(name)}")
        return name

    @staticmethod
    def _time(e: dict[str, Any], field: str) -> int:
        if field not in e:
            raise ValueError(f"has no {field!r}")
        try:
            return time_ns(e[field])
        except ValueError as exc:
            raise ValueError(f"{field!r} {exc}") from None

    @staticmethod
    def _span(e: dict[str, Any]) -> tuple[int, int]:
        ts = e.get("ts")
        if ts is None:
            raise ValueError("has no 'ts'" if "ts" not in e else "'ts' must be a number, not null")
        try:
            start = time_ns(ts)
        except ValueError as exc:
            raise ValueError(f"'ts' {exc}") from None
        try:
            return span_ns(ts, e.get("dur", 0), start)
        except ValueError as exc:
            raise ValueError(f"'dur' {exc}") from None

    def _append(self, e: dict[str, Any], kind: int, name: str, start: int, end: int, args: dict[str, Any]) -> None:
        (add_name, add_kind, add_tid, add_start, add_end, add_seq, add_fwd, add_ext, add_link, add_corr,
         add_args) = self._appends  # fmt: skip
        # One string per distinct name and one tuple per thread, not one per event (millions).
        add_name(self._names.setdefault(name, name))
        add_kind(kind)
        pid, tid = e.get("pid", 0), e.get("tid", 0)
        if not (type(pid) is int or type(pid) is str) or not (type(tid) is int or type(tid) is str):
            pid, tid = _thread(e, "pid"), _thread(e, "tid")
        thread = (pid, tid)
        add_tid(self._threads.setdefault(thread, thread))
        add_start(start)
        add_end(end)
        if not args:  # most events of a big trace: every id unknown
            add_seq(-1)
            add_fwd(0)
            add_ext(0)
            add_link(0)
            add_corr(0)
            if kind == MEMORY:
                self.memory.append((len(self.args_of), 0, -1, 0, False, 0))
            add_args(_NO_ARGS)
            return
        add_seq(_id(args, TraceArg.SEQUENCE, -1))
        add_fwd(_id(args, TraceArg.FWD_THREAD, 0))
        ext = _id(args, TraceArg.EXTERNAL_ID, 0) or _id(args, TraceArg.EXTERNAL_ID_OLD, 0)
        add_ext(ext)
        if kind in _LINKED:
            add_link(ext)
            add_corr(_id(args, TraceArg.CORRELATION, 0))
        else:
            add_link(0)
            add_corr(0)
        if kind == MEMORY:
            on_device = _id(args, TraceArg.DEVICE_TYPE, 0) not in CPU_DEVICE_TYPES
            self.memory.append((len(self.args_of), _id(args, TraceArg.ADDR, 0), _id(args, TraceArg.DEVICE_ID, 0 if on_device else -1),
                                _id(args, TraceArg.BYTES, 0), on_device, _id(args, TraceArg.TOTAL_ALLOCATED, 0)))  # fmt: skip
        # Only the args read later (shapes, a TorchScript op's modules: never a runtime call's or a
        # kernel's) are kept.
        add_args(args if kind not in _LINKED and _KEPT_ARGS & args.keys() else _NO_ARGS)

    def _script_modules(self) -> None:
        """Module ranges for a TorchScript model profiled ``with_modules``: its ops carry the module
        hierarchy they ran in, not module events. Per thread, in time order, each run of ops in
        one module becomes one call of it (and of each module around it), from its first op's
        start to the last end of its ops. Calls of one module back to back read as one call.
        O(ops log ops)."""
        args_of, cols = self.args_of, self.cols
        key = TraceArg.MODULE_HIERARCHY
        found = [i for i in compress(range(len(args_of)), map(contains, args_of, repeat(key))) if cols.kind[i] == OP]
        if not found:
            return
        found.sort(key=lambda i: (cols.start[i], -cols.end[i]))
        root_type = ""
        chains: dict[int, list[tuple[str, str]]] = {}
        for i in found:
            h = args_of[i][key]
            chains[i] = script_modules(h) if isinstance(h, str) else []
            if not root_type and chains[i] and chains[i][0][0] != "ScriptModule":
                root_type = chains[i][0][1]
        opened: dict[Any, list[list[Any]]] = {}  # per thread: [path, type, start, end] outermost first
        calls: list[tuple[Any, list[Any]]] = []
        for i in found:
            chain = chains[i]
            if root_type and chain and chain[0][0] == "ScriptModule":  # the root, once it was named
                chain = [(root_type + p[len("ScriptModule") :], t or root_type) for p, t in chain]
            tid = cols.tid[i]
            stack = opened.setdefault(tid, [])
            keep = 0
            while keep < len(stack) and keep < len(chain) and stack[keep][0] == chain[keep][0]:
                keep += 1
            calls.extend((tid, call) for call in stack[keep:])
            del stack[keep:]
            stack.extend([path, type_name, cols.start[i], cols.end[i]] for path, type_name in chain[keep:])
            for call in stack:
                if cols.end[i] > call[3]:
                    call[3] = cols.end[i]
        calls.extend((tid, call) for tid, stack in opened.items() for call in stack)
        for (pid, tid), (path, type_name, start, end) in calls:
            self._append({"pid": pid, "tid": tid}, MODULE, module_range_name(path, type_name), start, end, {})

    def finish(self) -> tuple[EventColumns, dict[str, Any]]:
        cols = self.cols
        # One source of layers: torchprof's own ranges, else Lightning's (named as the model
        # names them), else torch's (named by class and a number); the others mark the same
        # calls again and are not read.
        for i in self.lightning_modules:
            if self.has_our_modules:
                cols.kind[i] = REGION
            else:
                path, type_name = lightning_module(cols.name[i]) or ("", "")
                cols.name[i] = module_range_name(path, type_name)
        if not (self.has_our_modules or self.lightning_modules or self.torch_modules):
            self._script_modules()
        if self.torch_modules:
            if self.has_our_modules or self.lightning_modules:  # torchprof's ranges name the same calls better
                for i in self.torch_modules:
                    cols.kind[i] = IGNORED
            else:
                _name_torch_modules(cols, self.torch_modules)
        args_of = self.args_of

        def inputs(i: int) -> tuple[list, list] | None:
            args = args_of[i]
            dims = args.get(TraceArg.INPUT_DIMS)
            if type(dims) is not list:  # absent, or not shapes: unknown
                return None
            return dims, _concrete(args.get(TraceArg.CONCRETE_INPUTS), len(dims))

        cols.inputs = inputs
        _read_memory_columns(cols, len(args_of), self.memory, self.packed)
        if "span" in self.facts:
            cols.span = self.facts["span"]
        return cols, self.facts


def _read_memory_columns(cols: EventColumns, n: int, memory: list[tuple[int, int, int, int, bool, int]], packed: bool) -> None:
    """The memory columns of ``n`` events, from each memory event's (checked) arguments; the
    others' are 0. Bytes and totals packed as the other numbers are (``packed``) where they fit."""
    on_cuda = bytearray(n)
    for field in _MEMORY_PACKED:
        setattr(cols, field, array("q", bytes(8 * n)) if packed else [0] * n)
    try:
        nbytes, mem_total = cols.nbytes, cols.mem_total
        for i, _, _, size, on_device, total in memory:
            nbytes[i], on_cuda[i], mem_total[i] = size, on_device, total
    except OverflowError:  # a count beyond int64 (they are uint64 in kineto)
        return _read_memory_columns(cols, n, memory, False)
    cols.on_cuda = cast(list[bool], on_cuda)
    if memory:
        cols.mem_addr, cols.mem_device = [0] * n, [0] * n
        for i, addr, device, *_ in memory:
            cols.mem_addr[i] = addr
            cols.mem_device[i] = device
    return None


def _thread(e: dict[str, Any], field: str) -> Any:
    value = e.get(field, 0)
    if type(value) is int or type(value) is str:
        return value
    if value is None:
        return 0
    raise ValueError(f"{field!r} must be an integer or a string, not {_type_name(value)}")


def columns_from_events(events: list[Any]) -> tuple[EventColumns, dict[str, Any]]:
    """Events of a chrome trace, column-wise; also the facts found on the way (the trace span).
    :class:`TraceError` naming the event and field that is malformed."""
    reader = _EventReader()
    reader.add_all(events)
    return reader.finish()


_SCRIPT_SEGMENT = re.compile(r"(?:^|\.)([^.()]*)\(([^()]*)\)::")


def script_modules(hierarchy: str) -> list[tuple[str, str]]:
    """The modules a TorchScript op ran in, outermost first, as ``(path, type)``, from its ``Module
    Hierarchy`` (``TOP(Net)::forward.fc1(Linear)::forward.`` -> Net, Net.fc1): the root is ``TOP``
    (its type, once named, is its path; unnamed, ``ScriptModule``), each level ``name(Type)::method``."""
    out: list[tuple[str, str]] = []
    for name, type_name in _SCRIPT_SEGMENT.findall(hierarchy):
        if not out:
            out.append((type_name or "ScriptModule", type_name or "ScriptModule"))
        elif name:
            out.append((f"{out[-1][0]}.{name}", type_name))
    return out


def lightning_module(name: str) -> tuple[str, str] | None:
    """``(path, type)`` of a Lightning module range (``[pl][module]torch.nn.modules.linear.Linear:
    encoder.0`` -> ``("encoder.0", "Linear")``), None for any other name."""
    qualified, sep, path = name[len(LIGHTNING_MODULE_PREFIX) :].partition(": ")
    if not sep or not path or not qualified:
        return None
    return path, qualified.rpartition(".")[2]


def _name_torch_modules(cols: EventColumns, idx: list[int]) -> None:
    """torch's python tracer names module calls ``nn.Module: Conv2d_3`` (class and an id) with no
    path: give them paths from how they nest (``ResNet.Conv2d_3``), in torchprof's range format."""
    idx = sorted(idx, key=lambda i: (cols.start[i], -cols.end[i]))  # threads may be named by str or int
    stacks: dict[Any, list[tuple[int, str]]] = {}
    for i in idx:
        stack = stacks.setdefault(cols.tid[i], [])
        while stack and cols.end[stack[-1][0]] <= cols.start[i]:
            stack.pop()
        raw = cols.name[i][len(MODULE_PREFIX) :]
        m = _TORCH_MODULE.match(cols.name[i])
        type_name = m.group(1) if m else raw
        path = f"{stack[-1][1]}.{raw}" if stack else raw
        cols.name[i] = module_range_name(path, type_name)
        stack.append((i, path))


def _concrete(values: Any, n: int) -> list[Any]:
    """Concrete Inputs are strings in a trace (``"[1, 1]"``, ``"False"``, ``""``): parse them;
    ``n`` unknowns when absent."""
    if not isinstance(values, list) or not values:
        return [None] * n
    out: list[Any] = []
    for v in values:
        if not isinstance(v, str):
            out.append(float(v) if isinstance(v, Decimal) else v)
            continue
        s = v.strip()
        if s == "":
            out.append(None)
        elif s in ("True", "False"):
            out.append(s == "True")
        elif s.startswith("[") and s.endswith("]"):
            inner = s[1:-1].strip()
            try:
                out.append([_scalar(x.strip()) for x in inner.split(",")] if inner else [])
            except ValueError:
                out.append(None)
        else:
            try:
                out.append(_scalar(s))
            except ValueError:
                out.append(s)
    return out


def _scalar(s: str) -> Any:
    if s in ("True", "False"):
        return s == "True"
    try:
        return int(s)
    except ValueError:
        return float(s)


# -- the file ---------------------------------------------------------------------------------------
#: Bytes of a trace parsed at a time: the file streams through this much, never whole. Parsed,
#: a chunk's events take about 20 times its size for a moment (dicts, strings, ints).
CHUNK_BYTES = 256 << 10
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_SPACE = b" \t\r\n"


def read_trace(path: str | os.PathLike[str]) -> Recording:
    """A trace file as a :class:`Recording` (one cycle of events plus torchprof's metadata).

    The file streams through in chunks of about :data:`CHUNK_BYTES` (:func:`_read_streaming`),
    so memory holds the events as columns, never the file or its events as objects; a file laid
    out otherwise is read whole (:func:`_read_whole`)."""
    where = os.fspath(path)
    try:
        recording = _read_streaming(where)
    except NeedsDigits:
        recording = None
    return recording if recording is not None else _read_whole(where)


def _open(where: str) -> Any:
    path = _existing_file(where, "trace file")
    try:
        f = open(path, "rb")  # noqa: SIM115 - returned open, closed by the caller's with
        try:
            gzipped = f.read(2) == b"\x1f\x8b"
            f.seek(0)
        except BaseException:
            f.close()
            raise
        if gzipped:
            # Opened by name: a GzipFile over a file object closes only itself, never the file.
            f.close()
            return gzip.open(path, "rb")
        return f
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc}") from exc


def _read_streaming(where: str) -> Recording | None:
    try:
        return _streamed(where)
    except TraceError as exc:
        raise TraceError(f"{where}: {exc}") from None


def _streamed(where: str) -> Recording | None:
    """The trace read chunk by chunk: the bytes up to ``"traceEvents": [`` (the head), then runs of
    whole events, each cut after a ``}`` followed by ``,`` and parsed as a JSON array of its own
    (a cut inside a string or a nested value cannot parse: the cut before it is tried), then
    what follows the array (the tail), checked with the head as one JSON object. None when the
    file is laid out otherwise (no ``traceEvents`` array near its start, or a chunk that does
    not parse alone): :func:`_read_whole` then reads it, and names any error. Exactness per
    chunk: one that holds a time a double cannot pin is parsed again keeping every digit."""
    with _open(where) as stream:
        try:
            block = stream.read(CHUNK_BYTES)
        except (OSError, EOFError, zlib.error) as exc:
            raise TraceError(f"cannot read {where}: {exc} (is it a truncated .json.gz?)") from exc
        found = _EVENTS_KEY.search(block)
        if found is None:
            return None
        head, buf = block[: found.end()], block[found.end() :]
        exact = _epoch_decimals(block)
        reader = _EventReader()
        done = eof = False
        tail = b""
        while not done:
            if not eof and len(buf) < CHUNK_BYTES:
                try:
                    more = stream.read(CHUNK_BYTES)
                except (OSError, EOFError, zlib.error) as exc:
                    raise TraceError(f"cannot read {where}: {exc} (is it a truncated .json.gz?)") from exc
                eof = not more
                buf += more
                continue
            cut = _cut(buf, eof, exact)
            if cut is None:
                return None
            events, chunk, resume, done = cut
            if done:
                tail = buf[resume:]
            buf = buf[resume:]
            exact = _add_chunk(reader, events, chunk, exact)
            del events, chunk
        top = _parse_top(head, tail)
        if top is None:
            return None
        cols, facts = reader.finish()
        return _checked_columns(cols, facts, top, where, exact)


def _cut(buf: bytes, eof: bool, exact: bool) -> tuple[list[Any], bytes, int, bool] | None:
    """The last run of whole events in ``buf`` parsed: ``(events, their bytes, resume, done)``,
    ``resume`` where the next chunk starts (after the ``,``), ``done`` when the array closed
    there. Tries the cuts from the end backward (a ``},`` inside a name is rare). None when no
    cut parses."""
    end = len(buf)
    for _ in range(64):
        brace = buf.rfind(b"}", 0, end)
        if brace < 0:
            break
        j = brace + 1
        while j < len(buf) and buf[j] in _SPACE:
            j += 1
        follow = buf[j : j + 1]
        if (follow == b"," and not eof) or (eof and follow == b"]"):
            chunk = buf[: brace + 1]
            try:
                events = _parse_events(chunk, exact)
            except (ValueError, RecursionError):
                end = brace
                continue
            return events, chunk, j + 1, follow == b"]"
        end = brace
    if eof:
        stripped = buf.lstrip(_SPACE)
        if stripped.startswith(b"]"):  # no events at all
            return [], b"", len(buf) - len(stripped) + 1, True
    return None


def _parse_events(chunk: bytes, exact: bool) -> list[Any]:
    """A run of events as a list; with ``exact``, fractional numbers as their literal's digits.
    What no text can hold (a lone surrogate, a byte that is not UTF-8) is read as its escape."""
    chunk = escape_unwritable(chunk)
    if exact:
        return json.loads(b"[" + chunk + b"]", parse_float=Decimal)
    try:
        import orjson
    except ImportError:
        return json.loads(b"[" + chunk + b"]")
    try:
        return orjson.loads(b"[" + chunk + b"]")
    except orjson.JSONDecodeError:
        # NaN, Infinity or numbers beyond a double: the standard parser reads them, so the
        # event and field get named; a cut in the wrong place still fails here.
        return json.loads(b"[" + chunk + b"]", parse_float=Decimal)


def _add_chunk(reader: _EventReader, events: list[Any], chunk: bytes, exact: bool) -> bool:
    """Read one chunk's events into ``reader``; a time a double cannot pin reads the chunk again
    from its bytes keeping every digit (and every later chunk so). Returns whether later chunks
    are read so."""
    n0, seen = len(reader.cols.name), reader.seen
    try:
        reader.add_all(events)
        return exact
    except NeedsDigits:
        if exact:
            raise
    reader.truncate(n0, seen)
    reader.add_all(_parse_events(chunk, True))
    return True


def _parse_top(head: bytes, tail: bytes) -> dict[str, Any] | None:
    """The trace's top-level object without its events (head, an empty array, tail); None when
    the two do not make one object whose ``traceEvents`` is that array."""
    try:
        top = json.loads(escape_unwritable(head + b"]" + tail))
    except (ValueError, RecursionError):
        return None
    if not isinstance(top, dict) or top.get("traceEvents") != []:
        return None
    return top


def _read_whole(where: str) -> Recording:
    """The whole file parsed at once (a layout :func:`_read_streaming` does not read)."""
    raw = read_bytes(where)
    exact = _epoch_decimals(raw)  # then orjson's doubles would only be thrown away
    try:
        data = parse_json(raw, where, exact=exact)
    except TraceError:
        if exact:
            raise
        # orjson rejects NaN, Infinity and numbers beyond a double; the standard parser reads
        # them, so the event and field can be named (and truly broken JSON still fails here).
        data, exact = parse_json(raw, where, exact=True), True
    try:
        return _checked(data, where, exact)
    except NeedsDigits:
        pass
    del data  # the doubles: parse again keeping every literal's digits
    return _checked(parse_json(raw, where, exact=True), where, True)


_FIRST_TS = re.compile(rb'"ts"\s*:\s*-?(\d+)\.\d')


def _epoch_decimals(raw: bytes) -> bool:
    """Does the file's first ``ts`` have decimals beyond a double's nanoseconds (epoch µs with
    decimals, as kineto wrote in spring 2024)? A guess that only saves time: a wrong one is
    caught by :class:`NeedsDigits`."""
    m = _FIRST_TS.search(raw, 0, 1 << 20)
    return m is not None and int(m.group(1)) >= _DOUBLE_EXACT_US


def _checked(data: Any, where: str, exact: bool) -> Recording:
    try:
        return _recording(data, where, exact)
    except TraceError as exc:
        raise TraceError(f"{where}: {exc}") from None


def _recording(data: Any, where: str, exact: bool) -> Recording:
    if isinstance(data, list):
        events, top = data, {}
    elif isinstance(data, dict) and isinstance(data.get("traceEvents"), list):
        events, top = data["traceEvents"], data
    else:
        found = "a 'traceEvents' that is not a list" if isinstance(data, dict) and "traceEvents" in data else f"{_type_name(data)} at the top"
        raise TraceError(f"has no 'traceEvents' list ({found}): not a torch.profiler chrome trace")
    cols, facts = columns_from_events(events)
    return _checked_columns(cols, facts, top, where, exact)


def _checked_columns(cols: EventColumns, facts: dict[str, Any], top: dict[str, Any], where: str, exact: bool) -> Recording:
    """The recording of a trace's events (read into ``cols``) and its top-level object."""
    if len(cols) == 0:
        raise TraceError("holds no profiler events (no operators, ranges or kernels)")
    block = _meta_block(top.get(TRACE_META_KEY))
    wall = block.get("wall_us")
    if wall is None:
        span = facts.get("span")
        if span and span[1] > span[0]:
            wall = (span[1] - span[0]) / 1000.0
        elif host := [i for i, k in enumerate(cols.kind) if k != IGNORED]:
            wall = (max(cols.end[i] for i in host) - min(cols.start[i] for i in host)) / 1000.0
    meta: dict[str, Any] = {"source": where}
    if "recorded" in block:
        meta["recorded"] = block["recorded"]
    for key in ("deviceProperties", "distributedInfo", "traceName"):
        if key in top:
            meta[key] = plain_numbers(top[key]) if exact else top[key]
    if "distributedInfo" not in meta and "distributedInfo" in block:
        meta["distributedInfo"] = block["distributedInfo"]
    if "ddp_buckets" in block:
        meta["ddp_buckets"] = block["ddp_buckets"]
    for key in ("compute_dtype", "flops_counts"):  # torchprof's own exports: the dtype (MFU), FLOPs of a trace without shapes
        if key in block:
            meta[key] = block[key]
    label = block.get("label") or _stem(where)
    cap = Recording(cycles=[cols], modules=block.get("modules", {}), wall_us=wall, label=label, meta=meta,
                    compiled=block.get("compiled", {}), step_times=block.get("step_times", {}))
    if block.get("tensors"):
        # Seen on the live run's clock (ns since the epoch); the events count from the file's base time.
        base = top.get("baseTimeNanoseconds")
        shift = int(base) if isinstance(base, (int, Decimal)) else 0
        cap.tensors = [KnownTensor(c, d, a, b, None if t is None else t - shift, m) for c, d, a, b, t, m in block["tensors"]]
    _drop_untimed_device_work(cols, cap.meta)
    cap.meta["has_device"] = DEVICE in cols.kind
    cap.meta["has_memory"] = MEMORY in cols.kind
    return cap


def _drop_untimed_device_work(cols: EventColumns, meta: dict[str, Any]) -> None:
    """Device activity written without its times is left out, and said so: device time unknown
    (NaN), not zero. Kineto of torch 2.11 on an H200 wrote every kernel, memcpy and runtime call
    at ``ts`` 0 with ``dur`` 0 (the live profile had their times); no real run has only kernels
    of no duration, so that is how such a file is told apart."""
    if DEVICE not in cols.kind or any(e != s for k, s, e in zip(cols.kind, cols.start, cols.end) if k == DEVICE):
        return
    device = [i for i, k in enumerate(cols.kind) if k == DEVICE]
    linked = [i for i, k in enumerate(cols.kind) if k in _LINKED]
    untimed = [i for i in linked if cols.end[i] == cols.start[i]]
    kinds = list(cols.kind)
    for i in untimed:
        kinds[i] = IGNORED
    cols.kind = kinds
    note = (f"the trace's {len(device)} device activities (and {len(untimed) - len(device)} runtime calls) carry no times: "
            "all at ts 0 with no duration, as torch 2.11's kineto wrote them; device time is unknown")  # fmt: skip
    meta["warnings"] = [*meta.get("warnings", []), note]
    if isinstance(meta.get("recorded"), dict):  # torchprof's own export says it recorded the device
        meta["recorded"] = {**meta["recorded"], "cuda": False}


def _meta_block(block: Any) -> dict[str, Any]:
    """torchprof's block in a trace it exported, checked: ``modules`` as ModuleInfo, ``wall_us`` a
    float, ``label`` a string, ``recorded`` a dict of flags. TraceError naming a wrong field."""
    if block is None:
        return {}
    key = TRACE_META_KEY
    if not isinstance(block, dict):
        raise TraceError(f"{key!r} must be an object, not {_type_name(block)}")
    out: dict[str, Any] = {}
    modules = block.get("modules")
    if modules is not None:
        if not isinstance(modules, dict):
            raise TraceError(f"'{key}.modules' must be an object, not {_type_name(modules)}")
        out["modules"] = {}
        for path, info in modules.items():
            if not (isinstance(info, list) and 3 <= len(info) <= 5 and isinstance(info[0], str)
                    and all(type(v) is int and v >= 0 for v in info[1:3])
                    and (len(info) < 4 or info[3] is None or type(info[3]) is bool)
                    and (len(info) < 5 or type(info[4]) is bool)):  # fmt: skip
                raise TraceError(f"'{key}.modules' entry {path!r} must be [type, params, param_bytes, root, replica], "
                                 f"not {_clip(info)}")
            out["modules"][path] = ModuleInfo.from_json(info)
    compiled = block.get("compiled")
    if compiled is not None:
        if not isinstance(compiled, dict):
            raise TraceError(f"'{key}.compiled' must be an object, not {_type_name(compiled)}")
        out["compiled"] = {}
        for graph_id, graph in compiled.items():
            try:
                out["compiled"][graph_id] = CompiledGraph.from_json(plain_numbers(graph))
            except (TypeError, ValueError, KeyError, IndexError) as exc:
                raise TraceError(f"'{key}.compiled' entry {graph_id!r} is not a compiled graph torchprof wrote ({exc})") from None
    wall = block.get("wall_us")
    if wall is not None:
        if type(wall) not in (int, float, Decimal) or not math.isfinite(wall) or wall < 0:
            raise TraceError(f"'{key}.wall_us' must be a time in µs, not {_describe(wall)}")
        out["wall_us"] = float(wall)
    label = block.get("label")
    if label is not None:
        if not isinstance(label, str):
            raise TraceError(f"'{key}.label' must be a string, not {_type_name(label)}")
        out["label"] = label
    info = block.get("distributedInfo")
    if info is not None:
        if not isinstance(info, dict) or type(info.get("rank")) is not int:
            raise TraceError(f"'{key}.distributedInfo' must be an object with an integer rank, not {_clip(info)}")
        out["distributedInfo"] = plain_numbers(info)
    buckets = block.get("ddp_buckets")
    if buckets is not None:
        try:
            out["ddp_buckets"] = checked_ddp_buckets(plain_numbers(buckets))
        except ValueError as exc:
            raise TraceError(f"'{key}.ddp_buckets' {exc}") from None
    dtype = block.get("compute_dtype")
    if isinstance(dtype, str):
        out["compute_dtype"] = dtype
    tensors = block.get("tensors")
    if tensors is not None:
        ok = isinstance(tensors, list) and all(
            isinstance(t, list) and len(t) == 6 and t[0] in MEMORY_CATEGORIES and all(type(v) is int for v in t[1:4])
            and (t[4] is None or type(t[4]) is int) and (t[5] is None or isinstance(t[5], str)) for t in tensors)  # fmt: skip
        if not ok:
            raise TraceError(f"'{key}.tensors' must be a list of [category ({', '.join(MEMORY_CATEGORIES)}), device, "
                             "address, bytes, seen_ns, module], "
                             f"not {_clip(tensors)}")  # fmt: skip
        out["tensors"] = tensors
    counts = block.get("flops_counts")
    if counts is not None:
        if not (isinstance(counts, dict) and all(isinstance(counts.get(k), list) for k in ("paths", "macs", "flops"))):
            raise TraceError(f"'{key}.flops_counts' must be an object of 'paths', 'macs' and 'flops' lists, not {_clip(counts)}")
        out["flops_counts"] = plain_numbers(counts)
    recorded = block.get("recorded")
    if recorded is not None:
        if not isinstance(recorded, dict) or not all(type(v) is bool for v in recorded.values()):
            raise TraceError(f"'{key}.recorded' must be an object of true/false flags, not {_clip(recorded)}")
        out["recorded"] = recorded
    step_times = block.get("step_times")
    if step_times is not None:
        try:
            out["step_times"] = checked_step_times(_floats(plain_numbers(step_times), "wall_us"))
        except ValueError as exc:
            raise TraceError(f"'{key}.step_times': {exc}") from None
    return out


def _floats(columns: Any, name: str) -> Any:
    """``columns[name]`` as floats where it holds numbers (an exact parse gives a time with
    decimals as a Decimal)."""
    if isinstance(columns, dict) and isinstance(columns.get(name), list):
        return {**columns, name: [float(v) if type(v) in (int, float, Decimal) else v for v in columns[name]]}
    return columns


def _stem(path: str) -> str:
    base = os.path.basename(path)
    for suffix in (".json.gz", ".json", ".gz"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base
