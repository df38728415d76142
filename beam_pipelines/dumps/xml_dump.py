"""Reading the pages of a MediaWiki XML export (plain or bz2, single- or multistream).

Pages are streamed (memory bounded by one page, not the file); a page that cannot be read is
reported with file, offset and page id (DumpError) and skipped when the caller handles errors.
Byte ranges of multistream dumps (planned by beam_pipelines.dumps.multistream) are read with the
same code. The <siteinfo> header (the wiki's language, namespaces and title case) is read on
its own by read_siteinfo (SiteInfo).
"""

import bz2
import dataclasses
import io
import os
import re
import xml.etree.ElementTree as ET
from typing import Any, BinaryIO, Callable, Dict, Iterator, Optional, Tuple, Union

_READ_BLOCK = 1 << 20  # bytes read from the (decompressed) dump at a time
_PAGE_START = re.compile(rb"<page[\s>]")
_PAGE_END = b"</page>"
_PAGE_ID = re.compile(rb"<id>\s*(\d+)\s*</id>")


@dataclasses.dataclass(frozen=True)
class Page:
  """One <page> of a MediaWiki XML export.

  Attributes:
    page_id: the page's <id> (not a revision id).
    title: the title as written in the dump (not normalized).
    ns: the namespace number from the <ns> tag (0 = articles); 0 when an old export has none.
    text: wikitext of the last <revision> ('' for an empty or self-closing <text/>).
    redirect_title: the title attribute of <redirect title=.../>, None when absent.
    source: name of the file the page was read from ('' when unknown), for error reports.
  """
  page_id: int
  title: str
  ns: int
  text: str
  redirect_title: Optional[str] = None
  source: str = ""


class DumpError(ValueError):
  """A page or a file of a dump that cannot be read; the message names file and offset."""


class _PrefixedReader(io.RawIOBase):
  """A readable stream: `prefix` bytes, then the rest of `fileobj` (closed with it if owned)."""

  def __init__(self, prefix: bytes, fileobj: BinaryIO, owns_fileobj: bool = False):
    super().__init__()
    self._prefix = prefix
    self._fileobj = fileobj
    self._owns_fileobj = owns_fileobj

  def readable(self) -> bool:
    return True

  def readinto(self, buffer) -> int:
    if self._prefix:
      n = min(len(buffer), len(self._prefix))
      buffer[:n] = self._prefix[:n]
      self._prefix = self._prefix[n:]
      return n
    data = self._fileobj.read(len(buffer))
    buffer[:len(data)] = data
    return len(data)

  def close(self) -> None:
    if not self.closed and self._owns_fileobj:
      self._fileobj.close()
    super().close()


class _RangeReader(io.RawIOBase):
  """A readable stream of the bytes [start, end) of a seekable binary file object."""

  def __init__(self, fileobj: BinaryIO, start: int, end: int, owns_fileobj: bool = False):
    super().__init__()
    self._fileobj = fileobj
    self._owns_fileobj = owns_fileobj
    self._left = end - start
    fileobj.seek(start)

  def readable(self) -> bool:
    return True

  def readinto(self, buffer) -> int:
    n = min(len(buffer), self._left)
    if n <= 0:
      return 0
    data = self._fileobj.read(n)
    buffer[:len(data)] = data
    self._left -= len(data)
    return len(data)

  def close(self) -> None:
    if not self.closed and self._owns_fileobj:
      self._fileobj.close()
    super().close()


class ClosesRawReader:
  """Mixin of a decompressing file (BZ2File, GzipFile) over a reader built here: closing it
  closes that reader too (those classes leave a file object they were given open). The
  subclass sets `_raw`."""

  _raw: Optional[BinaryIO] = None

  def close(self) -> None:
    try:
      super().close()
    finally:
      if self._raw is not None:
        self._raw.close()


class _ClosingBZ2File(ClosesRawReader, bz2.BZ2File):

  def __init__(self, raw: BinaryIO):
    super().__init__(raw, "rb")
    self._raw = raw


# Shared with beam_pipelines.dumps.html_dump (HTML dumps are opened the same way).
PrefixedReader = _PrefixedReader
ClosingBZ2File = _ClosingBZ2File


