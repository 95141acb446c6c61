"""Keep kineto's native log lines out of the user's output.

This torch build's kineto writes lines such as ``USDT:... profiler_start`` and
``gpuGetDeviceCount failed`` straight to file descriptor 2 when a profiler starts or stops.
Python-level redirection cannot catch them (and ipykernel forwards fd 2 into the cell), so around
those calls we point fd 2 at a temporary file and replay every line that is not kineto noise.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from .interrupts import hold, lifecycle, release

_NOISE = re.compile(
    r"^(?:USDT:|ERROR:|WARNING:|INFO:|STAGE:)?\S*\s*\S*\s*\d+:\d+\s+\S+\.(?:cpp|h):\d+\]"
    r"|gpuGetDeviceCount failed|CUPTI|libkineto|ActivityProfiler"
    # torch's own profiler glue, in c10's log format: ``[W1122 16:29:48.706 profiler_kineto.cpp:908]``
    # (e.g. "disableProfiler called but no active profiling session found" when torchprof makes
    # sure, after an interrupted stop, that nothing is left running).
    r"|^\[[WIEF]\d{4} [^\]]*profiler_kineto\.cpp:\d+\]"
)


def is_noise(line: str) -> bool:
    """True for a line written by kineto itself (``<LEVEL>:<date> <time> <pid>:<tid> <file>.cpp:<n>]``)."""
    return bool(_NOISE.search(line))


@contextmanager
@lifecycle
def quiet_native_stderr() -> Iterator[None]:
    """Run the body with fd 2 captured; re-emit whatever is not kineto noise on ``sys.stderr``.

    fd 2 is put back whatever happens, a Ctrl-C included: while fd 2 is being swapped either way
    a Ctrl-C waits (see :mod:`.interrupts`), and a restore interrupted by code is completed by a
    second one. A process whose fd 2 stayed on a deleted temporary file would lose every later
    error message.
    """
    swap = _Fd2Swap()
    try:
        try:
            swap.start()
            yield
        finally:
            swap.finish()
    finally:
        swap.finish()  # completes a finish that was interrupted; nothing left to do otherwise


#: kineto reads its log level from this variable once, when the process's first profiler session
#: starts; at this level (above USDT, its highest severity) it writes nothing at all.
_LEVEL_VAR, _SILENT_LEVEL = "KINETO_LOG_LEVEL", "6"
#: [True] once kineto is known to write nothing in this process: torchprof's first start set its
#: level, and neither that start nor the stop after it wrote a line of kineto's; [False] once a
#: swapped start or stop caught one (kineto was started before, at its own level, or the user set
#: the level); empty until then.
_kineto_silent: list[bool] = []
#: [True] while the start that set kineto's level wrote nothing and its stop is awaited.
_clean_start: list[bool] = []


@contextmanager
@lifecycle
def quiet_torch_switch(decide: bool = False, stopping: bool = False) -> Iterator[None]:
    """:func:`quiet_native_stderr` around starting or stopping torch's profiler, without the swap
    of fd 2 (two of a block's costliest parts) where kineto is known to write nothing.

    torchprof's first start in a process sets kineto's level to silent just for that start, unless
    the user set one: kineto reads it then if no profiler ran before in the process, and stays
    silent for it (the user's own ``torch.profiler`` sessions included); the variable is removed
    again. When that start and the stop after it wrote none of kineto's lines (which a kineto at
    its default level writes at every start or stop in the builds that write any), later starts
    and stops are left unswapped. ``decide``: this call starts kineto (a schedule's start may not:
    kineto then starts at a later step); ``stopping``: this call stops it."""
    if _kineto_silent and _kineto_silent[0]:
        yield
        return
    deciding = decide and not _kineto_silent and not _clean_start and _LEVEL_VAR not in os.environ
    swap = _Fd2Swap()
    done = False
    try:
        try:
            if deciding:
                os.environ[_LEVEL_VAR] = _SILENT_LEVEL
            swap.start()
            yield
            done = True
        finally:
            swap.finish()
            if deciding:
                _unset_level()
    finally:
        swap.finish()  # each completes what an interrupted one before it left
        if deciding:
            _unset_level()
        if done and swap.redirected_once and not _kineto_silent:
            _judge(swap.caught_noise, deciding, stopping)


def _judge(noise: bool, deciding: bool, stopping: bool) -> None:
    """What a swapped start or stop tells of kineto's logging (see :func:`quiet_torch_switch`)."""
    if noise:
        _kineto_silent.append(False)
        _clean_start.clear()
    elif deciding:
        _clean_start[:] = [True]
    elif stopping and _clean_start:
        _kineto_silent.append(True)
        _clean_start.clear()


@lifecycle
def _unset_level() -> None:
    if os.environ.get(_LEVEL_VAR) == _SILENT_LEVEL:
        os.environ.pop(_LEVEL_VAR, None)


class _Fd2Swap:
    """fd 2 pointed at a temporary file, and back. :meth:`finish` resumes where an interrupted
    one stopped, and does nothing once everything is back."""

    def __init__(self) -> None:
        self.fd = 2
        self.saved: int | None = None  # a duplicate of the real fd 2
        self.sink: _Sink | None = None
        self.offset = 0  # where in the sink this swap's output starts
        self.redirected = False
        self.redirected_once = False  # fd 2 was swapped (and :attr:`caught_noise` says what it caught)
        self.caught_noise = False

    @lifecycle
    def start(self) -> None:
        hold(self)
        try:
            self.fd = sys.__stderr__.fileno() if sys.__stderr__ is not None else 2
        except (AttributeError, OSError, ValueError):
            self.fd = 2
        for stream in (sys.stderr, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):
                pass
        try:
            self.saved = os.dup(self.fd)
            self.sink, self.offset = _take_sink()
        except OSError:  # no usable fd 2 (some embedded interpreters) or no temporary file: nothing to silence
            return
        # Marked first: a restore when the switch did not happen copies fd 2 onto itself.
        self.redirected = True
        os.dup2(self.sink.fd, self.fd)
        self.redirected_once = True

    @lifecycle
    def finish(self) -> None:
        if self.redirected and self.saved is not None:
            os.dup2(self.saved, self.fd)
        self.redirected = False
        saved, self.saved = self.saved, None
        if saved is not None:
            os.close(saved)  # (an interrupt just before this leaks one descriptor, never closes a wrong one)
        sink, self.sink = self.sink, None
        if sink is not None:
            size = _SINK_LIMIT  # emptied if it cannot be read
            try:
                size, noise = _replay(sink.fd, self.offset)
                self.caught_noise = self.caught_noise or noise
            finally:
                _give_back_sink(sink, size)
        release(self)


#: One temporary file kept for the next swap, as a raw descriptor opened for appending, with the
#: process that made it: creating one costs about 0.2 ms, and every profiled block swaps fd 2
#: twice (start and stop). Raw descriptor calls (no buffered file object) and appending keep a
#: swap to a few system calls: each swap reads what was appended after where it started, and the
#: file is emptied only once it holds :data:`_SINK_LIMIT` bytes (truncating costs as much as the
#: rest of a swap). A swap that finds none free (nested, or on another thread) makes its own; a
#: forked child never shares its parent's (their file offset would be one), and a descriptor that
#: names another file now (the process closed ours, and the number was given out again) is left
#: alone.
_free_sink: list[_Sink] = []


@dataclass(frozen=True)
class _Sink:
    fd: int
    pid: int
    file: tuple[int, int]  # (device, inode): the file ``fd`` must still name


def _take_sink() -> tuple[_Sink, int]:
    """A sink and the size of what it holds already."""
    try:
        sink = _free_sink.pop()
    except IndexError:
        pass
    else:
        if sink.pid == os.getpid():
            with suppress(OSError):
                st = os.fstat(sink.fd)
                if (st.st_dev, st.st_ino) == sink.file:
                    return sink, st.st_size
    fd, path = tempfile.mkstemp(prefix="torchprof-stderr-")
    try:
        appending = os.open(path, os.O_RDWR | os.O_APPEND | getattr(os, "O_BINARY", 0))
    finally:
        os.close(fd)
        with suppress(OSError):
            os.remove(path)  # (where an open file cannot be removed, it stays until the process ends)
    try:
        st = os.fstat(appending)
    except OSError:
        os.close(appending)
        raise
    return _Sink(appending, os.getpid(), (st.st_dev, st.st_ino)), st.st_size


_SINK_LIMIT = 1 << 20


def _give_back_sink(sink: _Sink, size: int) -> None:
    try:
        if size >= _SINK_LIMIT:
            os.ftruncate(sink.fd, 0)
    except OSError:
        with suppress(OSError):
            os.close(sink.fd)
        return
    if _free_sink:
        with suppress(OSError):
            os.close(sink.fd)
    else:
        _free_sink.append(sink)


def _replay(sink: int, offset: int) -> tuple[int, bool]:
    """Write on what the swap caught past ``offset`` that is not kineto's noise; the sink's size,
    and whether there was noise."""
    size = os.fstat(sink).st_size
    noise = False
    if size > offset:
        if hasattr(os, "pread"):
            data = os.pread(sink, size - offset, offset)
        else:
            os.lseek(sink, offset, os.SEEK_SET)
            data = os.read(sink, size - offset)
        text = data.decode("utf-8", errors="replace")
        lines = [line for line in text.splitlines(keepends=True) if line.strip()]
        kept = [line for line in lines if not is_noise(line)]
        noise = len(kept) < len(lines)
        if kept:
            with suppress(OSError, ValueError):
                sys.stderr.write("".join(kept))
    return size, noise


#: The line c10's CPU allocator logs (``LOG(WARNING)``, straight to fd 2) when a block allocated
#: before profiling started is freed while a profiler records memory: it says nothing about the
#: user's code, and torchprof counts those blocks itself (parameters, gradients, optimizer state).
_UNKNOWN_SIZE = re.compile(rb"Memory block of unknown size was allocated before the profiling started")
#: How long ``stop`` waits for the pump to pass on what was written before it (normally microseconds).
_SYNC_TIMEOUT_S = 2.0


class StderrFilter:
    """While a profiled block runs with memory recorded: fd 2 goes through a pipe, and a thread
    writes every line on to the real fd 2 at once, except c10's "unknown size" warning.

    The user's own output keeps flowing as it is written (a line without its newline yet is passed
    on as soon as it cannot be the start of that warning). At :meth:`stop` fd 2 is put back after
    everything written before it has been passed on; processes started inside the block (DataLoader
    workers) keep the pipe and the thread keeps passing their output on until they close it. Any
    failure to set this up leaves fd 2 as it was.
    """

    def __init__(self) -> None:
        self._fd = -1
        self._saved = -1
        self._synced: threading.Event | None = None  # made by start() (a Profiler without memory=True never starts one)
        self._marker = b""

    def start(self) -> None:
        try:
            fd = sys.__stderr__.fileno() if sys.__stderr__ is not None else 2
        except (AttributeError, OSError, ValueError):
            fd = 2
        try:
            saved = os.dup(fd)
        except OSError:
            return
        try:
            read, write = os.pipe()
        except OSError:
            os.close(saved)
            return
        for stream in (sys.stderr, sys.__stderr__):
            with suppress(OSError, ValueError, AttributeError):
                if stream is not None:
                    stream.flush()
        try:
            os.dup2(write, fd)
        except OSError:
            for f in (read, write, saved):
                os.close(f)
            return
        os.close(write)
        self._fd, self._saved = fd, saved
        self._marker = b"\x00torchprof-stderr-sync-" + os.urandom(8).hex().encode() + b"\n"
        synced = self._synced = threading.Event()
        threading.Thread(target=self._pump, args=(read, saved, self._marker, synced), name="torchprof-stderr", daemon=True).start()

    def stop(self) -> None:
        """Put fd 2 back, once what was written before has been passed on."""
        fd, saved = self._fd, self._saved
        if fd < 0:
            return
        try:
            for stream in (sys.stderr, sys.__stderr__):
                with suppress(OSError, ValueError, AttributeError):
                    if stream is not None:
                        stream.flush()
            with suppress(OSError):
                os.write(fd, self._marker)
                if self._synced is not None:
                    self._synced.wait(_SYNC_TIMEOUT_S)
        finally:  # fd 2 goes back whatever happens (a Ctrl-C during the wait included)
            with suppress(OSError):
                os.dup2(saved, fd)  # the pump closes ``saved`` once every writer of the pipe is gone
            self._fd = -1

    def _pump(self, read: int, out: int, marker: bytes, synced_event: threading.Event) -> None:
        pending = b""
        try:
            while True:
                try:
                    chunk = os.read(read, 65536)
                except InterruptedError:
                    continue
                except OSError:
                    break
                if not chunk:
                    break
                pending += chunk
                synced = marker in pending  # one write, so whole (it may follow a partial line)
                if synced:
                    pending = pending.replace(marker, b"")
                lines = pending.split(b"\n")
                pending = lines.pop()
                kept = [line + b"\n" for line in lines if not _UNKNOWN_SIZE.search(line)]
                if pending and not b"[W".startswith(pending[:2]) and not marker.startswith(pending):
                    kept.append(pending)  # a partial line (a progress bar) that is not the warning: on at once
                    pending = b""
                if kept:
                    _write_all(out, b"".join(kept))
                if synced:
                    synced_event.set()
            if pending and not _UNKNOWN_SIZE.search(pending):
                _write_all(out, pending)
        finally:
            synced_event.set()
            for f in (read, out):
                with suppress(OSError):
                    os.close(f)


def _write_all(fd: int, data: bytes) -> None:
    with suppress(OSError):
        while data:
            data = data[os.write(fd, data) :]
