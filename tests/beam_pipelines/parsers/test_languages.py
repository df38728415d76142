"""Wikis in other languages: <siteinfo> namespaces, localized links, redirects, link trails.

Snippets are real wikitext of the seven sample dumps (shared/data/otherwiki, first 100,000 lines
of each Wikipedia's pages-articles dump); each wiki's rules come from its own <siteinfo> header.
"""

import bz2

import pytest

from beam_pipelines.dumps import xml_dump
from beam_pipelines.parsers import namespaces
from beam_pipelines.parsers import wikitext
from tests import testutil

LANGUAGES = ("bn", "el", "hy", "ja", "mr", "uk", "vi")


def _dump(lang):
  return testutil.shared_data("otherwiki", f"{lang}wiki-truncated-100k.xml.bz2")


@pytest.fixture(scope="module")
def sites():
  return {lang: namespaces.site_for(xml_dump.read_siteinfo(_dump(lang))) for lang in LANGUAGES}


UK_HEAD = b"""<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" xml:lang="uk">
  <siteinfo>
    <sitename>\xd0\x92\xd1\x96\xd0\xba\xd1\x96\xd0\xbf\xd0\xb5\xd0\xb4\xd1\x96\xd1\x8f</sitename>
    <dbname>ukwiki</dbname>
    <case>first-letter</case>
    <namespaces>
      <namespace key="-2" case="first-letter">\xd0\x9c\xd0\xb5\xd0\xb4\xd1\x96\xd0\xb0</namespace>
      <namespace key="0" case="first-letter" />
      <namespace key="14" case="first-letter">\xd0\x9a\xd0\xb0\xd1\x82\xd0\xb5\xd0\xb3\xd0\xbe\xd1\x80\xd1\x96\xd1\x8f</namespace>
      <namespace key="2300" case="case-sensitive">Gadget</namespace>
    </namespaces>
  </siteinfo>
  <page>"""


class TestSiteInfo:

  def test_parse_header(self):
    info = xml_dump.parse_siteinfo(UK_HEAD, "ukwiki.xml")
    assert (info.dbname, info.lang, info.case) == ("ukwiki", "uk", "first-letter")
    assert info.namespace_names() == {-2: "Медіа", 14: "Категорія", 2300: "Gadget"}
    assert dict((k, c) for k, _, c in info.namespaces)[2300] == "case-sensitive"

  def test_language_from_dbname_and_no_header(self):
    head = UK_HEAD.replace(b' xml:lang="uk"', b"")
    assert xml_dump.parse_siteinfo(head).lang == "uk"
    assert xml_dump.parse_siteinfo(b"<mediawiki><page>") == xml_dump.SiteInfo()

  def test_malformed_header_names_the_file(self):
    with pytest.raises(xml_dump.DumpError, match="ukwiki.xml: malformed <siteinfo>"):
      xml_dump.parse_siteinfo(UK_HEAD.replace(b"</dbname>", b""), "ukwiki.xml")

  @pytest.mark.parametrize("lang,category,file", [
      ("bn", "বিষয়শ্রেণী", "চিত্র"), ("el", "Κατηγορία", "Αρχείο"), ("hy", "Կատեգորիա", "Պատկեր"),
      ("ja", "Category", "ファイル"), ("mr", "वर्ग", "चित्र"), ("uk", "Категорія", "Файл"),
      ("vi", "Thể loại", "Tập tin")])
  def test_real_headers(self, sites, lang, category, file):
    info = sites[lang].info
    assert info.dbname == f"{lang}wiki" and info.lang == lang and info.case == "first-letter"
    assert info.namespace_names()[14] == category
    assert info.namespace_names()[6] == file


