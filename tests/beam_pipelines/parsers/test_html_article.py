"""Tests of beam_pipelines.parsers.html_article: Parsoid and classic HTML -> ParsedArticle."""

import os

import pytest

from beam_pipelines.dumps import html_dump
from beam_pipelines.parsers import html_article
from beam_pipelines.parsers import mentions
from beam_pipelines.parsers import page_kinds
from tests import testutil

REAL_FILE = testutil.shared_data("html", "enwiki-2014-render-html.ndjson.gz")
URL = "https://en.wikipedia.org/wiki/Ore_River"

# Hand-written Parsoid HTML in the form of Wikimedia Enterprise dumps' article_body.html.
PARSOID = """<!DOCTYPE html>
<html prefix="dc: http://purl.org/dc/terms/ mw: http://mediawiki.org/rdf/"><head>
<meta charset="utf-8"/><title>Ore River</title><base href="//en.wikipedia.org/wiki/"/></head>
<body class="mw-content-ltr parsoid-body mediawiki mw-parser-output" lang="en">
<section data-mw-section-id="0" id="mwAQ">
<div role="note" class="hatnote navigation-not-searchable" about="#mwt1"
 typeof="mw:Transclusion"
 data-mw='{"parts":[{"template":{"target":{"wt":"About","href":"./Template:About"}}}]}'
>For the creek, see <a rel="mw:WikiLink" href="./Ore_Creek" title="Ore Creek">Ore Creek</a>.</div>
<table class="infobox" about="#mwt2" typeof="mw:Transclusion"
 data-mw='{"parts":[{"template":{"target":{"wt":"Infobox river\\n"}}}]}'
><tbody><tr><th>Mouth</th><td><a rel="mw:WikiLink" href="./Gull_Sea"
 title="Gull Sea">Gull Sea</a></td></tr>
<tr><th><a rel="mw:WikiLink" href="./River_mouth" title="River mouth">Mouth</a> elevation</th>
<td>0 m</td></tr>
</tbody></table>
<p id="mwAg"><b>Ore River</b> is a river that flows past <a rel="mw:WikiLink" href="./Port_Alder"
 title="Port Alder" id="mwAw">Port Alder</a> into <a rel="mw:WikiLink" href="./Lake_Fen"
 title="Lake Fen">Lake&nbsp;Fen</a>.<sup about="#mwt3" class="mw-ref reference" id="cite_ref-1"
 rel="dc:references" typeof="mw:Extension/ref"><a href="./Ore_River#cite_note-1"><span
 class="mw-reflink-text">[1]</span></a></sup> It is named after <a rel="mw:WikiLink"
 href="./Ore_(mineral)#History" title="Ore (mineral)">ore</a>, not the <a rel="mw:WikiLink"
 href="./Ore_Bay?action=edit&amp;redlink=1" class="new" title="Ore Bay">bay</a>; see <a
 rel="mw:WikiLink/Interwiki" href="https://fr.wikipedia.org/wiki/Rivi%C3%A8re_Ore"
 title="fr:Rivière Ore" class="extiw">fr</a> and <a rel="mw:WikiLink" href="./Help:Editing"
 title="Help:Editing">help</a>.</p>
<figure class="mw-default-size" typeof="mw:File/Thumb"><a href="./File:Ore.jpg"
 class="mw-file-description"><img src="//upload.wikimedia.org/x.jpg" class="mw-file-element"/></a>
<figcaption>The river near <a rel="mw:WikiLink" href="./Gull_Point" title="Gull Point">Gull
 Point</a>.</figcaption></figure>
</section>
<section data-mw-section-id="1"><h2 id="Course">Course</h2>
<p>It passes <a rel="mw:WikiLink" href="./Port_Alder" title="Port Alder">the port</a> twice and
 the <a rel="mw:WikiLink" href="./Caf%C3%A9_Noir_(ship)"
 title="Café Noir (ship)"><i>Café Noir</i></a>.</p>
<ul><li><a rel="mw:WikiLink" href="./Mill_Weir">Mill Weir</a> on the <a rel="mw:WikiLink"
 href="./Category:Weirs">weir list</a></li></ul>
<table class="wikitable"><tbody><tr><th>Town</th></tr>
<tr><td><a rel="mw:WikiLink" href="./Birch_Cove">Birch Cove</a></td></tr></tbody></table>
</section>
<section data-mw-section-id="2"><h2 id="References">References</h2>
<div class="mw-references-wrap" typeof="mw:Extension/references"><ol
 class="mw-references references">
<li id="cite_note-1"><span class="mw-reference-text"><a rel="mw:WikiLink" href="./Cited_Page">Cited
 Page</a></span></li></ol></div>
<div role="navigation" class="navbox"><table class="nowraplinks"><tbody><tr><td><a
 rel="mw:WikiLink" href="./Other_River">Other River</a></td></tr></tbody></table></div>
</section>
<link rel="mw:PageProp/Category" href="./Category:Rivers_of_Norland#Ore"/>
<link rel="mw:PageProp/Category" href="./Category:Norland"/>
</body></html>"""

