"""Tests of beam_pipelines.parsers.wikitext: article text, links, categories, first paragraph."""

import collections
import glob
import os
import re

import mwparserfromhell
from mwparserfromhell import nodes as mw_nodes
import pytest

from beam_pipelines.parsers import namespaces
from beam_pipelines.parsers import wikitext
from dense_entity.kb import mention_features
from dense_entity.kb import schema
from dense_entity.kb import titles
from tests import testutil

WIKITEXT_DIR = os.path.join(testutil.REPO_ROOT, "..", "shared", "data", "wikitext_en")


def check_offsets(article):
  for link in article.links:
    assert article.text[link.start:link.end] == link.anchor
    assert link.anchor and link.target


def mentions_of(article):
  return [(link.anchor, link.target) for link in article.links]


# --- article text and links ----------------------------------------------------------------


class TestParseArticle:

  def test_real_lead_snippet(self):
    text = ("{{Infobox river\n| name = Aa\n| mouth = [[North Sea]]\n}}\n"
            "'''Alabama''' ({{IPAc-en|ˌ|æ|l|ə|ˈ|b|æ|m|ə}}) is a [[U.S. state|state]] in the "
            "[[Southeastern United States|southeastern region]] of the [[United States]].<ref "
            "name=\"census\">{{cite web|url=http://x.org|title=Census}}</ref> It is bordered "
            "by [[Tennessee]] to the north.\n\n== History ==\nThe [[Muscogee]] lived here.\n"
            "[[Category:States of the United States]]\n[[de:Alabama]]")
    article = wikitext.parse_article(text, "Alabama")
    check_offsets(article)
    assert article.first_paragraph == (
        "Alabama is a state in the southeastern region of the United States. It is bordered "
        "by Tennessee to the north.")
    assert mentions_of(article) == [
        ("state", "U.S. state"), ("southeastern region", "Southeastern United States"),
        ("United States", "United States"), ("Tennessee", "Tennessee"),
        ("Muscogee", "Muscogee"), ("North Sea", "North Sea")]
    assert [link.source for link in article.links] == ["prose"] * 5 + ["template"]
    assert article.categories == ["States of the United States"]
    # The infobox parameter holding a link is a line of its own after the prose.
    assert article.text.split("\n")[1:] == ["History", "The Muscogee lived here.", "North Sea"]
    assert article.prose_end == len(article.text) - len("\nNorth Sea")
    assert article.dropped == {"category": 1, "interlanguage": 1}

  def test_file_caption_links_and_parameters(self):
    # Bug kind wp-04.
    text = ("[[File:Quay at night.jpg|thumb|left|250px|alt=Lit quay|A tug off [[Gull Point]] "
            "at night.]] The [[Slate River]] reaches the coast. Also: 'Foo "
            "[[Image:Chart.svg|120px]] bar' and [[media:Song.ogg|a song]].")
    article = wikitext.parse_article(text, "Coast")
    check_offsets(article)
    # The caption link is a mention too, in the caption's own line after the prose.
    assert mentions_of(article) == [("Slate River", "Slate River"), ("Gull Point", "Gull Point")]
    assert [link.source for link in article.links] == ["prose", "caption"]
    assert article.dropped == {"file": 3}
    assert article.text == ("The Slate River reaches the coast. Also: 'Foo bar' and.\n"
                            "A tug off Gull Point at night.")
    for residue in ("thumb", "left", "250px", "alt=", "Lit quay", "File:"):
      assert residue not in article.text
    sentences = [mention_features.mention_features(article.text, link.start, link.end)[
        schema.MENTION_SENTENCE] for link in article.links]
    assert sentences == ["The [MASK] reaches the coast.", "A tug off [MASK] at night."]

  def test_section_links(self):
    # Bug kind wp-05.
    text = ("Under the [[History of Vellmar#Early kings|early kings]] the [[#Rivers|rivers]] "
            "moved; see [[Vellmar Fleet#Ships]].")
    article = wikitext.parse_article(text, "Vellmar")
    check_offsets(article)
    assert mentions_of(article) == [("early kings", "History of Vellmar"),
                                    ("rivers", "Vellmar"),
                                    ("Vellmar Fleet#Ships", "Vellmar Fleet")]
    assert "[[" not in article.text

  def test_title_normalization(self):
    # Bug kind wp-06.
    text = ("[[the_Copper Wrens|their group]] / [[  Copper   Wrens ]] / [[COPPER WRENS]] / "
            "[[Falcon%27s_Crag]] / [[\u00e9tang Road]]")
    article = wikitext.parse_article(text, "Bands")
    check_offsets(article)
    assert [l.target for l in article.links] == [
        "The Copper Wrens", "Copper Wrens", "COPPER WRENS", "Falcon's Crag", "\u00c9tang Road"]
    assert article.links[1].anchor == "Copper Wrens"

  def test_colon_prefix_classification(self):
    # Bug kind wp-07.
    text = ("See [[:es:Puente Azul|the Spanish article]], the [[wiktionary:jetty|jetty]] entry, "
            "[[Night Trains: The Return|its sequel]], and [[:Category:Piers|pier list]].\n"
            "[[CATEGORY:Piers|Night]]\n[[es:Puente Azul]]\n[[Wikipedia:Manual|guide]]")
    article = wikitext.parse_article(text, "Night Trains: The Return")
    check_offsets(article)
    assert mentions_of(article) == [("its sequel", "Night Trains: The Return")]
    assert article.categories == ["Piers"]
    for visible in ("the Spanish article", "jetty", "pier list", "guide"):
      assert visible in article.text
    for hidden in ("es:", "Puente", "Category", "CATEGORY", "Wikipedia:"):
      assert hidden not in article.text
    assert article.dropped["interwiki"] == 2
    assert article.dropped["other_namespace"] == 2
    assert article.dropped["interlanguage"] == 1
    assert namespaces.classify_title("Night Trains: The Return")[0] == namespaces.MAIN

  def test_html_entities_decoded_once(self):
    # Bug kind wp-10: the XML layer already turned '&amp;amp;' into '&amp;'.
    text = "Brown &amp; Co. sail from [[Lake Fen|Lake&nbsp;Fen]] at 5&000nbsp;km and Q&amp;A."
    article = wikitext.parse_article(text, "Brown")
    check_offsets(article)
    assert mentions_of(article) == [("Lake Fen", "Lake Fen")]
    assert article.text == "Brown & Co. sail from Lake Fen at 5&000nbsp;km and Q&A."
    link = article.links[0]
    features = mention_features.mention_features(article.text, link.start, link.end)
    assert features[schema.MENTION_SENTENCE] == (
        "Brown & Co. sail from [MASK] at 5&000nbsp;km and Q&A.")

  def test_ref_bodies_stay_out_of_prose(self):
    # Bug kind wp-11: ref bodies never pollute the prose, and links inside <ref> (citations)
    # are not training mentions; they are counted as 'in_ref'.
    text = ("Old mills rarely survive,<ref>{{cite book|title=Mills|publisher=[[Stone Press]]}}"
            "</ref> though [[Mill Town|a few]] do.<ref name=\"m2\"/> Later, [[Weir Lane]] "
            "was paved.<ref name=x>plain [[Note Page]] body</ref>")
    article = wikitext.parse_article(text, "Mills")
    check_offsets(article)
    assert mentions_of(article) == [("a few", "Mill Town"), ("Weir Lane", "Weir Lane")]
    assert [link.source for link in article.links] == ["prose", "prose"]
    assert article.text == ("Old mills rarely survive, though a few do. Later, Weir Lane was "
                            "paved.")
    assert article.prose_end == len(article.text)
    assert article.first_paragraph == article.text
    assert article.dropped == {"in_ref": 2}
    features = [mention_features.mention_features(article.text, link.start, link.end)
                for link in article.links]
    assert features[0][schema.MENTION_SENTENCE] == "Old mills rarely survive, though [MASK] do."
    assert features[1][schema.MENTION_RIGHT] == "was paved."

  def test_empty_and_degenerate_links(self):
    # Bug kind wp-13.
    text = "A [[]] and [[|lonely]] and [[ ]] and [[Oak Ridge (Texas)|]] and [[Oak Ridge]]."
    article = wikitext.parse_article(text, "Ridges")
    check_offsets(article)
    assert mentions_of(article) == [("Oak Ridge", "Oak Ridge (Texas)"),
                                    ("Oak Ridge", "Oak Ridge")]
    assert article.dropped["empty"] == 3
    assert "[[" not in article.text

  def test_pipe_trick_and_link_trail(self):
    text = "[[Paris, Texas|]] has [[bus]]es, [[Help:Tables|]] and [[tram]]'s."
    article = wikitext.parse_article(text, "X")
    check_offsets(article)
    assert mentions_of(article) == [("Paris", "Paris, Texas"), ("buses", "Bus"),
                                    ("tram", "Tram")]
    assert article.text == "Paris has buses, Tables and tram's."

  def test_markup_tags_tables_lists(self):
    text = ("Intro <b>bold [[Ash]]</b> and ''italic'' '''strong'''<br>next <span>kept</span>"
            "<!-- hidden --> <math>x^2</math> __NOTOC__ [http://x.org label] [http://y.org]\n"
            "{| class=\"wikitable\"\n| [[Table Link]] || cell\n|}\n"
            "* item [[Birch]]\n# numbered\n<gallery>\nA.jpg|[[Gallery Link]]\n</gallery>\n"
            "Tail {{cite|x={{nested|[[Deep]]}}}} end.")
    article = wikitext.parse_article(text, "X")
    check_offsets(article)
    # Prose first; then the pieces holding a link: a table cell, a gallery caption and the
    # parameter of the nested template (the cell 'cell' holds no link and is left out).
    assert article.text.split("\n") == [
        "Intro bold Ash and italic strong next kept label", "item Birch", "numbered",
        "Tail end.", "Table Link", "Gallery Link", "Deep"]
    assert mentions_of(article) == [("Ash", "Ash"), ("Birch", "Birch"),
                                    ("Table Link", "Table Link"),
                                    ("Gallery Link", "Gallery Link"), ("Deep", "Deep")]
    assert [link.source for link in article.links] == ["prose", "prose", "table", "gallery",
                                                       "template"]
    assert article.dropped == {}

  def test_whitespace_cleanup_keeps_offsets(self):
    text = "  Lead\t\tline   with [[A  b|the   anchor]]  \n\n\n  next\u00a0 [[C]]  line  \n"
    article = wikitext.parse_article(text, "X")
    check_offsets(article)
    assert article.text == "Lead line with the anchor\nnext C line"

  def test_first_paragraph_skips_residue_and_lists(self):
    text = ("{{Hatnote|x}}\n:''For the town, see [[Reed (town)]].''\n[[File:X.jpg|thumb|cap]]\n"
            "{{Infobox|a=b}}\n. ,\n'''Reed''' ({{lang-fr|Roseau}}; {{IPA|r}}) is a [[grass]]."
            "\n== Uses ==\nMore text.")
    article = wikitext.parse_article(text, "Reed")
    assert article.first_paragraph == "Reed is a grass."