# Per language: (article snippet with a category, a file and a template link, its categories,
# its mention targets, a redirect page's text, the redirect's target). Lines from the dumps.
SNIPPETS = {
    "bn": ("[[চিত্র:Insert-signature.png|link=]] চিহ্নে ক্লিক করুন [[কবীর সুমন]]।\n"
           "[[টেমপ্লেট:উইকিপিডিয়া সম্পর্কে জানুন|অবশ্যপাঠ্য]]\n[[বিষয়শ্রেণী:বাংলা ভাষা| ]]",
           ["বাংলা ভাষা"], ["কবীর সুমন"],
           "#পুনর্নির্দেশ [[ক্রয়বিক্রয়]]", "ক্রয়বিক্রয়"),
    "el": ("| υπογραφή = [[Αρχείο:Eleftherios-venizelos-signature.svg|150px]]\n"
           "Σήμερα: [[Πρότυπο:Σημερινή Κυβέρνηση Κύπρου|Κυβέρνηση Κύπρου]] και [[ISO 3166-1]].\n"
           "[[Εικόνα:Old.png|thumb|x]]\n[[Κατηγορία:Βικιπαίδεια αρχεία]]",
           ["Βικιπαίδεια αρχεία"], ["ISO 3166-1"],
           "#ΑΝΑΚΑΤΕΥΘΥΝΣΗ[[Εμβαδόν]]", "Εμβαδόν"),
    "hy": ("[[Պատկեր:Urartian Fresco02.jpg|մինի|[[Էրեբունի ամրոց]]ի որմնանկար]]\n"
           "'''[[Կաղապար:Գլխավոր էջ|Գլխավոր էջ]]''' [[Սերբիա]]\n"
           "[[պատկեր:x.png]]\n[[Կատեգորիա:Վիքիպեդիա:Կաղապարներ]]",
           ["Վիքիպեդիա:Կաղապարներ"], ["Սերբիա", "Էրեբունի ամրոց"],
           "#ՎԵՐԱՀՂՈՒՄ [[Սերբիա]]", "Սերբիա"),
    "ja": ("[[ファイル:Sekai-no-gengo.png|thumb|400px|世界の言語の分布図]]\n"
           "メーリングリストの[[アーカイブ]]への[[Wikipedia:テンプレート|テンプレート]]は"
           "[[Template:Cite mailing list]]を参照。[[画像:Old.png]]\n[[Category:約物]]",
           ["約物"], ["アーカイブ"],
           "#転送 [[富樫]]", "富樫"),
    "mr": ("[[चित्र:Golden wikipedia featured star.svg|25px|left|alt=|link=]]विशेष लेख\n"
           "([[साचा:अलीकडील बदल लेख विनंत्या|संपादन]]) [[अरुण साधू]]\n"
           "[[वर्ग:बालकवी यांचे साहित्य]]",
           ["बालकवी यांचे साहित्य"], ["अरुण साधू"],
           "#पुर्ननिर्देशन [[अरुण साधू]]", "अरुण साधू"),
    "uk": ("| [[Файл:Línea de Wallace.jpg|96px]] || [[Зображення:90 mile beach.jpg|96px]]\n"
           "{{[[Шаблон:Не перекладено|Не перекладено]]}} [[Есперанто]]\n"
           "[[Категорія:Географія| ]]",
           ["Географія"], ["Есперанто"],
           "#ПЕРЕНАПРАВЛЕННЯ [[Есперанто]]", "Есперанто"),
    "vi": ("[[Tập tin:RHall.JPG|nhỏ|phải|250px|UC-Los Angeles (UCLA)]]\n"
           "[[Bản mẫu:Dis]] [[Alexandre de Rhodes]] [[Hình:Old.png]]\n[[Thể loại:Internet]]",
           ["Internet"], ["Alexandre de Rhodes"],
           "#đổi [[Alexandre de Rhodes]]", "Alexandre de Rhodes"),
}


@pytest.mark.parametrize("lang", LANGUAGES)
def test_localized_links(sites, lang):
  text, categories, targets, _, _ = SNIPPETS[lang]
  site = sites[lang]
  parsed = wikitext.parse_article(text, "Test", site)
  assert parsed.categories == categories
  assert sorted(link.target for link in parsed.links) == sorted(targets)
  assert parsed.dropped.get("file", 0) >= 1 and parsed.dropped["category"] == 1
  assert parsed.dropped.get("other_namespace", 0) >= 1  # the template link
  # English rules (before this change) took the localized names for article titles.
  english = wikitext.parse_article(text, "Test")
  if lang != "ja":  # jawiki uses the English 'Category:' name
    assert english.categories == []


@pytest.mark.parametrize("lang", LANGUAGES)
def test_localized_redirects(sites, lang):
  _, _, _, text, target = SNIPPETS[lang]
  page = xml_dump.Page(page_id=1, title="Alias", ns=0, text=text)
  assert sites[lang].redirect_target(page) == target
  # '#REDIRECT' works on every wiki; the <redirect title=...> element wins.
  assert sites[lang].redirect_target(
      xml_dump.Page(1, "Alias", 0, f"#redirect [[{target}]]")) == target
  assert sites[lang].redirect_target(
      xml_dump.Page(1, "Alias", 0, text, redirect_title=target + "_x")) == target + " x"


