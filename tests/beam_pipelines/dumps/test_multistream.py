"""Tests of beam_pipelines.dumps.multistream: index names, index reading, byte ranges."""

import bz2
import io
import os

import pytest

from beam_pipelines.dumps import multistream
from beam_pipelines.dumps import xml_dump
from tests.beam_pipelines.dumps import multistream_testutil
from tests.beam_pipelines.dumps.dump_testutil import page_xml


def _page_fields(pages):
  return [(p.page_id, p.title, p.ns, p.text, p.redirect_title) for p in pages]


class TestMultistream:

  def test_index_names(self):
    assert multistream.multistream_index_names(
        "enwiki-20240601-pages-articles-multistream.xml.bz2") == [
            "enwiki-20240601-pages-articles-multistream-index.txt.bz2",
            "enwiki-20240601-pages-articles-multistream-index.txt"]
    assert multistream.multistream_index_names(
        "enwiki-20240601-pages-articles-multistream3.xml-p151574p311329.bz2")[0] == (
            "enwiki-20240601-pages-articles-multistream-index3.txt-p151574p311329.bz2")
    assert multistream.multistream_index_names("enwiki-20240601-pages-articles.xml.bz2") == []

  def test_pair_indexes_by_name(self):
    dumps = ["/d/enwiki-1-pages-articles-multistream.xml.bz2", "/d/other.xml.bz2"]
    index = "/i/enwiki-1-pages-articles-multistream-index.txt.bz2"
    assert multistream.pair_multistream_indexes(dumps, [index]) == {dumps[0]: index}
    assert multistream.pair_multistream_indexes(dumps[1:], ["/i/idx.txt"]) == {
        dumps[1]: "/i/idx.txt"}
    with pytest.raises(ValueError, match="idx.txt"):
      multistream.pair_multistream_indexes(dumps, ["/i/idx.txt"])

  def test_read_index(self):
    index = b"600:10:Ore River\n600:12:Talk:Ore: a river\n\n95000:13:Port Alder\n"
    assert multistream.read_multistream_index(io.BytesIO(bz2.compress(index))) == [600, 95000]
    assert multistream.read_multistream_index(io.BytesIO(index)) == [600, 95000]
    with pytest.raises(xml_dump.DumpError, match=r"idx.txt: line 2 "):
      multistream.read_multistream_index(io.BytesIO(b"600:10:A\nx600:11:B\n"),
                                      source_name="idx.txt")
    with pytest.raises(xml_dump.DumpError, match="without any line"):
      multistream.read_multistream_index(io.BytesIO(b""))

  def test_plan_ranges(self):
    offsets = [100, 250, 400, 700]  # streams: header [0,100), 4 page streams, footer at 1000
    assert multistream.plan_stream_ranges(offsets, 1000, 300) == [(0, 400), (400, 700),
                                                               (700, 1000)]
    assert multistream.plan_stream_ranges(offsets, 1000, 1) == [
        (0, 100), (100, 250), (250, 400), (400, 700), (700, 1000)]
    assert multistream.plan_stream_ranges(offsets, 1000, 10**9) == [(0, 1000)]
    for bad in ([0, 100], [100, 100], [300, 200], [100, 1000]):
      with pytest.raises(ValueError, match="not increasing inside the file"):
        multistream.plan_stream_ranges(bad, 1000, 300)

  def test_split_read_matches_whole_read(self, tmp_path):
    if not os.path.exists(multistream_testutil.GENSIM_DUMP):
      pytest.skip("../shared/data/enwiki not available")
    dump_path, index_path, stream_offsets = multistream_testutil.write_multistream(
        multistream_testutil.GENSIM_DUMP, str(tmp_path), pages_per_stream=10)
    offsets = multistream.read_multistream_index(index_path)
    assert offsets == stream_offsets and len(offsets) == 21
    original = _page_fields(xml_dump.iter_pages(multistream_testutil.GENSIM_DUMP))
    whole = _page_fields(xml_dump.iter_pages(dump_path))
    assert len(whole) == 206 and whole == original
    size = os.path.getsize(dump_path)
    for range_bytes in (1, 200_000, size):
      ranges = multistream.plan_stream_ranges(offsets, size, range_bytes)
      split, errors = [], []
      with open(dump_path, "rb") as f:  # one file object, seeked per range
        for byte_range in ranges:
          split += _page_fields(xml_dump.iter_pages(f, on_error=errors.append,
                                                    byte_range=byte_range))
      assert not errors
      assert split == whole, range_bytes
    assert len(multistream.plan_stream_ranges(offsets, size, 1)) == 22  # header + 21 streams
    # A range read from a path holds just its pages: the 2nd page stream has pages 10-19.
    assert _page_fields(xml_dump.iter_pages(dump_path, byte_range=(offsets[1], offsets[2]))) \
        == whole[10:20]

  def test_bad_ranges_are_reported(self, tmp_path):
    pages = [page_xml(i, f"Page {i}", f"Text {i}.") for i in range(1, 7)]
    streams = [b"<mediawiki>\n", b"".join(pages[:3]), b"".join(pages[3:]), b"</mediawiki>\n"]
    compressed = [bz2.compress(s) for s in streams]
    path = tmp_path / "x-multistream.xml.bz2"
    path.write_bytes(b"".join(compressed))
    second = len(compressed[0])
    third = second + len(compressed[1])
    assert [p.page_id for p in xml_dump.iter_pages(str(path), byte_range=(third, 10**6))] \
        == [4, 5, 6]
    errors = []
    assert list(xml_dump.iter_pages(str(path), on_error=errors.append,
                                    byte_range=(second + 1, third))) == []
    assert len(errors) == 1 and "not the start of a bz2 stream" in str(errors[0])
    assert f"[{second + 1}, {third})" in str(errors[0]) and "x-multistream" in str(errors[0])
    errors = []  # a range that ends inside a stream: earlier streams' pages still come
    got = list(xml_dump.iter_pages(str(path), on_error=errors.append,
                                   byte_range=(second, third + len(compressed[2]) // 2)))
    assert [p.page_id for p in got] == [1, 2, 3]
    assert len(errors) == 1 and "cannot decompress" in str(errors[0])
    with pytest.raises(xml_dump.DumpError, match="not the start of a bz2 stream"):
      list(xml_dump.iter_pages(str(path), byte_range=(1, third)))
