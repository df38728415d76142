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


def _tokens(*kinds_and_text):
  t = mwparserfromhell.parser.tokens
  return [getattr(t, k)() if "=" not in k else getattr(t, k.split("=")[0])(
      text=k.split("=", 1)[1]) for k in kinds_and_text]


@pytest.mark.parametrize("stream", [
    # Token orders the tokenizer does not make but a builder accepts: a second separator
    # replaces the first part, a second '=' the key.
    ("WikilinkOpen", "Text=a", "WikilinkSeparator", "Text=b", "WikilinkSeparator", "Text=c",
     "WikilinkClose"),
    ("ArgumentOpen", "Text=a", "ArgumentSeparator", "Text=b", "ArgumentSeparator",
     "ArgumentClose"),
    ("TemplateOpen", "Text=t", "TemplateParamSeparator", "Text=k", "TemplateParamEquals",
     "Text=v", "TemplateParamEquals", "Text=w", "TemplateParamSeparator",
     "TemplateParamSeparator", "Text=p", "TemplateClose", "Text=after"),
    ("TemplateOpen", "TemplateClose"),
    ("ExternalLinkOpen", "Text=http://a.b", "ExternalLinkSeparator", "Text=x",
     "ExternalLinkSeparator", "Text=y", "ExternalLinkClose"),
])
def test_same_tree_as_mwparserfromhells_builder_on_any_token_order(stream):
  expected = mwparserfromhell.parser.builder.Builder().build(_tokens(*stream))
  got = mw_tree.FastBuilder().build(_tokens(*stream))
  assert mw_tree._same_tree(expected, got)


@pytest.mark.parametrize("stream", [
    ("WikilinkOpen", "Text=a"),  # no close
    ("TemplateOpen", "Text=t", "TemplateParamSeparator", "Text=v"),
    ("TemplateOpen", "Text=t", "TemplateParamEquals", "TemplateClose"),  # '=' in the name
    ("ExternalLinkOpen", "Text=http://a.b", "ExternalLinkSeparator"),
    ("HeadingStart", "Text=h"),
])
def test_broken_token_lists_raise_the_parser_error_mwparserfromhells_builder_raises(stream):
  with pytest.raises(mwparserfromhell.parser.ParserError) as expected:
    mwparserfromhell.parser.builder.Builder().build(_tokens(*stream))
  with pytest.raises(mwparserfromhell.parser.ParserError) as got:
    mw_tree.FastBuilder().build(_tokens(*stream))
  assert type(got.value) is type(expected.value)


_REFS = frozenset(["ref", "references"])


def test_an_opaque_tags_contents_are_one_text_node_of_their_wikitext():
  inner = ("{{cite web|url=http://a.org/x|title=T [[L|l]]|a=b=c}} [http://e.org e]"
           "[http://f.org] http://free.org &amp;&#91;&#x5B; <!-- c [[x]] --> {{{1|d}}} [[M]]s")
  text = f"Before <ref name=n>{inner}</ref> after <Ref>[[A]]</Ref><ref></ref><ref/>"
  got = mw_tree.parse(text, skip_style_tags=True, opaque_tags=_REFS)
  assert str(got) == text
  tags = got.filter_tags(recursive=False)
  assert [str(t.contents) for t in tags] == [inner, "[[A]]", "", ""]
  assert [[type(n) for n in t.contents.nodes] for t in tags] == [
      [mwparserfromhell.nodes.Text], [mwparserfromhell.nodes.Text], [], []]
  assert str(tags[0].attributes[0]) == " name=n"  # attributes are built as always
  # Other tags are built as always.
  assert [type(n) for n in mw_tree.parse("<span>[[A]]</span>", opaque_tags=_REFS).nodes[
      0].contents.nodes] == [mwparserfromhell.nodes.Wikilink]


@pytest.mark.parametrize("inner", [
    "a <span>[[b]]</span> c",  # a tag inside
    "a\n== h ==\nb",  # a heading inside
    "{{a|b",  # an unclosed template (text, then the tokens go on)
])
def test_an_opaque_tag_holding_what_is_not_plain_is_built_as_usual(inner):
  text = f"<ref>{inner}</ref> [[after]]"
  expected = mwparserfromhell.parse(text, skip_style_tags=True)
  got = mw_tree.parse(text, skip_style_tags=True, opaque_tags=_REFS)
  assert str(got) == text
  if "span" in inner or "==" in inner:
    assert mw_tree._same_tree(expected, got)


def test_opaque_tags_change_no_wikitext_of_real_pages():
  paths = sorted(glob.glob(testutil.shared_data("wikitext_en", "*.txt")))
  if not paths:
    pytest.skip("no ../shared/data/wikitext_en")
  opaque = 0
  for path in paths:
    with open(path, encoding="utf-8") as f:
      text = f.read()
    got = mw_tree.parse(text, skip_style_tags=True, opaque_tags=_REFS)
    expected = mwparserfromhell.parse(text, skip_style_tags=True)
    assert str(got) == text, path
    got_refs = [t for t in got.filter_tags(recursive=True) if str(t.tag).lower() == "ref"]
    expected_refs = [t for t in expected.filter_tags(recursive=True)
                     if str(t.tag).lower() == "ref"]
    assert [str(t) for t in got_refs] == [str(t) for t in expected_refs], path
    opaque += sum(len(t.contents.nodes) == 1 and any(
        type(n) is not mwparserfromhell.nodes.Text for n in e.contents.nodes)
                  for t, e in zip(got_refs, expected_refs))
  assert opaque > 100  # refs holding templates or links came as one Text node


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
