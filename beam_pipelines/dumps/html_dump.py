"""Reading HTML article dumps: one JSON object a line (NDJSON; plain, gzip or bz2).

The records follow the field layout of Wikimedia Enterprise HTML dumps: `name` (title),
`identifier` (page id), `version.identifier` (revision id), `url`, `article_body.html`; the
optional `namespace.identifier`, `categories`, `templates` and `redirects` ([{"name": ...}])
of Enterprise records are read when present. The HTML may be Parsoid's (Enterprise dumps) or
MediaWiki's classic rendering (action=render); beam_pipelines.parsers.html_article parses it.

Lines are streamed (memory bounded by one line, not the file); a line that cannot be read is
reported with file and line number (xml_dump.DumpError) and skipped when the caller handles
errors. Input format detection by content (sniff_format) lives here too, because an HTML dump
is told from a MediaWiki XML export by its first bytes.
"""

import dataclasses
import gzip
import io
import json
import os
import zlib
from typing import Any, BinaryIO, Callable, Dict, Iterator, Optional, Tuple, Union

from beam_pipelines.dumps import xml_dump

# Input formats (sniff_format).
FORMAT_XML = "xml"
FORMAT_HTML = "html"
# What an HTML dump is, for error messages.
EXPECTED = ("expected an HTML dump: one JSON object a line with \"name\", \"identifier\" and "
            "\"article_body\": {\"html\"} (Wikimedia Enterprise HTML dump layout; plain, .gz or "
            ".bz2)")
_READ_BLOCK = 1 << 20
# Decompressed bytes read by sniff_format (sniff_head looks at no more).
SNIFF_BYTES = 4096


@dataclasses.dataclass(frozen=True)
class HtmlPage:
  """One article of an HTML dump (one NDJSON line).

  Attributes:
    page_id: `identifier` (the page id, not a revision id).
    title: `name`, as written (not normalized).
    ns: `namespace.identifier`; 0 (articles) when the record has none.
    html: `article_body.html`: the article's rendered HTML (a fragment or a whole document).
    revision_id: `version.identifier`; None when absent.
    url: `url` ('' when absent): its host tells which links are to this wiki.
    categories: names in the record's `categories` (Enterprise: [{"name": "Category:X"}]),
      as written, in order; () when absent.
    templates: names in the record's `templates` ('Template:X'), as written; () when absent.
    redirects: titles in the record's `redirects` (pages redirecting here); () when absent.
    source: the file the page was read from ('' when unknown), for error reports.
    line: the page's line number in that file (1-based; 0 when unknown).
  """
  page_id: int
  title: str
  ns: int
  html: str
  revision_id: Optional[int] = None
  url: str = ""
  categories: Tuple[str, ...] = ()
  templates: Tuple[str, ...] = ()
  redirects: Tuple[str, ...] = ()
  source: str = ""
  line: int = 0


def open_text(source: Union[str, os.PathLike, BinaryIO]) -> BinaryIO:
  """Opens a file as a stream of decompressed bytes: gzip and bz2 by their magic bytes.

  Args:
    source: a local path, or a binary file object at its start (e.g. FileSystems.open with
      compression_type='uncompressed'); a file object passed in is not closed with the stream.

  Returns:
    A binary file object with read1 (the data decompressed before a truncated end is returned,
    then EOFError); the caller closes it.
  """
  owns = isinstance(source, (str, os.PathLike))
  base = open(source, "rb") if owns else source
  try:
    head = base.read(3)
  except BaseException:
    if owns:
      base.close()
    raise
  raw = io.BufferedReader(xml_dump.PrefixedReader(head, base, owns_fileobj=owns),
                          buffer_size=_READ_BLOCK)
  if head[:2] == b"\x1f\x8b":
    return _ClosingGzipFile(raw)
  if head == b"BZh":
    return xml_dump.ClosingBZ2File(raw)
  return raw


class _ClosingGzipFile(xml_dump.ClosesRawReader, gzip.GzipFile):

  def __init__(self, raw: BinaryIO):
    super().__init__(fileobj=raw, mode="rb")
    self._raw = raw


def _lines(stream: BinaryIO) -> Iterator[bytes]:
  """The lines of a stream (without their newlines), read in blocks with read1, so that the
  lines decompressed before a truncated or corrupt end come out before its error is raised."""
  buf = b""
  while True:
    block = stream.read1(_READ_BLOCK)
    if not block:
      break
    buf += block
    if b"\n" in block:
      lines = buf.split(b"\n")
      buf = lines.pop()
      yield from lines
  if buf:
    yield buf