def open_dump(source: Union[str, os.PathLike, BinaryIO],
              byte_range: Optional[Tuple[int, int]] = None) -> BinaryIO:
  """Opens a dump (or a byte range of a multistream dump) as a stream of decompressed XML bytes.

  bzip2 is detected by its magic bytes ('BZh'), so a .bz2 file object from any file system
  works. `bz2.open` reads every stream of a multistream file (several concatenated bz2 streams,
  like *-pages-articles-multistream.xml.bz2), not just the first.

  Args:
    source: a local path, or a binary file object (e.g. from apache_beam FileSystems.open);
      seekable when `byte_range` is given.
    byte_range: (start, end) compressed byte offsets of a multistream file, end exclusive:
      only these bytes are read (one seek, then sequential reads), and they must hold whole bz2
      streams (start at a stream offset of the multistream index, end at the next range's
      start or at the end of the file). None: the whole file.

  Returns:
    A binary file object; the caller closes it. A file opened here from a path is closed with
    it; a file object passed in is not.

  Raises:
    DumpError: `byte_range` is given and its first bytes are not the start of a bz2 stream
      (an index that does not belong to the file, or a bad offset).
    ValueError: `byte_range` is empty or starts below 0.
  """
  if byte_range is not None and not 0 <= byte_range[0] < byte_range[1]:
    raise ValueError(f"bad byte range [{byte_range[0]}, {byte_range[1]})")
  owns = isinstance(source, (str, os.PathLike))
  base = open(source, "rb") if owns else source
  try:
    fileobj = base
    if byte_range is not None:
      fileobj = _RangeReader(base, byte_range[0], byte_range[1], owns_fileobj=owns)
    head = fileobj.read(3)
    if byte_range is not None and head != b"BZh":
      raise DumpError(f"compressed byte offset {byte_range[0]} is not the start of a bz2 "
                      f"stream (found {head!r}); does the multistream index belong to this "
                      "file?")
  except BaseException:
    if owns:
      base.close()
    raise
  raw = io.BufferedReader(_PrefixedReader(head, fileobj, owns_fileobj=owns),
                          buffer_size=_READ_BLOCK)
  if head == b"BZh":
    return _ClosingBZ2File(raw)
  return raw


# Bytes of decompressed text searched for the first <page> by check_dump_start: the <siteinfo>
# header before it is a few KB (namespaces); a dump whose first page starts later is not refused.
HEAD_BYTES = 4 << 20
_FIRST_TAG = re.compile(rb"<([A-Za-z_][-\w.:]*)")


def check_dump_start(source: Union[str, os.PathLike, BinaryIO], source_name: Optional[str] = None,
                     head_bytes: int = HEAD_BYTES) -> bytes:
  """Checks that a file is a MediaWiki XML export (plain or bz2) before a pipeline reads it.

  Reads at most `head_bytes` decompressed bytes: the first element must be <mediawiki> (any
  export version; an XML declaration, comments and a byte order mark may come first), and a
  <page> must follow unless the file ends first. The same as check_dump_head on what
  read_dump_head reads.

  Args:
    source: a path or a binary file object at its start (e.g. FileSystems.open).
    source_name: file name for the messages (default: the path, or '<stream>').
    head_bytes: decompressed bytes read at most.

  Returns:
    The decompressed bytes read: up to the block holding the first <page>, the end of the file
    or `head_bytes`; its <siteinfo> header, when it has one, is in them (parse_siteinfo gives
    what read_siteinfo reads, without decompressing the head again).

  Raises:
    DumpError: naming the file and what it holds instead: nothing (0 bytes), gzip, JSON
      lines, text that is not XML (raw wikitext), XML of another root element, an export
      without any <page>, or bz2 data that does not decompress.
  """
  if source_name is None:
    source_name = os.fspath(source) if isinstance(source, (str, os.PathLike)) else "<stream>"
  head, failure = read_dump_head(source, source_name, head_bytes)
  return check_dump_head(head, failure, source_name, head_bytes)


def read_dump_head(source: Union[str, os.PathLike, BinaryIO], source_name: str,
                   head_bytes: int = HEAD_BYTES,
                   stop: Optional[Callable[[bytes], Any]] = None
                   ) -> Tuple[bytes, Optional[Exception]]:
  """The decompressed bytes (plain or bz2) that check_dump_start checks: read block by block
  until the block holding the first <page>, the end of the file or `head_bytes`, or, with
  `stop`, until stop(head) is true (a head no longer the check's then; extraction.check_dump
  stops at an HTML dump's first bytes).

  Returns:
    (head, the decompression error that ended the read, or None).

  Raises:
    DumpError: the file cannot be opened (named).
  """
  def done(head, block):
    if _PAGE_START.search(head, max(0, len(head) - len(block) - 8)):
      return True
    return stop is not None and stop(head)

  return _read_head(source, source_name, head_bytes, done)


