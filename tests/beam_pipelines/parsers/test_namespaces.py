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