def sniff_format(source: Union[str, os.PathLike, BinaryIO]) -> str:
  """Tells an HTML dump (NDJSON) from a MediaWiki XML export by its first decompressed bytes.

  After a byte order mark and whitespace, '{' (not '{{' or '{|', which start raw wikitext)
  is an HTML dump; anything else is taken for XML, whose own check
  (xml_dump.check_dump_start) then says what the file holds instead. The first SNIFF_BYTES
  decompressed bytes decide, read until there are that many or the file ends (one read
  returned only the 3 bytes open_text had looked at, or a first bz2 stream's few: an HTML
  dump after 3 blank bytes was taken for XML); those read before a decompression error
  decide where one comes.

  Args:
    source: a path or a binary file object at its start (read, not closed).

  Returns:
    FORMAT_HTML or FORMAT_XML.
  """
  stream = open_text(source)
  head = b""
  try:
    while len(head) < SNIFF_BYTES:
      block = stream.read1(SNIFF_BYTES - len(head))
      if not block:
        break
      head += block
  except (EOFError, OSError, zlib.error):  # corrupt data: the XML check reports it
    pass
  finally:
    if stream is not source:
      stream.close()
  return sniff_head(head)


def sniff_head(head: bytes) -> str:
  """sniff_format's decision on a file's first decompressed bytes (the first SNIFF_BYTES of
  them decide): FORMAT_HTML or FORMAT_XML."""
  text = _sniffed_text(head)
  if text[:1] == b"{" and text[1:2] not in (b"{", b"|"):
    return FORMAT_HTML
  return FORMAT_XML


def sniff_final(head: bytes) -> bool:
  """Whether sniff_head's decision on `head` stays the same whatever bytes follow it: the
  window is full, or two bytes after the byte order mark and whitespace are known ('{' alone
  is not yet an HTML dump: '{{' starts wikitext)."""
  return len(head) >= SNIFF_BYTES or len(_sniffed_text(head)) >= 2


def _sniffed_text(head: bytes) -> bytes:
  return head[:SNIFF_BYTES].lstrip(b"\xef\xbb\xbf \t\r\n")


def _field(record: Dict[str, Any], path: str, kind, required: bool = True):
  """The value at dotted `path` of `record`, checked to be of `kind` (None when optional and
  absent).

  Raises:
    ValueError: the field is missing (and required) or of another type.
  """
  value: Any = record
  for key in path.split("."):
    if not isinstance(value, dict) or key not in value or value[key] is None:
      if required:
        raise ValueError(f"no \"{path}\" field")
      return None
    value = value[key]
  if kind is int and isinstance(value, str) and value.strip().isdigit():
    value = int(value)  # some exports write ids as strings
  if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
    raise ValueError(f"\"{path}\" is {type(value).__name__}, not {kind.__name__}")
  return value


def _names(record: Dict[str, Any], key: str) -> Tuple[str, ...]:
  """The "name" of each object of an optional list field ([{"name": ...}, ...] or strings)."""
  value = record.get(key)
  if value is None:
    return ()
  if not isinstance(value, list):
    raise ValueError(f"\"{key}\" is {type(value).__name__}, not a list")
  names = []
  for item in value:
    name = item.get("name") if isinstance(item, dict) else item
    if not isinstance(name, str):
      raise ValueError(f"\"{key}\" holds {item!r}, not {{\"name\": string}}")
    names.append(name)
  return tuple(names)