def dump_head_complete(head: bytes, stop: Optional[Callable[[bytes], Any]] = None,
                       head_bytes: int = HEAD_BYTES) -> bool:
  """Whether decompressed bytes from a dump's start hold all that read_dump_head(head_bytes=
  head_bytes, stop=stop) reads of it: a <page>, or stop(head) true, or `head_bytes` bytes
  (read_dump_head then stops within them; dumps.read_ahead.head waits for this)."""
  return bool(_PAGE_START.search(head) or len(head) >= head_bytes
              or (stop is not None and stop(head)))


def check_dump_head(head: bytes, failure: Optional[Exception], source_name: str,
                    head_bytes: int = HEAD_BYTES) -> bytes:
  """check_dump_start's checks of (head, failure) from read_dump_head(head_bytes=head_bytes)
  without `stop` (or one that never stopped it); returns the head.

  Raises:
    DumpError: as check_dump_start.
  """
  expected = "expected a MediaWiki XML export (<mediawiki> with <page> elements; .xml or .xml.bz2)"
  if failure is not None and not head:
    raise DumpError(f"{source_name}: cannot be decompressed ({failure}); {expected}")
  text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
  if not text:
    raise DumpError(f"{source_name}: is empty; {expected}")
  if text[:2] == b"\x1f\x8b":
    raise DumpError(f"{source_name}: is gzip-compressed; dumps are read plain or bz2; {expected}")
  if text[:1] in (b"{", b"[") and text[:2] not in (b"{{", b"{|", b"[["):  # not wikitext
    raise DumpError(f"{source_name}: holds JSON (JSON lines?), not XML; {expected}")
  if text[:1] != b"<":
    first = text.split(b"\n", 1)[0][:60].decode("utf-8", "replace")
    raise DumpError(f"{source_name}: is not XML (it starts with {first!r}: raw wikitext?); "
                    f"{expected}")
  # The first element (an XML declaration '<?xml', comments '<!--' and a doctype come first).
  match = _FIRST_TAG.search(text)
  if match is None:
    raise DumpError(f"{source_name}: holds no XML element; {expected}")
  name = match.group(1).decode("utf-8", "replace")
  if name.rsplit(":", 1)[-1] != "mediawiki":
    raise DumpError(f"{source_name}: its first element is <{name}>, not <mediawiki>; {expected}")
  if not _PAGE_START.search(text, match.end()) and len(head) < head_bytes:
    ending = f"its bz2 data is corrupt ({failure})" if failure else "the file ends"
    raise DumpError(f"{source_name}: holds no <page> before {ending}; {expected}")
  return head


@dataclasses.dataclass(frozen=True)
class SiteInfo:
  """The <siteinfo> header of a MediaWiki XML export: the wiki's language and namespaces.

  Attributes:
    dbname: the wiki's database name ('ukwiki'; '' when the header has none).
    lang: the content language: the xml:lang attribute of <mediawiki> ('uk'), else the
      dbname without its 'wiki' suffix; '' when neither is there.
    case: the main namespace's title case, 'first-letter' (the first character is
      upper-cased, MediaWiki's default) or 'case-sensitive' (Wiktionary).
    namespaces: namespace number -> (localized name as written, case) for every
      <namespace> but the main one ('' name), e.g. 14 -> ('Категорія', 'first-letter').
  """
  dbname: str = ""
  lang: str = ""
  case: str = "first-letter"
  namespaces: Tuple[Tuple[int, str, str], ...] = ()

  def namespace_names(self) -> Dict[int, str]:
    return {key: name for key, name, _ in self.namespaces}


_SITEINFO_END = b"</siteinfo>"
_MEDIAWIKI_LANG = re.compile(rb"<mediawiki\b[^>]*?\bxml:lang=\"([^\"]*)\"")