class TestNonProsePieces:
  """Links in tables, templates, captions, galleries and refs: mentions on lines of their own."""

  def test_table_cells(self):
    text = ("Lead [[Alpha]] text.\n"
            '{| class="wikitable" style="width:50%"\n'
            "|+ Rivers of [[Norland]]\n"
            "! Name !! [[River mouth|Mouth]]\n"
            "|-\n"
            '| style="x" | [[Foo]]\n'
            "| [[Bar]]s and [[Baz|baz]] || 12 km\n"
            "|-\n"
            "| {{flag|[[Gull Sea]]}} || plain\n"
            "|}\n"
            "After [[Omega]].")
    article = wikitext.parse_article(text, "Rivers")
    check_offsets(article)
    # One line per cell holding a link; 'Name', '12 km', 'plain' hold none and are left out;
    # the template inside a cell is a piece of its own, queued after the cells.
    assert article.text == ("Lead Alpha text.\nAfter Omega.\nRivers of Norland\nMouth\nFoo\n"
                            "Bars and baz\nGull Sea")
    assert article.prose_end == len("Lead Alpha text.\nAfter Omega.")
    assert article.first_paragraph == "Lead Alpha text."
    assert mentions_of(article) == [
        ("Alpha", "Alpha"), ("Omega", "Omega"), ("Norland", "Norland"),
        ("Mouth", "River mouth"), ("Foo", "Foo"), ("Bars", "Bar"), ("baz", "Baz"),
        ("Gull Sea", "Gull Sea")]
    assert [link.source for link in article.links] == ["prose"] * 2 + ["table"] * 6
    for residue in ("class", "style", "wikitable", "width", "|", "!", "+", "{", "}", '"'):
      assert residue not in article.text
    bars = article.links[5]
    features = mention_features.mention_features(article.text, bars.start, bars.end)
    assert features == {schema.MENTION_SPAN: "Bars", schema.MENTION_LEFT: "",
                        schema.MENTION_RIGHT: "and baz", schema.MENTION_SENTENCE: "[MASK] and baz"}

  def test_infobox_and_nested_templates(self):
    text = ("{{Infobox country\n"
            "| name = Georgia\n"
            "| capital = [[Tbilisi]]\n"
            "| languages = {{unbulleted list|[[Georgian language|Georgian]]|"
            "[[Abkhaz language|Abkhaz]]}}\n"
            "| area_km2 = 69700\n"
            "| website = [http://gov.ge gov.ge]\n"
            "| leader = President {{nowrap|[[Salome Zourabichvili]]}}\n"
            "}}\n"
            "'''Georgia''' is a country in the [[Caucasus]].{{Citation needed|date=May 2020}}\n"
            "{{Navbox|list1=[[Abkhazia]] • [[Adjara]]|[[Svaneti]]}}")
    article = wikitext.parse_article(text, "Georgia (country)")
    check_offsets(article)
    # Parameter values holding links, named and positional, in queue order (the nested
    # template's parameters come after those queued before them).
    assert article.text.split("\n") == [
        "Georgia is a country in the Caucasus.", "Tbilisi", "President Salome Zourabichvili",
        "Abkhazia • Adjara", "Svaneti", "Georgian", "Abkhaz"]
    assert article.first_paragraph == "Georgia is a country in the Caucasus."
    assert mentions_of(article) == [
        ("Caucasus", "Caucasus"), ("Tbilisi", "Tbilisi"),
        ("Salome Zourabichvili", "Salome Zourabichvili"), ("Abkhazia", "Abkhazia"),
        ("Adjara", "Adjara"), ("Svaneti", "Svaneti"), ("Georgian", "Georgian language"),
        ("Abkhaz", "Abkhaz language")]
    assert [link.source for link in article.links] == ["prose"] + ["template"] * 7
    for residue in ("name", "capital", "Infobox", "69700", "=", "gov.ge", "Navbox", "list",
                    "May 2020"):
      assert residue not in article.text
    adjara = article.links[4]
    features = mention_features.mention_features(article.text, adjara.start, adjara.end)
    assert features[schema.MENTION_SENTENCE] == "Abkhazia • [MASK]"
    assert features[schema.MENTION_RIGHT] == ""

  def test_file_and_gallery_captions(self):
    text = ("[[File:X.jpg|thumb|A [[Bar]] caption]] Text about [[Foo]].\n"
            "[[Image:Y.png|A [[Qux]] map|upright=1.2|alt=[[Hidden]] alt|left]]\n"
            "<gallery>\nZ.jpg|alt=x|The [[Gal]] quay\nW.jpg\n</gallery>")
    article = wikitext.parse_article(text, "Pictures")
    check_offsets(article)
    assert article.text == "Text about Foo.\nA Bar caption\nA Qux map\nThe Gal quay"
    assert mentions_of(article) == [("Foo", "Foo"), ("Bar", "Bar"), ("Qux", "Qux"),
                                    ("Gal", "Gal")]
    assert [link.source for link in article.links] == ["prose", "caption", "caption",
                                                       "gallery"]
    assert article.dropped == {"file": 2, "in_file_option": 1}  # alt text shows no link

  def test_links_that_stay_dropped(self):
    text = ("A <math>[[x]]</math> b [[Foo|c [[Bar]] d]] e.<ref name=\"[[Q]]\">[[R]]</ref> "
            "[http://x.org see [[S]]] {{Quote|[[T]] said}}")
    article = wikitext.parse_article(text, "X")
    check_offsets(article)
    assert mentions_of(article) == [("c Bar d", "Foo"), ("T", "T")]
    assert article.text == "A b c Bar d e. see S\nT said"
    assert article.dropped == {"in_other_tag": 1, "nested_link": 2, "in_attribute": 1,
                               "in_ref": 1}

  def test_escaped_wikitext_is_unescaped_once(self):
    text = ("'''Ore''' is a [[mineral]].&lt;ref&gt;[[Rock Book]], &quot;p. 3&quot;&lt;/ref&gt; "
            "It &amp;amp; [[Clay]] differ.")
    article = wikitext.parse_article(text, "Ore")
    check_offsets(article)
    assert article.text == "Ore is a mineral. It & Clay differ."
    assert [link.source for link in article.links] == ["prose", "prose"]
    assert article.dropped == {"in_ref": 1}


