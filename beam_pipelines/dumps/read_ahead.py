"""Whole dump files decompressed ahead of their reading, in threads, in this process.

Beam's local runner in memory builds and translates the extraction's pipeline on one core
(about 0.2 s on the 7 English sample dumps) before its first step reads the dumps, and the
decompression of bz2 (0.3 s of CPU for those dumps, most of their reading) waits until then.
`decompressed_ahead` starts decompressing the named local files in threads as soon as they are
known (bz2 decompresses without holding the GIL, so the threads use the cores the pipeline's
construction leaves, then those the reading step's XML parse leaves: extraction.run starts one
thread per parse process, as many as cores; one thread took 3.4 s to read the 14 dumps, whose
bz2 is 2.7 s of CPU, two 2.4 s, issue 17), and the reading step `take`s a file's bytes instead
of decompressing it again. Only files that decompress whole and without error are handed out:
a truncated or corrupt file is read the usual way, which reports its fault where it is. A file
that changed since (size, modification time, device or inode) is not handed out either.

The check of the inputs before a run reads each dump's head (its first bz2 block, about 900 KB
to decompress); `head` hands it the first decompressed bytes of a file being decompressed
ahead, as soon as they are out, so that the first block is decompressed once, not once for
the check and again here, and the decompression starts before the check instead of after it
(issue 17: the check took 0.08-0.18 s of the 7 English dumps' extraction, their largest
dump's decompression, 0.17 s alone, then began after it and the reading step waited for it).

Nothing here outside the context: another process (a distributed runner's worker, Beam's
multi_processing mode) finds nothing to take and reads as before. Memory is bounded by
`max_bytes` decompressed bytes held at once (a file whose bytes would pass it is dropped and
read the usual way); each file's bytes are released when taken, and all of them when the
context closes.
"""

import bz2
import concurrent.futures
import contextlib
import functools
import os
import sys
import threading
from typing import Any, Callable, Dict, Iterable, Iterator, Optional, Sequence, Tuple

# Decompressed bytes held at most, all files together (decompressed_ahead's default).
DEFAULT_MAX_BYTES = 256 << 20

# Decompressed bytes of a file's first output chunk (head's waiters get them once it is out:
# as many as the check's own first read of a dump, xml_dump's _READ_BLOCK, so that a fault in
# the first bz2 block of ordinary text ends it as it ended that read), and of each later one:
# each chunk a call without the GIL.
HEAD_CHUNK_BYTES = 1 << 20
CHUNK_BYTES = 8 << 20
# Threads that decompress the files' first chunks at once (the check's own reads of the heads
# ran in as many: extraction.CHECK_THREADS).
HEAD_THREADS = 8

_LOCK = threading.Lock()
# path -> (its _stamp when the decompression started, the decompression's Future, the
# context's budget, its _Progress); filled by the open decompressed_ahead context.
_AHEAD: Dict[str, Tuple[Tuple[int, int, int, int], concurrent.futures.Future, "_Budget",
                        "_Progress"]] = {}
_OPEN = [0]  # decompressed_ahead contexts open


class _Progress:
  """The decompressed bytes of one file so far, for `head`: chunks added as they come out,
  then `end` (True: the whole file decompressed; False: the decompression failed or was
  dropped)."""

  def __init__(self):
    self.condition = threading.Condition()
    self.chunks = []
    self.size = 0
    self.end = None

  def add(self, chunk: bytes) -> None:
    if chunk:
      with self.condition:
        self.chunks.append(chunk)
        self.size += len(chunk)
        self.condition.notify_all()

  def finish(self, whole: bool) -> None:
    with self.condition:
      self.end = whole
      self.chunks = []  # the whole file is the decompression's result from here on
      self.condition.notify_all()

  def finish_unfinished(self, _=None) -> None:
    """finish(False) unless finished: whatever ended the decompression (an error before it
    began, a cancel), no waiter of `head` waits on."""
    with self.condition:
      if self.end is None:
        self.finish(False)