def parse_siteinfo(head: bytes, source: str = "") -> SiteInfo:
  """Parses the <siteinfo> element of an export's head (the bytes before its first <page>).

  Args:
    head: decompressed bytes from the start of the export, holding '<siteinfo>...</siteinfo>'.
    source: file name for the error message.

  Returns:
    SiteInfo; an empty SiteInfo() (English defaults) when `head` holds no <siteinfo>.

  Raises:
    DumpError: a <siteinfo> element that is not well-formed XML, naming `source`.
  """
  lang_match = _MEDIAWIKI_LANG.search(head[:4096])
  start = head.find(b"<siteinfo")
  end = head.find(_SITEINFO_END, start)
  if start < 0 or end < 0:
    lang = lang_match.group(1).decode("utf-8", "replace") if lang_match else ""
    return SiteInfo(lang=lang)
  try:
    element = ET.fromstring(head[start:end + len(_SITEINFO_END)])
  except ET.ParseError as e:
    raise DumpError(f"{source or '<stream>'}: malformed <siteinfo> header: {e}") from e
  dbname = ""
  case = "first-letter"
  namespaces = []
  for child in element:
    name = _local_name(child.tag)
    if name == "dbname":
      dbname = (child.text or "").strip()
    elif name == "case":
      case = (child.text or "").strip() or case
    elif name == "namespaces":
      for ns in child:
        if _local_name(ns.tag) != "namespace":
          continue
        try:
          key = int(ns.get("key", ""))
        except ValueError as e:
          raise DumpError(f"{source or '<stream>'}: <namespace> with key "
                          f"{ns.get('key')!r} in <siteinfo>") from e
        if key != 0:
          namespaces.append((key, (ns.text or "").strip(), ns.get("case", case)))
  lang = lang_match.group(1).decode("utf-8", "replace") if lang_match else ""
  if not lang and dbname.endswith("wiki"):
    lang = dbname[:-len("wiki")].replace("_", "-")
  return SiteInfo(dbname=dbname, lang=lang, case=case, namespaces=tuple(sorted(namespaces)))


def read_siteinfo(source: Union[str, os.PathLike, BinaryIO], source_name: Optional[str] = None,
                  head_bytes: int = HEAD_BYTES) -> SiteInfo:
  """Reads the <siteinfo> header of a dump (plain or bz2; of a multistream dump it is in the
  first stream, so only that is decompressed): at most `head_bytes` decompressed bytes, up to
  '</siteinfo>' or the first <page>.

  Returns:
    SiteInfo; SiteInfo() (English defaults) for an export without a <siteinfo> header.

  Raises:
    DumpError: the file cannot be read or decompressed, or its header is malformed.
  """
  if source_name is None:
    source_name = os.fspath(source) if isinstance(source, (str, os.PathLike)) else "<stream>"
  head, failure = _read_head(
      source, source_name, head_bytes,
      lambda head, block: _SITEINFO_END in head or _PAGE_START.search(head))
  if failure is not None:
    raise DumpError(f"{source_name}: cannot be decompressed: {failure}") from failure
  return parse_siteinfo(head, source_name)


def _read_head(source: Union[str, os.PathLike, BinaryIO], source_name: str, head_bytes: int,
               done: Callable[[bytes, bytes], Any]) -> Tuple[bytes, Optional[Exception]]:
  """The first decompressed bytes of a dump: blocks until `done(head, last block)` is true,
  the file ends or `head_bytes` are read. Returns (head, the decompression error that ended
  the read or None); a file that cannot be opened raises DumpError naming it."""
  try:
    stream = open_dump(source)
  except OSError as e:
    raise DumpError(f"{source_name}: cannot be read: {e}") from e
  head, failure = b"", None
  try:
    while len(head) < head_bytes:
      block = stream.read1(min(_READ_BLOCK, head_bytes - len(head)))
      if not block:
        break
      head += block
      if done(head, block):
        break
  except (EOFError, OSError) as e:  # not bz2 after all, or a corrupt stream
    failure = e
  finally:
    if stream is not source:
      stream.close()
  return head, failure


def _local_name(tag: str) -> str:
  """'{http://www.mediawiki.org/xml/export-0.10/}page' -> 'page' (any export version)."""
  return tag.rsplit("}", 1)[-1]


def parse_page_xml(chunk: bytes, source: str = "") -> Page:
  """Parses the bytes of one '<page>...</page>' element of an export.

  Raises:
    ET.ParseError: malformed XML (bad markup, a non-UTF-8 byte).
    ValueError: a page without <title> or <id>.
  """
  page = ET.fromstring(chunk)
  title = page_id = redirect_title = None
  ns = 0
  text = ""
  for child in page:
    name = _local_name(child.tag)
    if name == "title":
      title = child.text or ""
    elif name == "ns":
      ns = int((child.text or "0").strip())
    elif name == "id":
      page_id = int((child.text or "").strip())
    elif name == "redirect":
      redirect_title = child.get("title", "")
    elif name == "revision":  # full-history dumps: the last revision wins
      for field in child:
        if _local_name(field.tag) == "text":
          text = field.text or ""
  if title is None or page_id is None:
    raise ValueError("page without <title> or <id>")
  return Page(page_id=page_id, title=title, ns=ns, text=text,
              redirect_title=redirect_title, source=source)


