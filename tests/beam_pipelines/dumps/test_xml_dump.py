"""Tests of beam_pipelines.dumps.xml_dump: reading the pages of plain, bz2 and multistream dumps."""

import bz2
import io
import random

import pytest

from beam_pipelines.dumps import xml_dump
from beam_pipelines.parsers import wikitext
from tests.beam_pipelines.dumps.dump_testutil import dump, page_xml


def mentions_of(article):
  return [(link.anchor, link.target) for link in article.links]


class TestIterPages:

  def test_reads_pages_with_namespace_of_any_version(self):
    data = dump(page_xml(7, "Gravel Bay", "Some '''text'''."),
                page_xml(8, "Talk:Gravel Bay", "chat", ns=1))
    pages = list(xml_dump.iter_pages(io.BytesIO(data)))
    assert [(p.page_id, p.title, p.ns) for p in pages] == [(7, "Gravel Bay", 0),
                                                           (8, "Talk:Gravel Bay", 1)]
    assert pages[0].text == "Some '''text'''."
    assert pages[0].redirect_title is None

  def test_empty_self_closing_text_is_an_empty_page(self):
    # Bug kind wp-01: '<text ... />' must not swallow the next page.
    data = (b"<mediawiki><page><title>Slate Hollow</title><ns>0</ns><id>31</id><revision>"
            b"<id>1</id><text bytes=\"0\" xml:space=\"preserve\" /></revision></page><page>"
            b"<title>Tern Marsh</title><ns>0</ns><id>32</id><revision><id>2</id>"
            b"<text xml:space=\"preserve\">'''Tern Marsh''' drains into the [[Wren Canal]]."
            b"</text></revision></page></mediawiki>")
    pages = list(xml_dump.iter_pages(io.BytesIO(data)))
    assert [(p.page_id, p.title, p.text) for p in pages] == [
        (31, "Slate Hollow", ""),
        (32, "Tern Marsh", "'''Tern Marsh''' drains into the [[Wren Canal]].")]
    article = wikitext.parse_article(pages[1].text, pages[1].title)
    assert mentions_of(article) == [("Wren Canal", "Wren Canal")]
    assert "<" not in article.text

  def test_multistream_bz2_reads_every_stream(self, tmp_path):
    # Bug kind wp-02: a decompressor that stops after the first bz2 stream.
    first = b'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">' + page_xml(
        41, "Cedar Ford", "One.")
    second = page_xml(42, "Elm Reach", "Two.") + b"</mediawiki>"
    path = tmp_path / "multi.xml.bz2"
    path.write_bytes(bz2.compress(first) + bz2.compress(second))
    with bz2.open(path) as f:
      assert len(f.read()) == len(first) + len(second)
    assert [p.page_id for p in xml_dump.iter_pages(str(path))] == [41, 42]
    with open(path, "rb") as f:  # a file object (as Beam's FileSystems gives) works too
      assert [p.title for p in xml_dump.iter_pages(f)] == ["Cedar Ford", "Elm Reach"]

  def test_redirect_element_and_html_escaping(self):
    data = dump(page_xml(5, "Old Name", "#REDIRECT [[New Name]]", redirect="New Name"),
                page_xml(6, "Smith", "Smith &amp;amp; Sons &lt;b&gt;x&lt;/b&gt;"))
    pages = list(xml_dump.iter_pages(io.BytesIO(data)))
    assert pages[0].redirect_title == "New Name"
    assert pages[1].text == "Smith &amp; Sons <b>x</b>"  # XML escaping decoded once

  def test_malformed_page_is_reported_and_skipped(self):
    bad = b"<page><title>Broken</title><ns>0</ns><id>9</id><revision><text>a < b</text>" \
          b"</revision></page>\n"
    non_utf8 = b"<page><title>Bytes</title><ns>0</ns><id>10</id><revision><text>\xff\xfe" \
               b"</text></revision></page>\n"
    data = dump(page_xml(8, "Good One", "fine"), bad, non_utf8, page_xml(11, "Good Two", "ok"))
    errors = []
    pages = list(xml_dump.iter_pages(io.BytesIO(data), on_error=errors.append,
                                     source_name="test.xml"))
    assert [p.page_id for p in pages] == [8, 11]
    assert len(errors) == 2
    assert "test.xml" in str(errors[0]) and "page id 9" in str(errors[0])
    assert "page id 10" in str(errors[1])
    with pytest.raises(xml_dump.DumpError):
      list(xml_dump.iter_pages(io.BytesIO(data)))

  def test_truncated_bz2_keeps_earlier_pages(self, tmp_path):
    rng = random.Random(0)
    words = ["ore", "river", "bay", "cliff", "town", "mill", "ferry", "gull"]
    data = dump(*[page_xml(i, f"Page {i}", " ".join(rng.choice(words) for _ in range(2000)))
                  for i in range(1, 30)])
    compressed = bz2.compress(data, compresslevel=1)  # 100 kB blocks: several per file
    path = tmp_path / "cut.xml.bz2"
    path.write_bytes(compressed[:len(compressed) * 2 // 3])
    errors = []
    pages = list(xml_dump.iter_pages(str(path), on_error=errors.append))
    assert pages and pages[0].page_id == 1 and len(pages) < 29
    assert len(errors) == 1 and "cut.xml.bz2" in str(errors[0])


class TestCheckDumpStart:
  """What a user may give as --input instead of a dump is refused before any work (issue 14)."""

  @pytest.mark.parametrize("data", [
      dump(page_xml(1, "Gravel Bay", "Text.")),
      b"\xef\xbb\xbf<?xml version='1.0' encoding='utf-8'?>\n<!-- export -->\n"
      + dump(page_xml(1, "Gravel Bay", "Text.")),
      bz2.compress(dump(page_xml(1, "Gravel Bay", "Text."))),
      # Multistream layout: the header in a stream of its own, the pages in the next.
      bz2.compress(b"<mediawiki>\n<siteinfo/>\n") + bz2.compress(page_xml(1, "A", "B.")),
  ], ids=["plain", "declaration_and_comment", "bz2", "multistream"])
  def test_exports_with_pages_pass(self, data):
    xml_dump.check_dump_start(io.BytesIO(data), "dump.xml")

  @pytest.mark.parametrize("data, message", [
      (b"", "is empty"),
      (b"\n  \n", "is empty"),
      (bz2.compress(b""), "is empty"),
      (__import__("gzip").compress(dump(page_xml(1, "A", "B."))), "is gzip-compressed"),
      (b'{"title": "Gravel Bay", "text": "A bay."}\n', "holds JSON"),
      (b"'''Gravel Bay''' is a bay.\n", r"is not XML \(it starts with \"'''Gravel Bay"),
      (b"{{Infobox bay}}\n'''Gravel Bay'''", "is not XML .*raw wikitext"),
      (b"<!DOCTYPE html><html><body>Gravel Bay</body></html>", "its first element is <html>"),
      (b"<mediawiki><siteinfo/></mediawiki>", "holds no <page> before the file ends"),
      (b"BZh91AY&SYnot really bz2", "cannot be decompressed"),
  ], ids=["empty", "blank", "empty_bz2", "gzip", "jsonl", "wikitext", "wikitext_template",
          "html", "no_pages", "corrupt_bz2"])
  def test_other_files_are_refused_naming_the_file(self, data, message):
    with pytest.raises(xml_dump.DumpError, match=f"^gravel.xml: {message}"):
      xml_dump.check_dump_start(io.BytesIO(data), "gravel.xml")