class _Budget:
  """Decompressed bytes held by the open context, and whether it was closed."""

  def __init__(self, max_bytes: int):
    self.max_bytes = max_bytes
    self.held = 0
    self.closed = False
    self.lock = threading.Lock()

  def reserve(self, n: int) -> bool:
    with self.lock:
      if self.closed or self.held + n > self.max_bytes:
        return False
      self.held += n
      return True

  def release(self, n: int) -> None:
    with self.lock:
      self.held -= n


def _stamp(path: str) -> Tuple[int, int, int, int]:
  """What tells a file changed: its size, modification time, device and inode (a file
  replaced by a rename, even with the same size and time, has another inode)."""
  stat = os.stat(path)
  return stat.st_size, stat.st_mtime_ns, stat.st_dev, stat.st_ino


def _decompress(path: str, budget: _Budget, progress: _Progress,
                gate: threading.Semaphore) -> Optional[bytes]:
  """The whole decompressed bz2 file (every stream, as bz2.open reads it), or None: not bz2,
  cut short, corrupt, followed by bytes that are no stream, over the budget, or the context
  closed. Decompressed in chunks (HEAD_CHUNK_BYTES, then CHUNK_BYTES), each in one call
  without the GIL (bz2.open's reader takes the GIL back every 8 KB of input, which slowed the
  thread that builds the pipeline), each added to `progress` for `head` and reserved in the
  budget; the first chunk at once, the rest holding `gate` (as many files at a time as the
  context's threads). The bytes handed out stay reserved until taken."""
  reserved = 0
  whole = False
  gated = contextlib.ExitStack()
  try:
    with open(path, "rb") as f:
      raw = f.read()
    if not raw.startswith(b"BZh"):
      return None
    chunks = []
    chunk_bytes, head_out, gated_on = HEAD_CHUNK_BYTES, False, False
    while raw:
      decompressor = bz2.BZ2Decompressor()
      data = raw
      while not decompressor.eof:
        if head_out and not gated_on:  # the head is out: the rest as the threads allow
          gated.enter_context(gate)
          gated_on = True
        with budget.lock:
          room = 0 if budget.closed else min(budget.max_bytes - budget.held, sys.maxsize)
        if room <= 0:
          raise _Dropped
        chunk = decompressor.decompress(data, max_length=min(room, chunk_bytes))
        data = b""
        if not budget.reserve(len(chunk)):
          raise _Dropped  # more than the room left
        reserved += len(chunk)
        chunks.append(chunk)
        progress.add(chunk)
        if not head_out:
          head_out = True
          chunk_bytes = CHUNK_BYTES
        if not chunk and decompressor.needs_input:
          raise _Dropped  # cut short
      raw = decompressor.unused_data
    whole = True
    return b"".join(chunks)
  except Exception:  # pylint: disable=broad-except
    budget.release(reserved)
    return None  # read the usual way, which reports any fault
  finally:
    progress.finish(whole)
    gated.close()


class _Dropped(Exception):
  """A file not to hand out (_decompress)."""


