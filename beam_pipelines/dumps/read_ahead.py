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

Nothing here outside the context: another process (a distributed runner's worker, Beam's
multi_processing mode) finds nothing to take and reads as before. Memory is bounded by
`max_bytes` decompressed bytes held at once (a file whose bytes would pass it is dropped and
read the usual way); each file's bytes are released when taken, and all of them when the
context closes.
"""

import bz2
import concurrent.futures
import contextlib
import os
import sys
import threading
from typing import Dict, Iterator, Optional, Sequence, Tuple

# Decompressed bytes held at most, all files together (decompressed_ahead's default).
DEFAULT_MAX_BYTES = 256 << 20

_LOCK = threading.Lock()
# path -> (its _stamp when the decompression started, the decompression's Future, the
# context's budget); filled by the open decompressed_ahead context.
_AHEAD: Dict[str, Tuple[Tuple[int, int, int, int], concurrent.futures.Future, "_Budget"]] = {}
_OPEN = [0]  # decompressed_ahead contexts open


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


def _decompress(path: str, budget: _Budget) -> Optional[bytes]:
  """The whole decompressed bz2 file (every stream, as bz2.open reads it), or None: not bz2,
  cut short, corrupt, followed by bytes that are no stream, over the budget, or the context
  closed. Each stream is decompressed in one call (bz2 holds no GIL in it; bz2.open's reader
  takes the GIL back every 8 KB of input, which slowed the thread that builds the pipeline).
  The bytes handed out stay reserved until taken."""
  reserved = 0
  try:
    with open(path, "rb") as f:
      raw = f.read()
    if not raw.startswith(b"BZh"):
      return None
    streams = []
    while raw:
      with budget.lock:
        room = 0 if budget.closed else min(budget.max_bytes - budget.held, sys.maxsize)
      if room <= 0:
        raise _Dropped
      decompressor = bz2.BZ2Decompressor()
      stream = decompressor.decompress(raw, max_length=room)
      if not decompressor.eof or not budget.reserve(len(stream)):
        raise _Dropped  # cut short, or more than the room left
      reserved += len(stream)
      streams.append(stream)
      raw = decompressor.unused_data
    return b"".join(streams)
  except Exception:  # pylint: disable=broad-except
    budget.release(reserved)
    return None  # read the usual way, which reports any fault


class _Dropped(Exception):
  """A file not to hand out (_decompress)."""


@contextlib.contextmanager
def decompressed_ahead(paths: Sequence[str], threads: int = 2,
                       max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[None]:
  """Within the context, the local files among `paths` are decompressed in `threads` threads
  (in the order given), for `take`. Paths that are not local files are left out; contexts do
  not nest (one opened while another is open decompresses nothing).

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
  pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="DumpReadAhead")
  try:
    with _LOCK:
      for path in local:
        try:
          stamp = _stamp(path)
        except OSError:
          continue  # gone meanwhile: read (and reported) the usual way
        _AHEAD[path] = (stamp, pool.submit(_decompress, path, budget), budget)
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
          entry[1].cancel()
    pool.shutdown(wait=True)


def take(path: str) -> Optional[bytes]:
  """The decompressed bytes of `path` if an open decompressed_ahead context holds them (waiting
  for its thread when it is still at work), once; None otherwise (read the file as usual)."""
  with _LOCK:
    entry = _AHEAD.pop(path, None)
  if entry is None:
    return None
  stamp, future, budget = entry
  try:
    data = future.result()
  except concurrent.futures.CancelledError:
    return None
  if data is None:
    return None
  budget.release(len(data))  # the caller's from here on
  try:
    if _stamp(path) != stamp:
      return None
  except OSError:
    return None
  return data