_HIDDEN_TAGS = {"math", "chem", "ce", "timeline", "imagemap", "includeonly", "mapframe",
                "maplink", "score", "graph", "syntaxhighlight", "source", "templatedata",
                "hiero", "inputbox", "categorytree", "charinsert", "style", "script", "noscript",
                "indicator", "section", "templatestyles"}


def _invisible_links(code):
  """ids of the wikilinks that MediaWiki shows as no link of their own, and of those inside
  <ref> (shown as links in the references list, but citations are not training mentions)."""
  hidden = set()

  def hide(wikicode):
    hidden.update(id(link) for link in wikicode.filter_wikilinks(recursive=True))

  for node in code.filter(recursive=True):
    if isinstance(node, mw_nodes.Wikilink) and node.text is not None:
      kind, _, leading_colon = namespaces.classify_title(str(node.title))
      if kind != namespaces.FILE or leading_colon:  # a link inside a link's text
        hide(node.text)
    elif isinstance(node, mw_nodes.ExternalLink) and node.title is not None:
      hide(node.title)
    elif isinstance(node, mw_nodes.Template):  # template and parameter names
      hide(node.name)
      for param in node.params:
        if param.showkey:
          hide(param.name)
    elif isinstance(node, mw_nodes.Tag):
      for attribute in node.attributes:
        hide(attribute.name)
        if attribute.value is not None:
          hide(attribute.value)
      if str(node.tag).strip().lower() in _HIDDEN_TAGS and node.contents is not None:
        hide(node.contents)
      if str(node.tag).strip().lower() in ("ref", "references") and node.contents is not None:
        hide(node.contents)  # citations are not training mentions (bug bank wp-11)
  return hidden