PROSE = ("Ore River is a river that flows past Port Alder into Lake Fen. It is named after ore, "
         "not the bay; see fr and help.\nCourse\nIt passes the port twice and the Café Noir.\n"
         "Mill Weir on the weir list\nReferences")


def links_of(article):
  return [(article.text[link.start:link.end], link.target, link.source) for link in article.links]


class TestParsoid:

  @pytest.fixture
  def article(self):
    return html_article.parse_html_article(PARSOID, "Ore River", URL,
                                           categories=["Category:Rivers"])

  def test_prose_text_first_paragraph_and_pieces(self, article):
    assert article.text[:article.prose_end] == PROSE
    assert article.first_paragraph == PROSE.split("\n", 1)[0]
    # Pieces after the prose, each on its own line: the infobox value, the caption, the cell.
    assert article.text[article.prose_end:] == "\nGull Sea\nThe river near Gull Point.\nBirch Cove"

  def test_links_are_mentions_with_spans_targets_and_sources(self, article):
    assert links_of(article) == [
        ("Port Alder", "Port Alder", "prose"), ("Lake Fen", "Lake Fen", "prose"),
        ("ore", "Ore (mineral)", "prose"), ("the port", "Port Alder", "prose"),
        ("Café Noir", "Café Noir (ship)", "prose"), ("Mill Weir", "Mill Weir", "prose"),
        ("Gull Sea", "Gull Sea", "template"), ("Gull Point", "Gull Point", "caption"),
        ("Birch Cove", "Birch Cove", "table")]
    assert article.list_item_links == 1

  def test_links_that_are_no_mentions_are_counted(self, article):
    assert article.dropped == {
        "in_hatnote": 1, "in_infobox_label": 1, "in_ref": 2, "in_navbox": 1, "redlink": 1,
        "interwiki": 1, "other_namespace": 1, "category": 1, "file": 1}

  def test_categories_and_templates(self, article):
    # The record's categories first, then those the HTML carries (sort key dropped).
    assert article.categories == ["Rivers", "Rivers of Norland", "Norland"]
    assert article.templates == ("about", "infobox river")
    assert article.switches == ()

  def test_mentions_have_contexts_from_the_visible_text(self, article):
    found = mentions.article_mentions(article, 10, "Ore River")
    target, (mention_id, source, span, left, right, sentence, link_source) = found[1]
    assert (target, mention_id, source, span) == ("Lake Fen", "10:1", "Ore River", "Lake Fen")
    assert link_source == "prose"
    assert left == "flows past Port Alder into"
    assert right == ". It is named after"
    assert sentence == "Ore River is a river that flows past Port Alder into [MASK]."

  def test_disambiguation_marker(self):
    html = ('<html><head><meta property="mw:PageProp/disambiguation"/></head><body>'
            '<p><b>Ore</b> may refer to:</p><ul><li><a rel="mw:WikiLink" href="./Ore_River">'
            "Ore River</a></li></ul></body></html>")
    article = html_article.parse_html_article(html, "Ore", URL)
    assert article.switches == ("__DISAMBIG__",)
    assert page_kinds.disambiguation_reason(article, "Ore") == page_kinds.BY_SWITCH
    by_template = html_article.parse_html_article("<p>Ore may be:</p>", "Ore", URL,
                                                  templates=["Template:Disambiguation"])
    assert page_kinds.disambiguation_reason(by_template, "Ore") == page_kinds.BY_TEMPLATE