def parse_page_line(line: Union[bytes, str], source: str = "", line_number: int = 0
                    ) -> Optional[HtmlPage]:
  """Parses one NDJSON line of an HTML dump.

  Args:
    line: the line (bytes as UTF-8 or str; the newline may be included).
    source: file name, kept in the page for error reports.
    line_number: 1-based line number, kept in the page.

  Returns:
    The page; None for a blank line.

  Raises:
    ValueError: the line is not UTF-8, not a JSON object, or lacks `name` (a non-empty
      string), `identifier` (an integer) or `article_body.html` (a string), or an optional
      field has the wrong type. The message says which; callers add the file and line.
  """
  if isinstance(line, bytes):
    try:
      line = line.decode("utf-8")
    except UnicodeDecodeError as e:
      raise ValueError(f"not UTF-8 ({e})") from e
  if not line.strip():
    return None
  try:
    record = json.loads(line)
  except json.JSONDecodeError as e:
    raise ValueError(f"not JSON ({e})") from e
  if not isinstance(record, dict):
    raise ValueError(f"a JSON {type(record).__name__}, not an object")
  title = _field(record, "name", str)
  if not title.strip():
    raise ValueError("empty \"name\"")
  return HtmlPage(
      page_id=_field(record, "identifier", int),
      title=title,
      ns=_field(record, "namespace.identifier", int, required=False) or 0,
      html=_field(record, "article_body.html", str),
      revision_id=_field(record, "version.identifier", int, required=False),
      url=_field(record, "url", str, required=False) or "",
      categories=_names(record, "categories"),
      templates=_names(record, "templates"),
      redirects=_names(record, "redirects"),
      source=source, line=line_number)


def iter_pages(source: Union[str, os.PathLike, BinaryIO],
               on_error: Optional[Callable[[xml_dump.DumpError], None]] = None,
               source_name: Optional[str] = None) -> Iterator[HtmlPage]:
  """Streams the pages of an HTML dump (NDJSON; plain, gzip or bz2 by magic bytes).

  Args:
    source: a path or a binary file object at its start.
    on_error: called with a DumpError (naming the file, line number and why) for each line
      that cannot be read, and for a file that ends in corrupt or truncated compressed data;
      reading goes on with the next line where possible. When None, the first error is raised.
    source_name: file name used in pages and error messages (default: the path, or
      '<stream>').

  Yields:
    HtmlPage, in file order (blank lines skipped).

  Raises:
    xml_dump.DumpError: when `on_error` is None and a line or the file cannot be read.
  """
  if source_name is None:
    source_name = os.fspath(source) if isinstance(source, (str, os.PathLike)) else "<stream>"

  def report(message: str) -> None:
    error = xml_dump.DumpError(f"{source_name}: {message}")
    if on_error is None:
      raise error
    on_error(error)

  stream = open_text(source)
  lines = _lines(stream)
  try:
    number = 0
    while True:
      try:
        line = next(lines, None)
      except (EOFError, OSError, zlib.error) as e:  # truncated or corrupt gzip / bz2
        report(f"line {number + 1}: cannot decompress ({e})")
        return
      if line is None:
        return
      number += 1
      try:
        page = parse_page_line(line, source_name, number)
      except ValueError as e:
        report(f"line {number}: not an HTML dump record: {e}; {line[:80]!r}")
        continue
      if page is not None:
        yield page
  finally:
    if stream is not source:
      stream.close()


# Lines looked at by check_dump_start before a blank file is refused.
_HEAD_LINES = 20


def check_dump_start(source: Union[str, os.PathLike, BinaryIO],
                     source_name: Optional[str] = None) -> None:
  """Checks that a file is an HTML dump before a pipeline reads it: its first non-blank line
  must be a page record (parse_page_line). Later bad lines are counted and skipped by the
  pipeline.

  Raises:
    xml_dump.DumpError: naming the file, the line and why (empty file, not JSON, JSON lines
      of another kind: a field missing), with what an HTML dump holds.
  """
  if source_name is None:
    source_name = os.fspath(source) if isinstance(source, (str, os.PathLike)) else "<stream>"
  stream = open_text(source)
  lines = _lines(stream)
  try:
    for number in range(1, _HEAD_LINES + 1):
      try:
        line = next(lines, None)
      except (EOFError, OSError, zlib.error) as e:
        raise xml_dump.DumpError(f"{source_name}: cannot be decompressed ({e}); "
                                 f"{EXPECTED}") from e
      if line is None:
        break
      try:
        if parse_page_line(line, source_name, number) is not None:
          return
      except ValueError as e:
        holds = "" if str(e).startswith(("not JSON", "not UTF-8")) else "holds JSON, but "
        shown = line[:80].decode("utf-8", "replace")
        raise xml_dump.DumpError(f"{source_name}: {holds}line {number} is not an HTML dump "
                                 f"record ({e}): {shown!r}; {EXPECTED}; or a MediaWiki XML "
                                 "export (<mediawiki> with <page> elements)") from e
  finally:
    if stream is not source:
      stream.close()
  raise xml_dump.DumpError(f"{source_name}: holds no record (empty or blank lines only); "
                           f"{EXPECTED}")