def test_redirect_to_another_namespace(sites):
  site = sites["uk"]
  page = xml_dump.Page(1, "Мости", 0, "#ПЕРЕНАПР [[Категорія:Мости]]")
  target = site.redirect_target(page)
  assert target == "Категорія:Мости" and not site.is_main_namespace_title(target)
  assert site.english_form(target) == "Category:Мости"
  assert not namespaces.is_main_namespace_title(site.english_form(target))
  assert site.english_form("UA: Українське радіо") == "UA: Українське радіо"


def test_aliases_of_the_wiki_and_its_language(sites):
  assert sites["uk"].classify_title("ВП:ЗДР")[0] == namespaces.OTHER_NAMESPACE
  assert sites["bn"].classify_title("WP:MOSNUM")[0] == namespaces.OTHER_NAMESPACE
  assert sites["vi"].classify_title("Hình:x.png")[0] == namespaces.FILE
  assert sites["ja"].classify_title("画像:x.png")[0] == namespaces.FILE
  # A main-namespace title with a colon, an interwiki and an interlanguage link.
  assert sites["uk"].classify_title("UA: Українське радіо")[0] == namespaces.MAIN
  assert sites["ja"].classify_title("wikt:語")[0] == namespaces.INTERWIKI
  assert sites["ja"].classify_title("en:Tokyo")[0] == namespaces.INTERLANGUAGE
  # Localized template names are stripped like 'Template:'.
  assert sites["uk"].template_name("шаблон:не перекладено") == "не перекладено"


class TestLinkTrails:

  @pytest.mark.parametrize("lang,text,anchor", [
      ("uk", "Жив у [[Київ]]і довго.", "Київі"),
      ("el", "Στην [[Αθήνα]]ς το κέντρο.", "Αθήνας"),
      ("hy", "[[Էրեբունի ամրոց]]ի որմնանկար", "Էրեբունի ամրոցի"),
      ("mr", "[[भारत]]ाचा इतिहास", "भारताचा"),
      ("ja", "[[東京]]都の人口", "東京"),
      ("vi", "[[Hà Nội]]abc", "Hà Nộiabc"),
  ])
  def test_trail_by_language(self, sites, lang, text, anchor):
    parsed = wikitext.parse_article(text, "Test", sites[lang])
    assert [link.anchor for link in parsed.links] == [anchor]

  def test_english_trail_is_unchanged(self):
    parsed = wikitext.parse_article("Two [[bus]]es and a [[Київ]]і.", "Test")
    assert [link.anchor for link in parsed.links] == ["buses", "Київ"]


def test_case_sensitive_wiki_keeps_first_letter():
  info = xml_dump.SiteInfo(dbname="enwiktionary", lang="en", case="case-sensitive",
                           namespaces=((14, "Category", "case-sensitive"),))
  site = namespaces.site_for(info)
  parsed = wikitext.parse_article("An [[iPod]].\n[[Category:nouns]]", "iPod", site)
  assert [link.target for link in parsed.links] == ["iPod"]
  assert parsed.categories == ["nouns"]
  assert wikitext.parse_article("An [[iPod]].", "X").links[0].target == "IPod"


def test_truncated_last_page_is_reported_and_earlier_pages_kept(tmp_path):
  # Each sample file ends inside a page, as a cut download does; so does its first 300 KB.
  # (extract_wikipedia on the whole files counts the cut page as 'pages_unreadable': 1.)
  with bz2.open(_dump("mr"), "rb") as f:
    head = f.read(300_000)
  cut = tmp_path / "mrwiki-cut.xml"
  cut.write_bytes(head)
  errors = []
  pages = list(xml_dump.iter_pages(str(cut), on_error=errors.append))
  assert len(errors) == 1
  assert "file ends inside a <page> (truncated dump?)" in str(errors[0])
  assert f"{cut}: page id" in str(errors[0])
  assert len(pages) == head.count(b"</page>") > 10
  assert xml_dump.read_siteinfo(str(cut)).dbname == "mrwiki"