CLASSIC = """<!-- http%3A//en.wikipedia.org/wiki%3Faction%3Drender -->
<div class="hatnote">For the band, see <a href="//en.wikipedia.org/wiki/Ore_(band)">Ore</a>.</div>
<div id="toc" class="toc"><ul><li><a href="#Course">Course</a></li></ul></div>
<p><b>Ore River</b> flows into the <a href="//en.wikipedia.org/wiki/Gull_Sea_(Norland)#North"
 title="Gull Sea (Norland)">Gull
 Sea</a> near <a href="//en.wikipedia.org/w/index.php?title=Ore_Bay&amp;action=edit&amp;redlink=1"
 class="new" title="Ore Bay (page does not exist)">Ore Bay</a>,<sup id="cite_ref-1"
 class="reference"><a href="#cite_note-1"><span>[</span>1<span>]</span></a></sup> past <a
 href="/wiki/Port_Alder" class="mw-redirect" title="Port Alder">Port&#160;Alder</a> and <a
 href="//de.wikipedia.org/wiki/Erz" class="extiw" title="de:Erz">Erz</a>.<sup
 class="noprint Inline-Template Template-Fact"><a
 href="//en.wikipedia.org/wiki/Wikipedia:Citation_needed"
 title="Wikipedia:Citation needed">citation needed</a></sup> See <a href="#Course">below</a>.</p>
<div class="thumb tright"><div class="thumbinner"><a href="//en.wikipedia.org/wiki/File:Ore.jpg"
 class="image"><img alt="" src="//upload.wikimedia.org/x.jpg"/></a><div class="thumbcaption"><div
 class="magnify"><a href="//en.wikipedia.org/wiki/File:Ore.jpg" class="internal"
 title="Enlarge"></a>
</div>The <a href="//en.wikipedia.org/wiki/Ore_River_Bridge"
 title="Ore River Bridge">bridge</a></div></div></div>
<h2><span class="mw-editsection">[<a
 href="/w/index.php?title=Ore_River&amp;action=edit&amp;section=1"
 title="Edit section: Course">edit</a>]</span><span class="mw-headline"
 id="Course">Course</span></h2>
<p>Boats reach <a href="//en.wikipedia.org/wiki/Birch_Cove" title="Birch Cove"><img alt=""
 src="//upload.wikimedia.org/flag.png"/></a> <a href="http://example.org/">the harbour</a> and
 <a href="//en.wikipedia.org/wiki/100%25_Pure_(boat)" title="100% Pure (boat)">100% Pure</a>.</p>
<table class="navbox"><tr><td><a
 href="//en.wikipedia.org/wiki/Other_River">Other River</a></td></tr></table>
"""


class TestClassic:

  @pytest.fixture
  def article(self):
    return html_article.parse_html_article(CLASSIC, "Ore River", URL)

  def test_text_links_and_counts(self, article):
    assert article.text[:article.prose_end] == (
        "Ore River flows into the Gull Sea near Ore Bay, past Port Alder and Erz. See below.\n"
        "Course\nBoats reach the harbour and 100% Pure.")
    assert links_of(article) == [
        ("Gull Sea", "Gull Sea (Norland)", "prose"), ("Port Alder", "Port Alder", "prose"),
        ("100% Pure", "100% Pure (boat)", "prose"), ("bridge", "Ore River Bridge", "caption")]
    # Links to articles counted by where they were; the footnote, the table of contents, the
    # edit link and the 'citation needed' note link to no article.
    assert article.dropped == {
        "in_hatnote": 1, "redlink": 1, "interwiki": 1, "in_page_anchor": 1, "file": 1,
        "empty_anchor": 1, "in_navbox": 1}
    assert article.first_paragraph.startswith("Ore River flows into the Gull Sea")


