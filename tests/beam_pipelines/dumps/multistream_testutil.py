"""Builds real multistream dumps (and their index) for tests, from a single-stream dump."""

import bz2
import io
import os
import re
from typing import List, Optional, Tuple

from beam_pipelines.dumps import xml_dump
from tests import testutil

GENSIM_DUMP = os.path.join(testutil.REPO_ROOT, "..", "shared", "data", "enwiki",
                           "gensim-enwiki-shortened.xml.bz2")
DUMP_NAME = "enwiki-20160101-pages-articles-multistream.xml.bz2"
INDEX_NAME = "enwiki-20160101-pages-articles-multistream-index.txt.bz2"


def split_export(xml: bytes) -> Tuple[bytes, List[bytes], bytes]:
  """Decompressed export -> (header up to the first <page> line, page elements, footer)."""
  starts = [xml.rfind(b"\n", 0, m.start()) + 1 for m in re.finditer(rb"<page[\s>]", xml)]
  end = xml.rindex(b"</page>") + len(b"</page>")
  end = xml.index(b"\n", end) + 1 if b"\n" in xml[end:] else end
  pages = [xml[a:b] for a, b in zip(starts, starts[1:] + [end])]
  return xml[:starts[0]], pages, xml[end:]


def write_multistream(source: str, directory: str, pages_per_stream: int = 10,
                      dump_name: str = DUMP_NAME, index_name: str = INDEX_NAME,
                      max_pages: Optional[int] = None,
                      max_page_bytes: Optional[int] = None) -> Tuple[str, str, List[int]]:
  """Writes `source`'s pages as a multistream dump like Wikimedia's, with its index.

  Layout: one bz2 stream with the header (<mediawiki>, <siteinfo>), streams of
  `pages_per_stream` pages, one stream with the closing tag; the index (bz2) has a line
  'offset:page_id:title' per page. `max_page_bytes` keeps only smaller pages and `max_pages`
  the first ones (fast pipeline tests); None keeps all.

  Returns:
    (dump path, index path, stream offsets of the page streams).
  """
  with bz2.open(source) as f:
    header, pages, footer = split_export(f.read())
  if max_page_bytes is not None:
    pages = [p for p in pages if len(p) <= max_page_bytes]
  pages = pages[:max_pages]
  out = bytearray(bz2.compress(header))
  lines, offsets = [], []
  for i in range(0, len(pages), pages_per_stream):
    offsets.append(len(out))
    chunk = b"".join(pages[i:i + pages_per_stream])
    for page in xml_dump.iter_pages(io.BytesIO(b"<mediawiki>" + chunk + b"</mediawiki>")):
      lines.append(f"{len(out)}:{page.page_id}:{page.title}\n")
    out += bz2.compress(chunk)
  out += bz2.compress(footer)
  dump_path = os.path.join(directory, dump_name)
  index_path = os.path.join(directory, index_name)
  with open(dump_path, "wb") as f:
    f.write(out)
  with open(index_path, "wb") as f:
    f.write(bz2.compress("".join(lines).encode("utf-8")))
  return dump_path, index_path, offsets
