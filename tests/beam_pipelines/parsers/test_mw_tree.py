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
