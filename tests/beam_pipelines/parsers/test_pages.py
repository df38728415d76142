"""Tests of parsers.pages: one page -> outputs, mentions, counts and skip reason."""

import pickle

import pytest

from beam_pipelines.dumps import html_dump
from beam_pipelines.dumps import xml_dump
from beam_pipelines.parsers import pages

ARTICLE = xml_dump.Page(
    7, "Ore River", 0,
    "'''Ore River''' flows past [[Port Alder]] into [[Lake Fen|the lake]].\n"
    "[[Category:Rivers]]", source="rivers.xml")


def test_article_gives_its_record_mentions_and_counts():
  result = pages.PageParser().parse(ARTICLE)
  assert result.skipped is None
  assert result.outputs == [
      (pages.ARTICLE, ("Ore River", (7, "Ore River flows past Port Alder into the lake.",
                                     ("Rivers",))))]
  assert [target for target, _ in result.mentions] == ["Port Alder", "Lake Fen"]
  # Each mention leaves with its own features encoded once (records.MentionPayload).
  ids, sources, spans, features = zip(*(payload for _, payload in result.mentions))
  assert sources == ("Ore River", "Ore River") and spans == ("Port Alder", "the lake")
  assert len(set(ids)) == 2
  assert all(isinstance(f, bytes) and b"Port Alder" in features[0] for f in features)
  assert result.counts["articles"] == 1
  assert result.counts["links_kept"] == 2
  assert result.counts["links_kept_prose"] == 2


def test_redirect_disambiguation_and_other_namespaces():
  parser = pages.PageParser()
  redirect = parser.parse(xml_dump.Page(8, "Ore stream", 0, "#REDIRECT [[Ore River]]"))
  assert redirect.outputs == [(pages.REDIRECT, ("Ore stream", "Ore River"))]
  assert redirect.counts == {"redirects": 1} and not redirect.mentions
  disambiguation = parser.parse(xml_dump.Page(
      9, "Ore (disambiguation)", 0, "'''Ore''' may be:\n* [[Ore River]]\n* [[Ore Bay]]"))
  assert disambiguation.outputs == [(pages.DISAMBIGUATION, "Ore (disambiguation)")]
  assert disambiguation.counts["links_dropped_disambiguation_page"] == 2
  assert not disambiguation.mentions
  hidden = parser.parse(xml_dump.Page(10, "Category:Stubs", 14, "__HIDDENCAT__"))
  assert hidden.outputs == [(pages.CATEGORY, ("Stubs", True))]
  talk = parser.parse(xml_dump.Page(11, "Talk:Ore River", 1, "[[Ore River]] chat"))
  assert talk == pages.PageResult([], [], {"pages_other_namespace": 1}, None)


def test_skipped_page_keeps_what_it_gave_before_and_says_why():
  # An HTML record's redirects come before its body is parsed; a body over the size limit
  # skips the article and its mentions, not the redirects, and the reason names the file,
  # line, page id and title.
  page = html_dump.HtmlPage(21, "Gull Sea", 0, "<p>The <a href='./Port_Alder'>port</a>.</p>",
                            redirects=("Gull Ocean",), source="dump.ndjson", line=3)
  result = pages.PageParser(max_page_chars=20).parse(page)
  assert result.outputs == [(pages.REDIRECT, ("Gull Ocean", "Gull Sea"))]
  assert not result.mentions
  assert result.counts == {"redirects": 1, "redirects_from_html_records": 1, "pages_failed": 1}
  assert result.skipped == ("file dump.ndjson line 3, page id 21 ('Gull Sea'): page of 43 "
                            "characters exceeds 20")


def test_worker_functions_give_what_the_parser_gives():
  with pytest.raises(RuntimeError, match="init_worker"):
    pages.parse_pages([ARTICLE])
  pages.init_worker({}, 1000)
  try:
    in_worker = pages.parse_pages([ARTICLE, ARTICLE])
  finally:
    pages._WORKER_PARSER = None  # pylint: disable=protected-access
  assert in_worker == pages.parse_batch(pages.PageParser(), [ARTICLE, ARTICLE])
  # What crosses the process boundary survives pickling whole.
  assert pickle.loads(pickle.dumps(in_worker)) == in_worker


def test_a_batchs_mentions_come_grouped_by_target():
  """parse_batch: each page's result without its mentions, and the batch's mentions grouped
  by raw target (targets in the order of their first mention; a group's mentions in page
  then text order): the same mentions as the pages' own results."""
  parser = pages.PageParser()
  second = xml_dump.Page(8, "Port Alder", 0,
                         "Port Alder lies on the [[Ore River]] near [[Lake Fen]].")
  alone = [parser.parse(page) for page in (ARTICLE, second, ARTICLE)]
  results, groups = pages.parse_batch(parser, [ARTICLE, second, ARTICLE])
  assert [r._replace(mentions=[]) for r in alone] == results
  assert all(not r.mentions for r in results)
  mentions = [m for r in alone for m in r.mentions]
  assert len(mentions) > len(groups) > 1
  assert [target for target, _ in groups] == list(dict.fromkeys(t for t, _ in mentions))
  for target, payloads in groups:
    assert payloads == [p for t, p in mentions if t == target]


def test_a_parse_that_raises_is_skipped_with_the_error_type(monkeypatch):
  def broken(*args, **kwargs):
    raise KeyError("boom")
  monkeypatch.setattr(pages.wikitext, "parse_article", broken)
  result = pages.PageParser().parse(ARTICLE)
  assert (result.outputs, result.mentions) == ([], [])
  assert result.counts == {"pages_failed": 1}
  assert result.skipped == "file rivers.xml, page id 7 ('Ore River'): KeyError: 'boom'"


def test_a_page_of_unclosed_markup_is_skipped_at_once_with_why():
  # mwparserfromhell's tokenizer is quadratic in unclosed openers: this page would take
  # minutes; it is refused by the count (mw_tree.check_unclosed) and reported.
  page = xml_dump.Page(8, "Broken Table", 0, "{|\n" * 50000, source="rivers.xml")
  result = pages.PageParser().parse(page)
  assert (result.outputs, result.mentions) == ([], [])
  assert result.counts == {"pages_failed": 1}
  assert result.skipped.startswith(
      "file rivers.xml, page id 8 ('Broken Table'): UnclosedMarkupError: 50000 unclosed "
      "openers (50000 '{|') in 150000 characters")