def expected_mention_targets(text, page_title):
  """Targets of the links of `text` shown as main-namespace links, by mwparserfromhell alone."""
  code = mwparserfromhell.parse(text, skip_style_tags=True)
  links = code.filter_wikilinks(recursive=True)
  for tag in code.filter_tags(recursive=True):  # <gallery> is not parsed by mwparserfromhell
    if str(tag.tag).strip().lower() == "gallery" and tag.contents is not None:
      for line in str(tag.contents).split("\n"):
        links += mwparserfromhell.parse(line).filter_wikilinks(recursive=True)
  hidden = _invisible_links(code)
  targets = []
  for link in links:
    if id(link) in hidden:
      continue
    kind, rest, _ = namespaces.classify_title(str(link.title))
    if kind != namespaces.MAIN:  # Category, File, interlanguage, interwiki, other namespaces
      continue
    target = page_title if rest.startswith("#") else namespaces.normalize_target(rest)
    if not target:  # '[[]]', '[[|x]]', illegal characters
      continue
    if link.text is not None and str(link.text) and not str(link.text).strip():
      continue  # '[[Foo| ]]' shows no text
    targets.append(target)
  return targets


def test_wikitext_corpus_has_no_residue():
  """Every real article of ../shared/data/wikitext_en: clean text, every link a mention."""
  paths = sorted(glob.glob(os.path.join(WIKITEXT_DIR, "*.txt")))
  if not paths:
    pytest.skip(f"no wikitext corpus at {WIKITEXT_DIR}")
  residue = re.compile(r"\{\{|\}\}|\[\[|\]\]|<ref|\|\s*\||\{\||\|\}|&amp;|thumb\|")
  html_tag = re.compile(r"</?(?:small|big|span|div|center|ref|references|br|sup|sub|gallery|"
                        r"table|tr|td|th)\b", re.IGNORECASE)
  # Prose lines whose residue is in the source itself (shown as MediaWiki would show it):
  # a file whose newlines were lost (its tables are text), a '|-' between succession-box
  # templates, a citation missing its '<ref>{{'.
  known_prose_residue = {"raith_rovers": 1, "Harry-McPherson": 1, "United-Kingdom": 1}
  total_links = non_prose = 0
  for path in paths:
    name = os.path.basename(path)[:-4]
    with open(path, encoding="utf-8") as f:
      text = f.read()
    article = wikitext.parse_article(text, name)
    check_offsets(article)
    total_links += len(article.links)
    assert not residue.search(article.first_paragraph), (path, article.first_paragraph)
    assert "|" not in article.first_paragraph, (path, article.first_paragraph)
    for link in article.links:
      assert "[[" not in link.anchor and "]]" not in link.anchor, (path, link)
      assert not any(c in link.target for c in "[]{}|<>"), (path, link)
      assert (link.source == "prose") == (link.end <= article.prose_end), (path, link)
    # (a) every link shown as a main-namespace link is exactly one mention, same targets.
    if "<" not in text and "&lt;ref" in text:  # saved still XML-escaped (see parse_article)
      text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace(
          "&amp;", "&")
    expected = collections.Counter(
        expected_mention_targets(text, titles.normalize_title(name)))
    got = collections.Counter(link.target for link in article.links)
    assert got == expected, (path, got - expected, expected - got)
    # (b) no markup residue in any line; in the pieces after the prose none at all.
    prose_residue = sum(1 for line in article.text[:article.prose_end].split("\n")
                        if residue.search(line) or "|" in line)
    assert prose_residue == known_prose_residue.get(name, 0), (path, prose_residue)
    for line in article.text[article.prose_end:].split("\n"):
      assert not residue.search(line) and "|" not in line, (path, line)
      assert not html_tag.search(line), (path, line)
    non_prose += sum(1 for link in article.links if link.source != "prose")
  assert total_links > 7000 and non_prose > 1000, (total_links, non_prose)



