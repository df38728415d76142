"""Tests of beam_pipelines.parsers.page_kinds: disambiguation pages, hidden categories."""

import pytest

from beam_pipelines.parsers import page_kinds
from beam_pipelines.parsers import wikitext


@pytest.mark.parametrize("title, text, reason", [
    ("Mercury", "__DISAMBIG__\n'''Mercury''' may refer to:\n* [[Mercury (planet)]]",
     page_kinds.BY_SWITCH),
    ("Mercury", "'''Mercury''' may refer to:\n* [[Mercury (planet)]]\n{{Disambiguation}}",
     page_kinds.BY_TEMPLATE),
    ("Fisher", "'''Fisher''' may refer to:\n* [[Ann Fisher]]\n{{hndis|Fisher}}",
     page_kinds.BY_TEMPLATE),
    ("Aa", "'''Aa''' may be:\n* [[Aa (Weser)]]\n{{Geodis}}", page_kinds.BY_TEMPLATE),
    ("Sinope", "'''Sinope''' ist:\n* [[Sinop (Türkei)]]\n{{Begriffsklärung}}",
     page_kinds.BY_TEMPLATE),
    ("Bell", "* [[Bell (instrument)]]\n{{Airport disambiguation}}", page_kinds.BY_TEMPLATE),
    ("Ada", "* [[Ada Lovelace]]\n[[Category:Three-letter disambiguation pages]]",
     page_kinds.BY_CATEGORY),
    ("Food (disambiguation)", "* [[Food]]\n* [[Food (film)]]", page_kinds.BY_TITLE),
])
def test_disambiguation_pages_are_recognised_as_mediawiki_marks_them(title, text, reason):
  assert page_kinds.disambiguation_reason(wikitext.parse_article(text, title), title) == reason


@pytest.mark.parametrize("title, text", [
    ("Mercury (planet)", "'''Mercury''' is a planet near [[Venus]].{{disambiguation needed}}"),
    ("Smith (surname)", "'''Smith''' is a surname.\n* [[Adam Smith]]\n{{Surname}}"),
    ("List of ships", "* [[HMS Ore]]\n{{Set index article}}"),
    ("Gull Sea", "A sea.<ref>{{Disambiguation}}</ref>"),  # in a citation: not the page's
    # MediaWiki's __DISAMBIG__ is case-sensitive: written in lower case it is plain text.
    ("Gull Bay", "Gull Bay is a bay. __disambig__"),
])
def test_articles_and_set_index_lists_are_not_disambiguation_pages(title, text):
  assert page_kinds.disambiguation_reason(wikitext.parse_article(text, title), title) is None


@pytest.mark.parametrize("text, hidden", [
    ("__HIDDENCAT__\nArticles whose links are dead.", True),
    ("{{Hidden category}}\n[[Category:Tracking categories]]", True),
    ("{{Monthly clean-up category}}", True),
    ("{{Maintenance category|hidden=yes|tracking=yes}}", True),
    ("{{Tracking category}}", False),  # shown unless hidden=yes
    ("<!-- __HIDDENCAT__ -->{{Commons category|Rivers}}", False),
    ("[[Category:Rivers]]", False),
])
def test_hidden_category_pages(text, hidden):
  assert page_kinds.hidden_category_page(text) is hidden


@pytest.mark.parametrize("name, maintenance", [
    ("All articles with dead external links", True),
    ("Articles with short description", True),
    ("Wikipedia articles needing clarification from May 2012", True),
    ("CS1 maint: archived copy as title", True),
    ("Webarchive template wayback links", True),
    ("Use dmy dates from March 2019", True),
    ("Use British English from June 2015", True),
    ("Pages using infobox river with unknown parameters", True),
    ("Short description is different from Wikidata", True),
    ("Accuracy disputes from February 2016", True),
    ("Wikipedia:Belege fehlen", True),
    ("Rivers of Norland", False),
    ("Living people", False),
    ("Articles of Confederation", False),
    ("Articles with example Python code", False),  # a visible topical category
    ("Films from 2010", False),
    ("Wikidata", False),
])
def test_maintenance_category_names(name, maintenance):
  assert page_kinds.is_maintenance_category(name) is maintenance
