"""Dumps decompressed ahead of their reading (beam_pipelines.dumps.read_ahead)."""

import bz2
import io
import os
import threading
import time

import pytest

from beam_pipelines.dumps import read_ahead
from beam_pipelines.dumps import samples
from beam_pipelines.dumps import xml_dump


def _write(path, data: bytes) -> str:
  with open(path, "wb") as f:
    f.write(data)
  return str(path)


def test_whole_multistream_file_taken_once(tmp_path):
  first, second = b"<mediawiki>" + b"a" * 5000, b"b" * 7000 + b"</mediawiki>"
  path = _write(tmp_path / "two.xml.bz2", bz2.compress(first) + bz2.compress(second))
  with read_ahead.decompressed_ahead([path, path], threads=2):
    # Every stream, as bz2.open reads them; handed out once.
    assert read_ahead.take(path) == first + second
    assert read_ahead.take(path) is None
  assert read_ahead.take(path) is None  # nothing outside the context


def test_files_read_the_usual_way_are_not_handed_out(tmp_path):
  data = b"<mediawiki>" + b"page " * 2000 + b"</mediawiki>"
  whole = bz2.compress(data)
  paths = {
      "plain": _write(tmp_path / "plain.xml", data),  # nothing to decompress
      "cut": _write(tmp_path / "cut.xml.bz2", whole[:len(whole) // 2]),
      "corrupt": _write(tmp_path / "corrupt.xml.bz2", whole[:20] + b"\0" * 40 + whole[60:]),
      "trailing": _write(tmp_path / "trailing.xml.bz2", whole + b"not a stream"),
      "missing": str(tmp_path / "missing.xml.bz2"),
  }
  with read_ahead.decompressed_ahead(list(paths.values())):
    for name, path in paths.items():
      assert read_ahead.take(path) is None, name
  # The usual reader still reports the cut file's fault.
  errors = []
  list(xml_dump.iter_pages(paths["cut"], on_error=errors.append))
  assert errors


def test_budget_bounds_the_bytes_held_and_frees_a_dropped_file(tmp_path):
  small = _write(tmp_path / "small.xml.bz2", bz2.compress(b"s" * 1000))
  large = _write(tmp_path / "large.xml.bz2", bz2.compress(b"l" * 5000))
  # One thread, in order: the small file fits (1,000 of 4,000 bytes), the large one does not.
  with read_ahead.decompressed_ahead([small, large], threads=1, max_bytes=4000):
    assert read_ahead.take(large) is None
    assert read_ahead.take(small) == b"s" * 1000
  # The large file's bytes were given back: both fit one after the other in 6,000.
  with read_ahead.decompressed_ahead([large, small], threads=1, max_bytes=6000):
    assert read_ahead.take(large) == b"l" * 5000
    assert read_ahead.take(small) == b"s" * 1000


def test_a_file_changed_since_is_not_handed_out(tmp_path):
  path = _write(tmp_path / "d.xml.bz2", bz2.compress(b"old"))
  with read_ahead.decompressed_ahead([path]):
    stat = os.stat(path)
    _write(path, bz2.compress(b"new!"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert read_ahead.take(path) is None


def test_a_file_replaced_with_the_same_size_and_time_is_not_handed_out(tmp_path):
  """A rename over the file (rsync, cp -p then mv) keeps size and time: the inode differs."""
  path = _write(tmp_path / "d.xml.bz2", bz2.compress(b"<mediawiki>AAAA</mediawiki>"))
  stat = os.stat(path)
  with read_ahead.decompressed_ahead([path]):
    replacement = _write(tmp_path / "new.xml.bz2", bz2.compress(b"<mediawiki>BBBB</mediawiki>"))
    assert os.path.getsize(replacement) == stat.st_size
    os.utime(replacement, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(replacement, path)
    assert read_ahead.take(path) is None


def test_a_budget_beyond_any_size_hands_files_out(tmp_path):
  path = _write(tmp_path / "d.xml.bz2", bz2.compress(b"x" * 100))
  for max_bytes in (2**63, 10**30):
    with read_ahead.decompressed_ahead([path], max_bytes=max_bytes):
      assert read_ahead.take(path) == b"x" * 100, max_bytes


def test_contexts_do_not_nest_and_threads_are_checked(tmp_path):
  path = _write(tmp_path / "d.xml.bz2", bz2.compress(b"x" * 100))
  other = _write(tmp_path / "e.xml.bz2", bz2.compress(b"y" * 100))
  with read_ahead.decompressed_ahead([path]):
    with read_ahead.decompressed_ahead([other]):
      assert read_ahead.take(other) is None  # the inner context decompressed nothing
    assert read_ahead.take(path) == b"x" * 100
    with read_ahead.decompressed_ahead([other]):  # none held by the outer one any more
      assert read_ahead.take(other) is None
  with pytest.raises(ValueError, match="threads"):
    with read_ahead.decompressed_ahead([path], threads=0):
      pass
  assert not [t for t in threading.enumerate() if t.name.startswith("DumpReadAhead")]


def test_pages_from_the_bytes_are_the_files_pages():
  """The packaged sample dump (bz2): its pages read from the bytes handed out are the pages
  read from the file."""
  path = samples.gensim_sample_path()
  with read_ahead.decompressed_ahead([path]):
    data = read_ahead.take(path)
  assert data is not None
  assert list(xml_dump.iter_pages(io.BytesIO(data), source_name=path)) == list(
      xml_dump.iter_pages(path))


def test_head_hands_out_the_first_bytes_once_out_and_the_file_is_still_taken(tmp_path,
                                                                           monkeypatch):
  """Issue 17: head(path, complete) waits until the bytes out so far make complete() true
  (here: chunks of 1,000 bytes) or the file ends, and returns them; the whole file is still
  taken after. Nothing for a file the context does not hold, one that is not bz2, corrupt,
  discarded, or (complete never true) for which it hands out the whole file."""
  monkeypatch.setattr(read_ahead, "HEAD_CHUNK_BYTES", 1000)
  monkeypatch.setattr(read_ahead, "CHUNK_BYTES", 1000)
  data = b"".join(b"line %d\n" % i for i in range(5000))
  path = _write(tmp_path / "d.xml.bz2", bz2.compress(data[:7000]) + bz2.compress(data[7000:]))
  plain = _write(tmp_path / "p.xml", data)
  whole = bz2.compress(data)
  corrupt = _write(tmp_path / "c.xml.bz2", whole[:20] + b"\0" * 40 + whole[60:])
  other = _write(tmp_path / "o.xml.bz2", bz2.compress(b"other"))
  assert read_ahead.head(path, lambda b: True) is None  # no context
  with read_ahead.decompressed_ahead([path, plain, corrupt, other], threads=1):
    got = read_ahead.head(path, lambda b: b"line 300\n" in b)
    assert data.startswith(got) and b"line 300\n" in got  # (all of it, if done by now)
    assert read_ahead.head(path, lambda b: False) == data  # to the end: the whole file
    assert read_ahead.take(path) == data  # still handed out, once
    assert read_ahead.head(path, lambda b: True) is None
    assert read_ahead.head(plain, lambda b: True) is None
    assert read_ahead.head(corrupt, lambda b: False) is None
    read_ahead.discard([other])
    assert read_ahead.head(other, lambda b: True) is None and read_ahead.take(other) is None


def test_heads_come_first_and_discarded_bytes_are_given_back(tmp_path, monkeypatch):
  """Every file's first chunk is decompressed at once (up to HEAD_THREADS threads), the rest
  in `threads`: with one thread busy with a large file, a small file's head still comes. A
  discarded file's bytes go back to the budget: another file fits after."""
  monkeypatch.setattr(read_ahead, "HEAD_CHUNK_BYTES", 1000)
  monkeypatch.setattr(read_ahead, "CHUNK_BYTES", 1000)
  large = _write(tmp_path / "large.xml.bz2", bz2.compress(os.urandom(400_000).hex().encode()))
  small = _write(tmp_path / "small.xml.bz2", bz2.compress(b"s" * 3000))
  gate = threading.Event()
  real = read_ahead._Progress.add  # pylint: disable=protected-access

  def held(self, chunk):  # the large file's decompression waits after its head
    real(self, chunk)
    if len(chunk) == 1000 and self.size > 1000 and not gate.is_set() and chunk != b"s" * 1000:
      gate.wait(10)

  monkeypatch.setattr(read_ahead._Progress, "add", held)  # pylint: disable=protected-access
  with read_ahead.decompressed_ahead([large, small], threads=1):
    started = time.monotonic()
    got = read_ahead.head(small, lambda b: len(b) >= 1000)
    assert time.monotonic() - started < 5  # not after the large file's 10 s
    assert len(got) >= 1000 and got == b"s" * len(got)
    gate.set()
    assert len(read_ahead.take(large)) == 800_000
  with read_ahead.decompressed_ahead([large], threads=1):
    budget = read_ahead._AHEAD[large][2]  # pylint: disable=protected-access
    assert len(read_ahead.head(large, lambda b: False)) == 800_000  # decompressed, held
    assert budget.held == 800_000
    read_ahead.discard([large])
    assert budget.held == 0 and read_ahead.take(large) is None
