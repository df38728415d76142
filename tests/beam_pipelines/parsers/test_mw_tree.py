"""Tests of beam_pipelines.parsers.mw_tree: the tree mwparserfromhell.parse builds, faster."""

import glob

import mwparserfromhell
import pytest

from beam_pipelines.parsers import mw_tree
from tests import testutil


def test_light_builder_is_used_with_this_mwparserfromhell():
  # The self-check at import passed: LightBuilder's trees hold what mwparserfromhell's hold.
  assert mw_tree.LIGHT


@pytest.mark.parametrize("skip_style_tags", [True, False])
def test_same_tree_as_mwparserfromhell_on_every_kind_of_node(skip_style_tags):
  text = mw_tree._SAMPLE + "<ref>x</ref name=y> {{a|{{{b|c}}}=d}} [[a|b|c]] <p/> ===x=="
  expected = mwparserfromhell.parse(text, skip_style_tags=skip_style_tags)
  got = mw_tree.parse_nodes(text, skip_style_tags=skip_style_tags)
  assert mw_tree.same_as_mwparserfromhell(got, expected)
  assert mw_tree.source(got) == text
  # Every node prints as mwparserfromhell's does, at every depth.
  def pairs(light, code):
    for a, b in zip(light, code.nodes):
      yield a, b
      if isinstance(b, mwparserfromhell.nodes.Wikilink):
        yield from pairs(a.title, b.title)
        if b.text is not None:
          yield from pairs(a.text, b.text)
      elif isinstance(b, mwparserfromhell.nodes.Template):
        for pa, pb in zip(a.params, b.params):
          assert str(pa) == str(pb)
          yield from pairs(pa.value, pb.value)
      elif isinstance(b, mwparserfromhell.nodes.Tag):
        for aa, ab in zip(a.attributes, b.attributes):
          assert str(aa) == str(ab)
        yield from pairs(a.contents, b.contents)
  checked = 0
  for a, b in pairs(got, expected):
    assert str(a) == str(b)
    checked += 1
  assert checked > 60
  kinds = {type(n).__name__ for n in got}
  assert {"str", "Wikilink", "Template", "Argument", "ExternalLink", "Heading", "Tag",
          "HTMLEntity", "Comment"} <= kinds


def test_same_tree_as_mwparserfromhell_on_real_wikitext():
  paths = sorted(glob.glob(testutil.shared_data("wikitext_en", "*.txt")))[:5]
  if not paths:
    pytest.skip("no ../shared/data/wikitext_en")
  for path in paths:
    with open(path, encoding="utf-8") as f:
      text = f.read()
    got = mw_tree.parse_nodes(text, skip_style_tags=True)
    assert mw_tree.same_as_mwparserfromhell(
        got, mwparserfromhell.parse(text, skip_style_tags=True)), path
    assert mw_tree.source(got) == text


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
    ("CommentStart", "Text=a", "Text=b", "CommentEnd"),
])
def test_same_tree_as_mwparserfromhells_builder_on_any_token_order(stream):
  expected = mwparserfromhell.parser.builder.Builder().build(_tokens(*stream))
  got = mw_tree.LightBuilder().build(_tokens(*stream))
  assert mw_tree.same_as_mwparserfromhell(got, expected)
  assert mw_tree.source(got) == str(expected)


@pytest.mark.parametrize("stream", [
    ("WikilinkOpen", "Text=a"),  # no close
    ("TemplateOpen", "Text=t", "TemplateParamSeparator", "Text=v"),
    ("TemplateOpen", "Text=t", "TemplateParamEquals", "TemplateClose"),  # '=' in the name
    ("ExternalLinkOpen", "Text=http://a.b", "ExternalLinkSeparator"),
    ("HeadingStart", "Text=h"),
    ("CommentStart", "Text=c"),
])
def test_broken_token_lists_raise_the_parser_error_mwparserfromhells_builder_raises(stream):
  with pytest.raises(mwparserfromhell.parser.ParserError) as expected:
    mwparserfromhell.parser.builder.Builder().build(_tokens(*stream))
  with pytest.raises(mwparserfromhell.parser.ParserError) as got:
    mw_tree.LightBuilder().build(_tokens(*stream))
  assert type(got.value) is type(expected.value)


def test_odd_values_go_through_mwparserfromhells_checks():
  # An unquoted attribute value, a heading level and a padding the constructors refuse raise
  # their ValueError; those they accept give the same tree.
  t = mwparserfromhell.parser.tokens
  def build(builder, stream):
    return builder.build(list(stream))
  for stream in (
      [t.HeadingStart(level=7), t.Text(text="h"), t.HeadingEnd()],
      [t.TagOpenOpen(), t.Text(text="b"), t.TagCloseSelfclose(padding="x")],
      [t.TagOpenOpen(), t.Text(text="b"), t.TagAttrStart(pad_first="x", pad_before_eq="",
                                                          pad_after_eq=""),
       t.Text(text="a"), t.TagCloseSelfclose(padding="")],
      [t.TagOpenOpen(), t.Text(text="b"), t.TagAttrStart(pad_first=" ", pad_before_eq="",
                                                          pad_after_eq=""),
       t.Text(text="a"), t.TagAttrEquals(), t.Text(text="x y"),  # unquoted, a space
       t.TagCloseSelfclose(padding="")]):
    with pytest.raises(ValueError):
      build(mwparserfromhell.parser.builder.Builder(), stream)
    with pytest.raises(ValueError):
      build(mw_tree.LightBuilder(), stream)
  stream = [t.TagOpenOpen(), t.Text(text="b"), t.TagAttrStart(pad_first=" ", pad_before_eq="",
                                                              pad_after_eq=""),
            t.Text(text="a"), t.TagAttrEquals(), t.Text(text="x"),
            t.TagCloseSelfclose(padding="")]
  expected = build(mwparserfromhell.parser.builder.Builder(), stream)
  got = build(mw_tree.LightBuilder(), stream)
  assert mw_tree.same_as_mwparserfromhell(got, expected)
  assert mw_tree.source(got) == str(expected) == "<b a=x/>"