class TestMagicWordsAndComputedTemplates:
  """Text that MediaWiki computes from markup stays in the sentence (issue 14, item 3)."""

  @pytest.mark.parametrize("markup, shown", [
      ("{{formatnum:1200}}", "1,200"),
      ("{{formatnum: -1234567.25}}", "-1,234,567.25"),
      ("{{formatnum:1,200|R}}", "1200"),
      ("{{formatnum:1200|NOSEP}}", "1200"),
      ("{{formatnum:many}}", "many"),
      ("{{uc:ore}} {{lc:ORE}} {{ucfirst:ore}} {{lcfirst:Ore}}", "ORE ore Ore ore"),
      ("{{PAGENAME}}", "Ore Valley"),
      ("{{birth date|1950|1|2}}", "January 2, 1950"),
      ("{{Birth date|1950|1|2|df=y}}", "2 January 1950"),
      ("{{death date and age|2010|3|4|1950|1|2}}", "March 4, 2010"),
      ("{{start date|1998|7}}", "July 1998"),
      ("{{circa|1900}}", "c. 1900"),
      ("{{frac|3|1|2}}", "3 1/2"),
      ("{{as of|2010|3}}", "As of March 2010"),
      ("{{nowrap|400 km}}", "400 km"),
      ("{{convert|1200|m|ft}}", "1200 m"),
      ("{{lang|fr|vallée}}", "vallée"),
  ])
  def test_shown_text_stays(self, markup, shown):
    article = wikitext.parse_article(f"'''Ore Valley''' has {markup} here.", "Ore Valley")
    assert article.text == f"Ore Valley has {shown} here."
    assert article.first_paragraph == article.text

  @pytest.mark.parametrize("markup", [
      "{{#if:x|y|z}}", "{{#invoke:Ore|main}}", "{{formatnum:{{#expr:2+2}}}}",
      "{{birth date|1950|13|2}}", "{{frac}}", "{{DEFAULTSORT:Valley, Ore}}",
  ])
  def test_uncomputable_ones_render_nothing(self, markup):
    assert wikitext.parse_article(f"Ore {markup} here.", "Ore").text == "Ore here."

  def test_as_of_alt_text_keeps_its_link_as_a_mention(self):
    article = wikitext.parse_article(
        "{{As of|2011|alt=In [[Norland Census 2011|2011]]}}, the valley had 300 people.",
        "Ore Valley")
    assert article.text == "In 2011, the valley had 300 people."
    assert [(l.anchor, l.target) for l in article.links] == [("2011", "Norland Census 2011")]
    check_offsets(article)

  def test_switches_and_templates_are_recorded(self):
    article = wikitext.parse_article(
        "__NOTOC__ A [[b]] {{Disambiguation|geo}} {{formatnum:1}} __DISAMBIG__", "A")
    assert article.switches == ("__NOTOC__", "__DISAMBIG__")
    assert article.templates == ("disambiguation", "formatnum")


