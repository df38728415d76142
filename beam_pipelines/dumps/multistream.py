"""Multistream dumps: the index beside the dump, and byte ranges of whole bz2 streams.

A *-pages-articles-multistream.xml.bz2 dump is a series of bz2 streams of about 100 pages each;
its index (*-multistream-index.txt.bz2) gives every page's stream offset. Ranges of whole
streams can be read on their own (xml_dump.iter_pages with byte_range), so many workers read
one file.
"""

import os
import re
from typing import BinaryIO, Dict, List, Optional, Sequence, Tuple, Union

from beam_pipelines.dumps import xml_dump

# 'enwiki-..-multistream.xml.bz2' -> 'enwiki-..-multistream-index.txt.bz2', and the split form
# 'enwiki-..-multistream1.xml-p1p41242.bz2' -> 'enwiki-..-multistream-index1.txt-p1p41242.bz2'.
_MULTISTREAM_NAME = re.compile(r"^(?P<stem>.*multistream)(?P<part>\d*)\.xml(?P<rest>.*)\.bz2$")


def multistream_index_names(dump_name: str) -> List[str]:
  """File names the multistream index of a dump file has in Wikimedia's dump layout.

  Args:
    dump_name: a dump file's base name, e.g. 'enwiki-20240601-pages-articles-multistream.xml.bz2'
      or 'enwiki-20240601-pages-articles-multistream3.xml-p151574p311329.bz2'.

  Returns:
    Candidate index names, bz2 first ('...-multistream-index.txt.bz2', then '...-index.txt');
    [] when the name is not that of a multistream dump.
  """
  match = _MULTISTREAM_NAME.match(dump_name)
  if not match:
    return []
  base = f"{match['stem']}-index{match['part']}.txt{match['rest']}"
  return [base + ".bz2", base]


def pair_multistream_indexes(dump_paths: Sequence[str],
                             index_paths: Sequence[str]) -> Dict[str, str]:
  """Pairs dump files with the multistream index files given by --multistream_index.

  An index belongs to the dump whose Wikimedia index name it has (multistream_index_names);
  a single index given with a single dump belongs to it whatever the names.

  Args:
    dump_paths: matched dump file paths.
    index_paths: matched index file paths.

  Returns:
    {dump path: index path}.

  Raises:
    ValueError: naming the index files that belong to no dump (no silent full-file reads).
  """
  by_name = {}
  for index_path in index_paths:
    by_name.setdefault(os.path.basename(index_path), index_path)
  pairs = {}
  for dump_path in dump_paths:
    for name in multistream_index_names(os.path.basename(dump_path)):
      if name in by_name:
        pairs[dump_path] = by_name[name]
        break
  unpaired = sorted(set(index_paths) - set(pairs.values()))
  if unpaired and len(dump_paths) == 1 and len(index_paths) == 1:
    return {dump_paths[0]: index_paths[0]}
  if unpaired:
    raise ValueError(f"multistream index file(s) {unpaired} belong to no input dump; expected "
                     "names like X-multistream-index.txt.bz2 beside X-multistream.xml.bz2")
  return pairs


def read_multistream_index(source: Union[str, os.PathLike, BinaryIO],
                           source_name: Optional[str] = None) -> List[int]:
  """Reads the stream offsets of a multistream index ('offset:page_id:title' lines).

  The index (plain or bz2) lists every page with the compressed byte offset of the bz2 stream
  that holds it (about 100 pages per stream). It is read line by line (memory: the offsets,
  about 8 bytes per 100 pages, not the file); titles may contain ':'.

  Args:
    source: a path or a binary file object of the index.
    source_name: file name used in error messages (default: the path, or '<stream>').

  Returns:
    The distinct stream offsets, in increasing order (bytes into the dump).

  Raises:
    xml_dump.DumpError: naming the file and line, for a line that is not
      'offset:page_id:title' with integer offset and page id, or an index with no line.
  """
  if source_name is None:
    source_name = os.fspath(source) if isinstance(source, (str, os.PathLike)) else "<stream>"
  offsets = set()
  last = None
  with xml_dump.open_dump(source) as f:
    for number, line in enumerate(f, 1):
      if not line.strip():
        continue
      parts = line.split(b":", 2)
      if len(parts) != 3 or not parts[0].strip().isdigit() or not parts[1].strip().isdigit():
        raise xml_dump.DumpError(f"{source_name}: line {number} is not "
                                 f"'offset:page_id:title': {line[:200]!r}")
      offset = int(parts[0])
      if offset != last:
        offsets.add(offset)
        last = offset
  if not offsets:
    raise xml_dump.DumpError(f"{source_name}: multistream index without any line")
  return sorted(offsets)


def plan_stream_ranges(offsets: Sequence[int], file_size: int,
                       range_bytes: int) -> List[Tuple[int, int]]:
  """Groups the bz2 streams of a multistream dump into byte ranges of about `range_bytes`.

  Stream boundaries are 0 (the <siteinfo> header stream, never in the index), every offset of
  the index, and the end of the file (the last stream holds '</mediawiki>'). Consecutive
  streams are grouped until a range reaches `range_bytes`, so every range holds whole streams
  and the ranges cover the file exactly once, in order.

  Args:
    offsets: stream offsets from read_multistream_index (bytes, increasing).
    file_size: size of the compressed dump file in bytes.
    range_bytes: target compressed size of a range in bytes (a range is at least one stream,
      so it can be larger).

  Returns:
    [(start, end), ...] compressed byte ranges, end exclusive, covering [0, file_size).

  Raises:
    ValueError: an offset outside (0, file_size), offsets not increasing, or range_bytes < 1.
  """
  if range_bytes < 1:
    raise ValueError(f"range_bytes must be positive, got {range_bytes}")
  previous = 0
  for offset in offsets:
    if not previous < offset < file_size:
      raise ValueError(f"stream offset {offset} is not increasing inside the file of "
                       f"{file_size} bytes (after offset {previous})")
    previous = offset
  boundaries = [0] + list(offsets) + [file_size]
  ranges = []
  start = 0
  for end in boundaries[1:]:
    if end - start >= range_bytes or end == file_size:
      ranges.append((start, end))
      start = end
  return ranges