_REFS = frozenset(["ref", "references"])


def _tags(nodes):
  return [n for n in nodes if type(n) is mw_tree.Tag]


def test_an_opaque_tags_contents_are_one_text_node_of_their_wikitext():
  inner = ("{{cite web|url=http://a.org/x|title=T [[L|l]]|a=b=c}} [http://e.org e]"
           "[http://f.org] http://free.org &amp;&#91;&#x5B; <!-- c [[x]] --> {{{1|d}}} [[M]]s")
  text = f"Before <ref name=n>{inner}</ref> after <Ref>[[A]]</Ref><ref></ref><ref/>"
  got = mw_tree.parse_nodes(text, skip_style_tags=True, opaque_tags=_REFS)
  assert mw_tree.source(got) == text
  tags = _tags(got)
  assert [mw_tree.source(t.contents) for t in tags] == [inner, "[[A]]", "", ""]
  assert [t.contents for t in tags] == [[inner], ["[[A]]"], [], []]
  assert str(tags[0].attributes[0]) == " name=n"  # attributes are built as always
  # Other tags are built as always.
  assert [type(n) for n in mw_tree.parse_nodes("<span>[[A]]</span>", opaque_tags=_REFS)[
      0].contents] == [mw_tree.Wikilink]


@pytest.mark.parametrize("inner", [
    "a <span>[[b]]</span> c",  # a tag inside
    "a\n== h ==\nb",  # a heading inside
    "{{a|b",  # an unclosed template (text, then the tokens go on)
])
def test_an_opaque_tag_holding_what_is_not_plain_is_built_as_usual(inner):
  text = f"<ref>{inner}</ref> [[after]]"
  expected = mwparserfromhell.parse(text, skip_style_tags=True)
  got = mw_tree.parse_nodes(text, skip_style_tags=True, opaque_tags=_REFS)
  assert mw_tree.source(got) == text
  if "span" in inner or "==" in inner:
    assert mw_tree.same_as_mwparserfromhell(got, expected)


def test_opaque_tags_change_no_wikitext_of_real_pages():
  paths = sorted(glob.glob(testutil.shared_data("wikitext_en", "*.txt")))
  if not paths:
    pytest.skip("no ../shared/data/wikitext_en")
  opaque = 0

  def refs(nodes):
    for node in nodes:
      if type(node) is mw_tree.Tag:
        if mw_tree.source(node.tag).lower() == "ref":
          yield node
        yield from refs(node.contents)
      elif type(node) is mw_tree.Template:
        for param in node.params:
          yield from refs(param.value)

  for path in paths:
    with open(path, encoding="utf-8") as f:
      text = f.read()
    got = mw_tree.parse_nodes(text, skip_style_tags=True, opaque_tags=_REFS)
    expected = mw_tree.parse_nodes(text, skip_style_tags=True)
    assert mw_tree.source(got) == text, path
    got_refs, expected_refs = list(refs(got)), list(refs(expected))
    assert [str(t) for t in got_refs] == [str(t) for t in expected_refs], path
    opaque += sum(len(t.contents) == 1 and any(type(n) is not str for n in e.contents)
                  for t, e in zip(got_refs, expected_refs))
  assert opaque > 100  # refs holding templates or links came as one run of text


def test_a_different_tree_is_noticed():
  assert not mw_tree.same_as_mwparserfromhell(mw_tree.parse_nodes("[[a|b]]"),
                                              mwparserfromhell.parse("[[a|c]]"))
  assert not mw_tree.same_as_mwparserfromhell(mw_tree.parse_nodes("{{a|b}}"),
                                              mwparserfromhell.parse("{{a|b=}}"))
  assert not mw_tree.same_as_mwparserfromhell(mw_tree.parse_nodes("<b>x</b>"),
                                              mwparserfromhell.parse("<b >x</b>"))
  assert not mw_tree.same_as_mwparserfromhell(mw_tree.parse_nodes("&amp;"),
                                              mwparserfromhell.parse("&lt;"))
  assert mw_tree.same_as_mwparserfromhell(mw_tree.parse_nodes("[[a|b]]"),
                                          mwparserfromhell.parse("[[a|b]]"))


def test_a_nul_ends_the_text_in_both_trees():
  # mwparserfromhell's C tokenizer reads a NUL as the end of the text (parse_nodes' docstring):
  # the light tree holds what mwparserfromhell.parse's holds, the text before it.
  for text, before in (("a\x00b [[x]]", "a"), ("[[x|y\x00z]] w", "[[x|y"), ("\x00[[x]]", "")):
    light, tree = mw_tree.parse_nodes(text), mwparserfromhell.parse(text)
    assert mw_tree.source(light) == str(tree) == before
    assert mw_tree.same_as_mwparserfromhell(light, tree)


def test_without_the_light_builder_mwparserfromhells_own_tree_is_converted(monkeypatch):
  # Another mwparserfromhell whose builder fails the self-check: parse_nodes converts
  # mwparserfromhell.parse's tree, the same nodes.
  text = mw_tree._SAMPLE
  light = mw_tree.parse_nodes(text, skip_style_tags=True)
  monkeypatch.setattr(mw_tree, "LIGHT", False)
  converted = mw_tree.parse_nodes(text, skip_style_tags=True)
  assert mw_tree._same(light, converted)
  assert mw_tree.source(converted) == text


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
