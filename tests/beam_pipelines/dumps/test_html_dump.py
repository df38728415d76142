"""Tests of beam_pipelines.dumps.html_dump: reading HTML dumps (NDJSON; plain, gzip, bz2)."""

import bz2
import gzip
import io
import json
import os

import pytest

from beam_pipelines.dumps import html_dump
from beam_pipelines.dumps import xml_dump
from tests import testutil

REAL_FILE = testutil.shared_data("html", "enwiki-2014-render-html.ndjson.gz")


def record(page_id, name, html, **extra):
  value = {"name": name, "identifier": page_id, "version": {"identifier": page_id + 500},
           "url": "https://en.wikipedia.org/wiki/" + name.replace(" ", "_"),
           "article_body": {"html": html}}
  value.update(extra)
  return json.dumps(value)


LINES = [record(7, "Gravel Bay", "<p>Gravel Bay faces <a href=\"./Ore_Sea\">the sea</a>.</p>"),
         "",
         record(8, "Tern Marsh", "<p>A marsh.</p>", namespace={"identifier": 0},
                categories=[{"name": "Category:Marshes", "url": "x"}],
                templates=[{"name": "Template:Infobox marsh"}],
                redirects=[{"name": "Tern Fen"}, {"name": "Tern bog"}])]
DATA = ("\n".join(LINES) + "\n").encode("utf-8")


@pytest.mark.parametrize("compress", [lambda b: b, gzip.compress, bz2.compress],
                         ids=["plain", "gzip", "bz2"])
def test_reads_records_plain_gzip_and_bz2(compress):
  pages = list(html_dump.iter_pages(io.BytesIO(compress(DATA)), source_name="d.ndjson"))
  assert [(p.page_id, p.title, p.ns, p.revision_id, p.line) for p in pages] == [
      (7, "Gravel Bay", 0, 507, 1), (8, "Tern Marsh", 0, 508, 3)]
  assert pages[0].html.startswith("<p>Gravel Bay")
  assert pages[0].url == "https://en.wikipedia.org/wiki/Gravel_Bay"
  assert pages[1].categories == ("Category:Marshes",)
  assert pages[1].templates == ("Template:Infobox marsh",)
  assert pages[1].redirects == ("Tern Fen", "Tern bog")
  assert pages[1].source == "d.ndjson"


def test_malformed_line_names_file_and_line_and_reading_goes_on():
  bad_id = json.loads(record(9, "X", "<p/>"))
  bad_id["identifier"] = "q"
  data = "\n".join([LINES[0], '{"name": "Bad", ', json.dumps(bad_id),
                     json.dumps({"name": "No Body", "identifier": 3}), LINES[2]]) + "\n"
  errors = []
  pages = list(html_dump.iter_pages(io.BytesIO(data.encode()), on_error=errors.append,
                                    source_name="dump.ndjson"))
  assert [p.title for p in pages] == ["Gravel Bay", "Tern Marsh"]
  assert [p.line for p in pages] == [1, 5]
  messages = [str(e) for e in errors]
  assert len(messages) == 3
  assert messages[0].startswith("dump.ndjson: line 2: not an HTML dump record: not JSON")
  assert messages[1].startswith("dump.ndjson: line 3: ") and "\"identifier\" is str" in messages[1]
  assert messages[2].startswith("dump.ndjson: line 4: ") and "\"article_body.html\"" in messages[2]
  # Without a handler the first bad line raises.
  with pytest.raises(xml_dump.DumpError, match=r"^dump\.ndjson: line 2: "):
    list(html_dump.iter_pages(io.BytesIO(data.encode()), source_name="dump.ndjson"))


def test_truncated_gzip_is_reported_after_the_pages_before_it():
  data = gzip.compress(DATA * 50)
  errors = []
  pages = list(html_dump.iter_pages(io.BytesIO(data[:len(data) - 30]), on_error=errors.append,
                                    source_name="cut.ndjson.gz"))
  assert 50 <= len(pages) < 100  # the lines decompressed before the cut
  assert len(errors) == 1 and "cannot decompress" in str(errors[0])


@pytest.mark.parametrize("data,expected", [
    (DATA, html_dump.FORMAT_HTML),
    (gzip.compress(DATA), html_dump.FORMAT_HTML),
    (bz2.compress(b"\xef\xbb\xbf\n" + DATA), html_dump.FORMAT_HTML),
    (b"<mediawiki><page></page></mediawiki>", html_dump.FORMAT_XML),
    (bz2.compress(b"<?xml version='1.0'?><mediawiki>"), html_dump.FORMAT_XML),
    (b"{{Infobox river}}\n'''Ore'''", html_dump.FORMAT_XML),  # raw wikitext: the XML check
    (b"", html_dump.FORMAT_XML),
    # The whole sniff window is read: past open_text's 3 bytes, past a first bz2 stream.
    (b"  \n" + DATA, html_dump.FORMAT_HTML),
    (bz2.compress(b" ") + bz2.compress(DATA), html_dump.FORMAT_HTML),
    (b" " * html_dump.SNIFF_BYTES + DATA, html_dump.FORMAT_XML),  # past it: the XML check's
])
def test_sniff_format_by_content(data, expected):
  assert html_dump.sniff_format(io.BytesIO(data)) == expected


def test_check_dump_start(tmp_path):
  good = tmp_path / "good.ndjson.gz"
  good.write_bytes(gzip.compress(b"\n" + DATA))
  html_dump.check_dump_start(str(good))
  empty = tmp_path / "empty.ndjson"
  empty.write_bytes(b"\n\n")
  with pytest.raises(xml_dump.DumpError, match="empty.ndjson: holds no record"):
    html_dump.check_dump_start(str(empty))
  bad = tmp_path / "bad.ndjson"
  bad.write_text("\n" + json.dumps({"title": "Gravel Bay", "text": "x"}) + "\n")
  with pytest.raises(xml_dump.DumpError,
                     match=r"bad.ndjson: holds JSON, but line 2 is not an HTML dump record "
                           r"\(no \"name\" field"):
    html_dump.check_dump_start(str(bad))


@pytest.mark.skipif(not os.path.exists(REAL_FILE), reason="needs ../shared/data")
def test_real_html_dump_first_pages():
  pages = []
  for page in html_dump.iter_pages(REAL_FILE):
    pages.append(page)
    if len(pages) == 3:
      break
  assert [(p.page_id, p.title, p.revision_id) for p in pages[:2]] == [
      (236128, "Renaissance (band)", 600647606), (291520, "Mischa Barton", 599434140)]
  assert pages[0].url == "https://en.wikipedia.org/wiki/Renaissance_(band)"
  assert '<a href="//en.wikipedia.org/wiki/Progressive_rock"' in pages[0].html
  assert html_dump.sniff_format(REAL_FILE) == html_dump.FORMAT_HTML
  html_dump.check_dump_start(REAL_FILE)
