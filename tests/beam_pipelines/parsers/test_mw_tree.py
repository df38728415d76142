"""Tests of beam_pipelines.parsers.mw_tree: the tree mwparserfromhell.parse builds, faster."""

import glob

import mwparserfromhell
import pytest

from beam_pipelines.parsers import mw_tree
from tests import testutil


def test_fast_builder_is_used_with_this_mwparserfromhell():
  # The self-check at import passed: FastBuilder's trees equal mwparserfromhell's.
  assert mw_tree.FAST


@pytest.mark.parametrize("skip_style_tags", [True, False])
def test_same_tree_as_mwparserfromhell_on_every_kind_of_node(skip_style_tags):
  text = mw_tree._SAMPLE + "<ref>x</ref name=y> {{a|{{{b|c}}}=d}} [[a|b|c]] <p/> ===x=="
  expected = mwparserfromhell.parse(text, skip_style_tags=skip_style_tags)
  got = mw_tree.parse(text, skip_style_tags=skip_style_tags)
  assert mw_tree._same_tree(expected, got)
  assert str(got) == text
  assert [type(n) for n in got.filter(recursive=True)] == [
      type(n) for n in expected.filter(recursive=True)]


def test_same_tree_as_mwparserfromhell_on_real_wikitext():
  paths = sorted(glob.glob(testutil.shared_data("wikitext_en", "*.txt")))[:5]
  if not paths:
    pytest.skip("no ../shared/data/wikitext_en")
  for path in paths:
    with open(path, encoding="utf-8") as f:
      text = f.read()
    assert mw_tree._same_tree(mwparserfromhell.parse(text, skip_style_tags=True),
                              mw_tree.parse(text, skip_style_tags=True)), path


def test_a_different_tree_is_noticed():
  a = mw_tree.parse("[[a|b]]")
  b = mw_tree.parse("[[a|c]]")
  assert not mw_tree._same_tree(a, b)
  assert not mw_tree._same_tree(mw_tree.parse("{{a|b}}"), mw_tree.parse("{{a|b=}}"))


def test_containers_behave_as_mwparserfromhells():
  # The Wikicode and SmartList objects are made without their constructors: editing through
  # a slice of the node list (SmartList's child proxies) and replacing nodes work as on
  # mwparserfromhell's own tree.
  text = "a [[b|c]] {{d|e}} f"
  expected, got = mwparserfromhell.parse(text), mw_tree.parse(text)
  for code in (expected, got):
    tail = code.nodes[1:]
    tail.append(mwparserfromhell.nodes.Text("!"))
    code.replace(code.filter_templates()[0], "T")
    del tail  # the proxy leaves its parent's children when collected
  assert str(got) == str(expected) == "a [[b|c]] T f!"
  assert mw_tree._same_tree(expected, got)
  assert mw_tree.parse(text).nodes._children == {}


def test_a_different_container_is_noticed():
  a, b = mw_tree.parse("[[a|b]]"), mw_tree.parse("[[a|b]]")
  b.extra = 1
  assert not mw_tree._same_tree(a, b)
  c = mw_tree.parse("[[a|b]]")
  _ = c.nodes[0:]  # a live child proxy registered in c's SmartList
  assert not mw_tree._same_tree(a, c)


def test_unclosed_openers_are_counted_by_kind():
  text = ("{{a| [[b| [http://c <!-- {| <span> <span>x</span> <br> <td> <ref name=r/> "
          "<DIV> {{d}} [[e]]")
  assert mw_tree.unclosed_openers(text) == {
      "{{": 1, "[": 3, "<!--": 1, "{|": 1, "<span>": 1, "<div>": 1}
  assert mw_tree.unclosed_openers("{{a}} [[b]] <ref>c</ref> <!-- d -->") == {}


def test_many_unclosed_openers_are_refused_before_the_quadratic_tokenizer():
  # 30,000 unclosed '{{a|': 180 KB the tokenizer would take minutes on (4,000 take ~5 s).
  with pytest.raises(mw_tree.UnclosedMarkupError,
                     match=r"30000 unclosed openers \(30000 '\{\{'\) in 180000 characters"):
    mw_tree.check_unclosed("x {{a|" * 30000)
  with pytest.raises(mw_tree.UnclosedMarkupError, match=r"20000 '<span>'"):
    mw_tree.check_unclosed("x <span>" * 20000)
  # The same number of openers, closed, is fine; so is a long page with a few unclosed ones.
  mw_tree.check_unclosed("x {{a|b}}" * 30000)
  mw_tree.check_unclosed("Prose [[a|b]] and more. " * 20000 + "x [http://y" * 100)
  # The limit is on the product of openers and length.
  mw_tree.check_unclosed("x {{a|" * 30000, max_work=6_000_000_000)
  mw_tree.check_unclosed("x {{a|" * 9000)  # 54 KB x 9,000 = 4.9e8: parsed (~25 s)


def test_real_pages_stay_far_below_the_limit():
  # The page with the most unclosed openers of the real dumps here (hywiki's 'Yerevan': 112
  # in 177 KB, parsed in 1 s) reaches 4% of MAX_UNCLOSED_WORK.
  from beam_pipelines.dumps import xml_dump  # pylint: disable=g-import-not-at-top
  path = testutil.shared_data("otherwiki", "hywiki-truncated-100k.xml.bz2")
  if not glob.glob(path):
    pytest.skip("no ../shared/data/otherwiki")
  most = max(len(p.text) * sum(mw_tree.unclosed_openers(p.text).values())
             for p in xml_dump.iter_pages(path, on_error=lambda e: None))
  assert 1e7 < most < mw_tree.MAX_UNCLOSED_WORK / 20