def iter_pages(source: Union[str, os.PathLike, BinaryIO],
               on_error: Optional[Callable[[DumpError], None]] = None,
               source_name: Optional[str] = None,
               byte_range: Optional[Tuple[int, int]] = None) -> Iterator[Page]:
  """Streams the pages of a MediaWiki XML export (plain or bz2, single- or multistream).

  The decompressed bytes are split at '<page>' ... '</page>' (inside <text> a literal '<' is
  always escaped, so these cannot occur in content) and each page is parsed on its own with
  ElementTree. Memory is bounded by one page, not the file, and one malformed page (bad markup,
  a non-UTF-8 byte) is reported and skipped instead of ending the whole file. Tags are matched
  by local name, so every export schema version (xmlns .../export-0.N/) works. A self-closing
  `<text ... />` is an empty page.

  Args:
    source: a path or a binary file object.
    on_error: called with a DumpError (naming the file, byte offset and page id) for each page
      or file tail that cannot be read; reading continues with the next page where possible.
      When None, the first error is raised.
    source_name: file name used in error messages (default: the path, or '<stream>').
    byte_range: (start, end) compressed byte offsets of whole bz2 streams of a multistream
      dump (see open_dump and multistream.plan_stream_ranges): only the pages in these streams
      are read, with the same per-page code. Pages never straddle streams in a multistream
      dump; the <siteinfo> header (first stream) and the closing tag (last stream) are not
      needed. Error messages then name the range; their decompressed offsets count from its
      start.

  Yields:
    Page, in file order.

  Raises:
    DumpError: when `on_error` is None and a page or the file (range) cannot be read.
  """
  if source_name is None:
    source_name = os.fspath(source) if isinstance(source, (str, os.PathLike)) else "<stream>"
  where = source_name
  if byte_range is not None:
    where = f"{source_name} (bz2 streams at compressed bytes [{byte_range[0]}, {byte_range[1]}))"

  def report(offset: int, chunk: bytes, reason: str) -> None:
    match = _PAGE_ID.search(chunk[:4096]) if chunk else None
    page_id = match.group(1).decode() if match else "?"
    error = DumpError(f"{where}: page id {page_id} at decompressed byte offset {offset}: "
                      f"{reason}")
    if on_error is None:
      raise error
    on_error(error)

  try:
    stream = open_dump(source, byte_range)
  except DumpError as e:
    if on_error is None:
      raise DumpError(f"{where}: {e}") from e
    on_error(DumpError(f"{where}: {e}"))
    return
  try:
    buf = b""
    consumed = 0  # decompressed offset of buf[0]
    eof = False
    while True:
      match = _PAGE_START.search(buf)
      end = buf.find(_PAGE_END, match.start()) if match else -1
      if match and end >= 0:
        end += len(_PAGE_END)
        chunk = buf[match.start():end]
        # A '<page' inside this chunk means the previous page was never closed.
        inner = _PAGE_START.search(chunk, 1)
        if inner:
          report(consumed + match.start(), chunk[:inner.start()], "unterminated <page>")
          buf = buf[match.start() + inner.start():]
          consumed += match.start() + inner.start()
          continue
        try:
          yield parse_page_xml(chunk, source_name)
        except (ET.ParseError, ValueError) as e:
          report(consumed + match.start(), chunk, f"malformed page XML: {e}")
        buf = buf[end:]
        consumed += end
        continue
      if eof:
        if match:
          report(consumed + match.start(), buf[match.start():],
                 "file ends inside a <page> (truncated dump?)")
        return
      try:
        # read1: the data decompressed before a truncated end is returned, not lost.
        block = stream.read1(_READ_BLOCK)
      except (EOFError, OSError) as e:  # truncated or corrupt bz2
        report(consumed + len(buf), buf[match.start():] if match else b"",
               f"cannot decompress: {e}")
        return
      if not block:
        eof = True
      else:
        if not match:  # keep a tail in case '<page' straddles two blocks
          keep = min(len(buf), 8)
          consumed += len(buf) - keep
          buf = buf[len(buf) - keep:]
        buf += block
  finally:
    if stream is not source:
      stream.close()