@contextlib.contextmanager
def decompressed_ahead(paths: Sequence[str], threads: int = 2,
                       max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[None]:
  """Within the context, the local files among `paths` are decompressed in `threads` threads
  (in the order given), for `take`, after the first chunk of each (its head, for `head`),
  which up to HEAD_THREADS threads decompress at once, all files' first: the check of the
  inputs waits for every head. Paths that are not local files are left out; contexts do not
  nest (one opened while another is open decompresses nothing).

  Args:
    paths: dump files; the local bz2 files among them are decompressed (other files are
      read the usual way).
    threads: decompressing threads (at least 1).
    max_bytes: decompressed bytes held at once at most, all files together.

  Raises:
    ValueError: `threads` below 1.
  """
  if threads < 1:
    raise ValueError(f"threads must be at least 1, got {threads}")
  budget = _Budget(max_bytes)
  mine = []
  with _LOCK:
    nested = _OPEN[0] > 0
    _OPEN[0] += 1
  local = [] if nested else [p for p in dict.fromkeys(paths) if os.path.isfile(p)]
  pool = concurrent.futures.ThreadPoolExecutor(
      max(threads, min(len(local), HEAD_THREADS)), thread_name_prefix="DumpReadAhead")
  gate = threading.Semaphore(threads)
  try:
    with _LOCK:
      for path in local:
        try:
          stamp = _stamp(path)
        except OSError:
          continue  # gone meanwhile: read (and reported) the usual way
        progress = _Progress()
        future = pool.submit(_decompress, path, budget, progress, gate)
        future.add_done_callback(progress.finish_unfinished)
        _AHEAD[path] = (stamp, future, budget, progress)
        mine.append(path)
    yield
  finally:
    with budget.lock:
      budget.closed = True
    with _LOCK:
      _OPEN[0] -= 1
      for path in mine:
        entry = _AHEAD.pop(path, None)
        if entry is not None:
          entry[1].cancel()  # (its progress finished: finish_unfinished)
    pool.shutdown(wait=True)


def take(path: str) -> Optional[bytes]:
  """The decompressed bytes of `path` if an open decompressed_ahead context holds them (waiting
  for its thread when it is still at work), once; None otherwise (read the file as usual)."""
  with _LOCK:
    entry = _AHEAD.pop(path, None)
  if entry is None:
    return None
  stamp, future, budget, _ = entry
  data = _result(future)
  if data is None:
    return None
  budget.release(len(data))  # the caller's from here on
  return data if _unchanged(path, stamp) else None


def _result(future: concurrent.futures.Future) -> Optional[bytes]:
  """The decompression's bytes (waiting for it), or None: it failed or was cancelled."""
  try:
    return future.result()
  except concurrent.futures.CancelledError:
    return None


def _unchanged(path: str, stamp: Tuple[int, int, int, int]) -> bool:
  """Whether `path` is still the file whose decompression started with `stamp`."""
  try:
    return _stamp(path) == stamp
  except OSError:
    return False


def head(path: str, complete: Callable[[bytes], Any]) -> Optional[bytes]:
  """The first decompressed bytes of `path` if an open decompressed_ahead context is
  decompressing it: waits until they make complete(bytes so far) true, or the file's end;
  returns them (all the bytes so far: at least what `complete` needed). None when no context
  holds the file, its decompression failed or was dropped before `complete` was met (not
  bz2, corrupt, over the budget: read the file the usual way, which reports any fault), it
  was taken or discarded, or the file changed since. The file is still handed out by
  `take` after."""
  with _LOCK:
    entry = _AHEAD.get(path)
  if entry is None:
    return None
  stamp, future, _, progress = entry
  data = None
  with progress.condition:
    while progress.end is None:
      data = b"".join(progress.chunks)
      progress.chunks = [data] if data else []  # joined once for the next waiter
      if data and complete(data):
        break
      progress.condition.wait()
    else:
      if not progress.end:
        return None
      data = None
  if data is None:  # the whole file: the decompression's result
    data = _result(future)
    if data is None:
      return None
  return data if _unchanged(path, stamp) else None


def _release_result(budget: _Budget, done: concurrent.futures.Future) -> None:
  """Gives the budget back the bytes of a finished decompression that nothing will take."""
  if not done.cancelled() and done.exception() is None and done.result() is not None:
    budget.release(len(done.result()))


def discard(paths: Iterable[str]) -> None:
  """Stops handing out `paths` (files that turned out not to be read here): their bytes are
  released once decompressed, or their decompression is cancelled if it has not begun."""
  for path in paths:
    with _LOCK:
      entry = _AHEAD.pop(path, None)
    if entry is not None:
      _, future, budget, progress = entry
      if not future.cancel():  # (a cancelled one finishes its progress: finish_unfinished)
        future.add_done_callback(functools.partial(_release_result, budget))