def test_one_text_node_link_text_renders_as_through_the_emitter():
  # render_inline's shortcut for a link text or title that is one run of text gives what the
  # renderer and emitter give for the same text split in two (which they render).
  from beam_pipelines.parsers import mw_tree  # pylint: disable=g-import-not-at-top
  renderer = wikitext._Renderer("Page", None)  # pylint: disable=protected-access
  for text in ["Ore River", "  Ore \n\n River  ", "Ore\u200bRiver\u00ad", "\u00a0Ore\tRiver",
               "", "   ", "Ore River (town)", "x\u2060y z"]:
    one = mw_tree.parse_nodes(text)
    assert len(one) <= 1
    half = len(text) // 2
    two = [text[:half], text[half:]]
    assert renderer.render_inline(one) == renderer.render_inline(two), repr(text)
  assert wikitext._source(mw_tree.parse_nodes("Ore_River#x")) == "Ore_River#x"  # pylint: disable=protected-access


def test_refs_read_without_their_nodes_give_the_same_article(monkeypatch):
  # parse_article has the contents of <ref> tags come as their wikitext (mw_tree's
  # opaque_tags); rendering every real page with them built instead changes nothing.
  from beam_pipelines.parsers import mw_tree  # pylint: disable=g-import-not-at-top
  paths = sorted(glob.glob(testutil.shared_data("wikitext_en", "*.txt")))
  if not paths:
    pytest.skip("no ../shared/data/wikitext_en")
  texts = []
  for path in paths:
    with open(path, encoding="utf-8") as f:
      texts.append((os.path.basename(path)[:-4].replace("-", " "), f.read()))
  fast = [wikitext.parse_article(text, title) for title, text in texts]
  parse = mw_tree.parse_nodes
  monkeypatch.setattr(mw_tree, "parse_nodes",
                      lambda text, skip_style_tags=False, opaque_tags=(): parse(
                          text, skip_style_tags))
  built = [wikitext.parse_article(text, title) for title, text in texts]
  assert fast == built
  assert sum(a.dropped.get("in_ref", 0) for a in fast) > 100  # links in refs, counted