@pytest.mark.parametrize("href,expected", [
    ("./Ore_River", ("wiki", "Ore_River")),
    ("./Caf%C3%A9#Menu", ("wiki", "Café#Menu")),
    ("/wiki/AC/DC", ("wiki", "AC/DC")),
    ("//en.wikipedia.org/wiki/Category:Rivers", ("wiki", "Category:Rivers")),
    ("https://en.wikipedia.org/wiki/Ore", ("wiki", "Ore")),
    ("//fr.wikipedia.org/wiki/Ore", ("interwiki", "")),
    ("//en.wiktionary.org/wiki/ore", ("interwiki", "")),
    ("/w/index.php?title=Ore_Bay&action=edit&redlink=1", ("redlink", "Ore_Bay")),
    ("./Ore_Bay?action=edit&redlink=1", ("redlink", "Ore_Bay")),
    ("/w/index.php?title=Ore&action=history", ("external", "")),
    ("#cite_note-1", ("anchor", "")),
    ("http://example.org/wiki/Ore", ("external", "")),
    ("//en.wikipedia.org/wiki/Ore", ("wiki", "Ore")),
    ("mailto:a@example.org", ("external", "")),
])
def test_link_title(href, expected):
  assert html_article.link_title(href, "en.wikipedia.org") == expected


def test_namespaces_and_blank_html():
  html = ('<p><a href="./File:X.jpg">f</a> <a href="./Template:Ore">t</a> '
          '<a href="./Wikt:ore">w</a> <a href="./Ore_River_(Norland)">r</a> '
          '<a href="./%3CBad%3E">b</a></p>')
  article = html_article.parse_html_article(html, "Ore", URL)
  assert [link.target for link in article.links] == ["Ore River (Norland)"]
  assert article.dropped == {"file": 1, "other_namespace": 1, "interwiki": 1,
                             "invalid_target": 1}
  empty = html_article.parse_html_article("  \n", "Ore", URL)
  assert (empty.text, empty.links, empty.first_paragraph) == ("", [], "")


@pytest.fixture(scope="module")
def real_pages():
  if not os.path.exists(REAL_FILE):
    pytest.skip("needs ../shared/data")
  pages = {}
  for page in html_dump.iter_pages(REAL_FILE):
    pages[page.title] = page
    if len(pages) == 2:
      break
  return pages


def test_real_page_prose_links_and_a_known_mention(real_pages):
  page = real_pages["Renaissance (band)"]
  article = html_article.parse_html_article(page.html, page.title, page.url)
  prose = [link for link in article.links if link.source == "prose"]
  assert len(prose) == 103
  assert article.list_item_links == 8
  assert article.dropped["in_navbox"] == 31
  assert article.first_paragraph.startswith(
      "Renaissance are an English progressive rock band, most notable for their 1978 UK top "
      "10 hit \"Northern Lights\"")
  found = mentions.article_mentions(article, page.page_id, "Renaissance (band)")
  assert found[0] == ("England", (
      "236128:0", "Renaissance (band)", "English", "Renaissance are an",
      "progressive rock band, most",
      "Renaissance are an [MASK] progressive rock band, most notable for their 1978 UK top 10 "
      "hit \"Northern Lights\" and progressive rock classics like \"Carpet of the Sun\", "
      "\"Mother Russia\", and \"Ashes Are Burning\".", "prose"))
  assert (prose[0].start, prose[0].end) == (19, 26)
  # A link to a song article with a disambiguating title, and a piped anchor.
  assert (prose[2].anchor, prose[2].target) == ("Mother Russia", "Mother Russia (Renaissance song)")


def test_real_page_every_paragraph_link_is_one_mention(real_pages):
  page = real_pages["Mischa Barton"]
  article = html_article.parse_html_article(page.html, page.title, page.url)
  prose = [(link.anchor, link.target) for link in article.links if link.source == "prose"]
  assert len(prose) == 199
  assert prose[:3] == [("actress", "Actress"), ("fashion model", "Model (person)"),
                       ("British", "United Kingdom")]
  assert all(article.text[link.start:link.end] == link.anchor for link in article.links)


def test_link_title_without_the_pages_host():
  assert html_article.link_title("//en.wikipedia.org/wiki/Ore", "") == ("wiki", "Ore")
  assert html_article.link_title("//fr.wikipedia.org/wiki/Ore", "",
                                 classes=("extiw",)) == ("interwiki", "")
  assert html_article.link_title("//commons.wikimedia.org/wiki/Ore", "") == ("interwiki", "")
  assert html_article.link_title("https://example.org/wiki/Ore", "") == ("external", "")
