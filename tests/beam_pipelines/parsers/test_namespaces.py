"""Tests of beam_pipelines.parsers.namespaces: title classification and redirect targets."""

import pytest

from beam_pipelines.dumps import xml_dump
from beam_pipelines.parsers import namespaces


class TestRedirects:

  @pytest.mark.parametrize("text", [
      "#REDIRECT [[Ore River]]",
      "#redirect[[ore River#Course]]",
      "#Redirect [[Ore River]]",
      "#REDIRECT: [[Ore River]] {{R from CamelCase}}",
      "  #REDIRECT:[[Ore_River|x]]\n\n[[Category:Redirects]]",
      "#WEITERLEITUNG [[Ore River]]",
  ])
  def test_redirect_spellings(self, text):
    # Bug kind wp-14.
    page = xml_dump.Page(page_id=1, title="Ore Stream", ns=0, text=text)
    assert namespaces.redirect_target(page) == "Ore River"

  def test_redirect_element_wins(self):
    page = xml_dump.Page(page_id=1, title="Ore R.", ns=0, text="#REDIRECT [[Elsewhere]]",
                         redirect_title="ore River")
    assert namespaces.redirect_target(page) == "Ore River"

  def test_not_a_redirect(self):
    for text in ["The #REDIRECT magic word [[Foo]].", "'''Ore River''' is long.", ""]:
      assert namespaces.redirect_target(xml_dump.Page(1, "X", 0, text)) is None


def test_main_namespace_title_may_hold_a_colon():
  assert namespaces.is_main_namespace_title("Harbor Lights: The Return")


def test_main_namespace_title_without_a_colon_is_any_title_not_blank():
  """is_main_namespace_title tells a title without ':' (most) without classify_title: the
  main namespace unless it is empty or only whitespace (classify_title's EMPTY)."""
  for title in ["Zug", " Zug ", "", " ", "\u00a0", "\t\n", "x\u2003y", "Category", "(c)"]:
    expected = namespaces.classify_title(title)[0] == namespaces.MAIN
    assert namespaces.is_main_namespace_title(title) == expected, repr(title)
  assert namespaces.is_main_namespace_title("Zug")
  assert not namespaces.is_main_namespace_title("\u00a0")
  assert not namespaces.is_main_namespace_title("Category:Bridges")