def test_articles_from_mwparserfromhells_own_tree_are_the_same(monkeypatch):
  # The renderer reads mw_tree's light tree; rendering every real page from
  # mwparserfromhell.parse's own tree (converted node for node) gives the same articles.
  from beam_pipelines.parsers import mw_tree  # pylint: disable=g-import-not-at-top
  paths = sorted(glob.glob(testutil.shared_data("wikitext_en", "*.txt")))
  if not paths:
    pytest.skip("no ../shared/data/wikitext_en")
  texts = []
  for path in paths:
    with open(path, encoding="utf-8") as f:
      texts.append((os.path.basename(path)[:-4].replace("-", " "), f.read()))
  light = [wikitext.parse_article(text, title) for title, text in texts]
  monkeypatch.setattr(mw_tree, "parse_nodes",
                      lambda text, skip_style_tags=False, opaque_tags=(): (
                          mw_tree.from_mwparserfromhell(
                              mwparserfromhell.parse(text, skip_style_tags=skip_style_tags))))
  assert [wikitext.parse_article(text, title) for title, text in texts] == light
  assert sum(len(a.links) for a in light) > 1000


def test_visible_removes_exactly_the_invisible_characters():
  # Soft hyphen, zero-width space / non-joiner / joiner, LRM / RLM, word joiner, BOM: removed
  # wherever they stand; every other character, ASCII or not, kept (str.translate's result).
  invisible = "\u00ad\u200b\u200c\u200d\u200e\u200f\u2060\ufeff"
  text = "Jür\u00adgen\u200b খ্রি\u200dষ্টা \u200e\u200fΑθήνα\u2060日本\ufeff\u00a0x\u200a"
  assert wikitext.visible(text) == text.translate(dict.fromkeys(map(ord, invisible)))
  assert wikitext.visible(text) == "Jürgen খ্রিষ্টা Αθήνα日本\u00a0x\u200a"
  assert wikitext.visible("plain ascii") == "plain ascii"
  assert wikitext.visible(invisible * 3) == ""

