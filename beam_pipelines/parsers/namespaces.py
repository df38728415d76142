"""Link and redirect targets: a title's namespace, its normalized form, a redirect's target.

MediaWiki decides what a link is by the prefix before the first ':' of its target (Category:,
File:, an interlanguage or interwiki prefix, another namespace, or none: a main-namespace
article, the only kind of target a mention has). Redirect pages are found by their
<redirect title=.../> element or the redirect magic word ('#REDIRECT [[...]]', localized).

Which prefixes are namespaces, which words make a redirect, which letters after ']]' extend a
link (the link trail) and whether a title's first letter is upper-cased depend on the wiki:
`Site` holds these rules for one dump, built from its <siteinfo> header
(xml_dump.read_siteinfo) by `site_for`. A dump without a header, or of English Wikipedia,
gets the English rules this module always had (DEFAULT_SITE; the module-level functions).
"""

import functools
import re
from typing import Dict, FrozenSet, Mapping, Optional, Tuple

import mwparserfromhell

from beam_pipelines.dumps import xml_dump
from dense_entity.kb import titles

# --------------------------------------------------------------------------------------------
# Title classification
# --------------------------------------------------------------------------------------------

# Namespace names and aliases (lower case), English plus the common localized ones.
CATEGORY_NAMESPACES = frozenset([
    "category", "kategorie", "catégorie", "categoría", "categoria", "kategori", "categorie",
    "kategoria", "категория", "kategória", "luokka",
])
FILE_NAMESPACES = frozenset([
    "file", "image", "media", "datei", "bild", "medium", "fichier", "archivo", "imagen",
    "immagine", "bestand", "plik", "arquivo", "imagem", "файл", "изображение", "tiedosto",
    "lêer", "beeld", "fil", "bild", "soubor", "dosya", "fitxer", "datoteka", "ファイル", "画像",
    "文件", "파일",
])
OTHER_NAMESPACES = frozenset([
    "talk", "user", "user talk", "wikipedia", "wikipedia talk", "wp", "wt", "project",
    "project talk", "file talk", "image talk", "mediawiki", "mediawiki talk", "template",
    "template talk", "tm", "help", "help talk", "category talk", "portal", "portal talk",
    "draft", "draft talk", "book", "book talk", "timedtext", "timedtext talk", "module",
    "module talk", "special", "gadget", "gadget talk", "gadget definition",
    "gadget definition talk", "education program", "education program talk", "topic",
    "wikiproject", "mos",
    # German (the wikitext_en corpus holds a few German articles)
    "diskussion", "benutzer", "benutzerin", "benutzer diskussion", "vorlage",
    "vorlage diskussion", "hilfe", "hilfe diskussion", "kategorie diskussion",
    "datei diskussion", "spezial", "modul",
])
# Interlanguage prefixes: common Wikipedia language codes (not all ~300).
LANGUAGE_PREFIXES = frozenset("""
en de fr es it nl pl pt ru ja zh sv uk vi war ceb ar fa ca sr no nb nn fi ko hu id cs ro tr eu
ms eo he da bg sk kk min hy lt hr sl et gl ce uz el simple be be-tarask be-x-old la az ur ka hi
th ta bn mk lv tt af bs sq te is oc cy ga gd mr sw ml kn ne pa an ast br ky tg tl sco lb jv su
yi yue zh-yue zh-min-nan zh-classical nds als fy ht io ia scn vec pms lmo nap bar ku ps ckb arz
azb mzn new bpy lmo mg qu sa si my km lo am so yo ig ha zu xh ba cv os sah tk mn bo ug dv fo
fur li lij vls wa frr hsb dsb se co rm gn ay nv haw mi sm to ty fj ln kg rw rn lg ny sn st tn
ts ve ss wo ff bm ee ak tw om ti pi gu or as bh mai bcl pam ilo hak gan wuu cdo ang got pdc
""".split())
# Interwiki prefixes to sister projects and common external wikis (never mentions).
INTERWIKI_PREFIXES = frozenset("""
wikt wiktionary w commons c meta m metawikimedia metawikipedia species wikispecies wikisource
s wikiquote q wikibooks b wikinews n wikivoyage voy wikidata d wikiversity v mw mediawikiwiki
foundation wmf wikimedia phab phabricator outreach incubator doi rfc bugzilla irc google
""".split())

# MediaWiki's canonical (English) namespace names, accepted on every wiki beside the localized
# ones (includes/title/NamespaceInfo.php, $wgCanonicalNamespaceNames), and the aliases core
# MediaWiki defines for every wiki (includes/DefaultSettings.php: 'Image' and 'Image talk').
CANONICAL_NAMESPACES: Mapping[str, int] = {
    "media": -2, "special": -1, "talk": 1, "user": 2, "user talk": 3, "project": 4,
    "project talk": 5, "file": 6, "file talk": 7, "mediawiki": 8, "mediawiki talk": 9,
    "template": 10, "template talk": 11, "help": 12, "help talk": 13, "category": 14,
    "category talk": 15, "image": 6, "image talk": 7,
}
# Namespace aliases of a content language beyond its current names (old names kept working),
# from $namespaceAliases (and older $namespaceNames) of MediaWiki's
# languages/messages/MessagesXx.php, and, for the seven sample dumps, the prefixes their links
# use (shared/data/otherwiki). Lower case, spaces for '_'.
LANGUAGE_NAMESPACE_ALIASES: Mapping[str, Mapping[str, int]] = {
    "bn": {"চিত্র আলাপ": 7},
    "de": {"bild": 6, "bild diskussion": 7, "benutzerin": 2, "benutzerin diskussion": 3},
    "el": {"εικόνα": 6, "συζήτηση εικόνας": 7, "μέσον": -2},
    "es": {"imagen": 6, "imagen discusión": 7},
    "fr": {"image": 6, "discussion image": 7},
    "hy": {"սպասարկող": -1},
    "it": {"immagine": 6, "discussioni immagine": 7},
    "ja": {"画像": 6, "画像‐ノート": 7, "イメージ": 6},
    "mr": {"चित्र चर्चा": 7},
    "nl": {"afbeelding": 6, "overleg afbeelding": 7},
    "pl": {"grafika": 6, "dyskusja grafiki": 7},
    "pt": {"imagem": 6, "imagem discussão": 7},
    "ru": {"изображение": 6, "обсуждение изображения": 7},
    "sv": {"bild": 6, "bilddiskussion": 7},
    "uk": {"спеціальні": -1, "зображення": 6, "обговорення зображення": 7,
           "обговорення шаблона": 11},
    "vi": {"hình": 6, "thảo luận hình": 7, "tiêu bản": 10, "thảo luận tiêu bản": 11},
    "zh": {"图像": 6, "圖像": 6, "文件": 6, "檔案": 6, "模板": 10, "分类": 14, "分類": 14},
}
# Wikimedia's per-wiki aliases (wmf-config $wgNamespaceAliases) seen in the sample dumps.
SITE_NAMESPACE_ALIASES: Mapping[str, Mapping[str, int]] = {
    "bnwiki": {"wp": 4, "wt": 5},
    "ukwiki": {"вп": 4},
}

# Redirect magic words by content language: MediaWiki's languages/messages/MessagesXx.php,
# $magicWords['redirect'] (matched case-insensitively, as MediaWiki does; '#REDIRECT' works on
# every wiki). Covers the twenty largest Wikipedias (en ceb de fr sv nl ru es it arz pl ja zh
# uk vi war ar pt fa ca; ceb and war use '#REDIRECT' only) and bn el hy mr, and a few more.
# The keywords of bn el hy ja mr uk vi were checked against the redirects of the sample dumps.
REDIRECT_KEYWORDS: Mapping[str, Tuple[str, ...]] = {
    "en": ("#REDIRECT",),
    "ar": ("#تحويل",),
    "arz": ("#تحويل",),
    "bn": ("#পুনর্নির্দেশ",),
    "ca": ("#REDIRECCIÓ", "#REDIRECCIO"),
    "cs": ("#PŘESMĚRUJ",),
    "de": ("#WEITERLEITUNG",),
    "el": ("#ΑΝΑΚΑΤΕΥΘΥΝΣΗ",),
    "es": ("#REDIRECCIÓN", "#REDIRECCION"),
    "fa": ("#تغییرمسیر", "#تغییر_مسیر"),
    "fi": ("#OHJAUS", "#UUDELLEENOHJAUS"),
    "fr": ("#REDIRECTION",),
    "he": ("#הפניה",),
    "hi": ("#अनुप्रेषित",),
    "hu": ("#ÁTIRÁNYÍTÁS",),
    "hy": ("#ՎԵՐԱՀՂՈՒՄ",),
    "id": ("#ALIH",),
    "it": ("#RINVIA", "#RINVIO", "#RIMANDO"),
    "ja": ("#転送", "#リダイレクト", "＃転送", "＃リダイレクト"),
    "ko": ("#넘겨주기",),
    "mr": ("#पुनर्निर्देशन", "#पुर्ननिर्देशन"),
    "nl": ("#DOORVERWIJZING",),
    "no": ("#OMDIRIGERING",),
    "nb": ("#OMDIRIGERING",),
    "pl": ("#PATRZ", "#PRZEKIERUJ", "#TAM"),
    "pt": ("#REDIRECIONAMENTO", "#REDIRECIONA"),
    "ru": ("#ПЕРЕНАПРАВЛЕНИЕ", "#ПЕРЕНАПР", "#PERENAPRAVLENIE"),
    "sr": ("#ПРЕУСМЕРИ", "#PREUSMERI"),
    "sv": ("#OMDIRIGERING",),
    "tr": ("#YÖNLENDİRME", "#YÖNLENDİR"),
    "uk": ("#ПЕРЕНАПРАВЛЕННЯ", "#ПЕРЕНАПР", "#ПЕРЕНАПРАВЛЕНИЕ"),
    "vi": ("#đổi",),
    "zh": ("#重定向", "#重新導向"),
}

# Link trails by content language: the letters after ']]' that MediaWiki draws into the link
# text ('[[bus]]es' -> 'buses'), the character class of $linkTrail in MessagesXx.php; '' for
# none (Chinese: '/^()(.*)$/sD'; Japanese taken as the same, words run
# on without spaces). Languages not listed use English's '[a-z]', as
# MediaWiki does for a language whose fallback chain defines none.
LINK_TRAILS: Mapping[str, str] = {
    "en": "a-z",
    "ca": "a-zàèéíòóúç·ïü",
    "de": "äöüßa-z",
    "el": "a-zαβγδεζηθικλμνξοπρστυφχψωςΑΒΓΔΕΖΗΘΙΚΛΜΝΞΟΠΡΣΤΥΦΧΨΩάέήίόύώϊϋΐΰΆΈΉΊΌΎΏΪΫ",
    "es": "a-záéíñóúü",
    "fr": "a-zàâçéèêîôûäëïöüùÇÉÂÊÎÔÛÄËÏÖÜÀÈÙ",
    "hy": "a-zաբգդեզէըթժիլխծկհձղճմյնշոչպջռսվտրցւփքօֆև«»",
    "it": "àéèíîìóòúùa-z",
    "ja": "",
    "mr": "\u0900-\u0963\u0971-\u097f\ufeff\u200d",
    # Bengali letters and signs, no digits (U+09E6-U+09EF): not read from MessagesBn.php (the
    # copy at hand predates its $linkTrail); the Bengali block as the Marathi rule does.
    "bn": "\u0980-\u09e3\u09f0-\u09fe\u200c\u200d",
    "nl": "a-zäöüïëéèà",
    "pl": "a-zęóąśłżźćńĘÓĄŚŁŻŹĆŃ",
    "pt": "áâãàéêẽçíòóôõúüűũa-z",
    "ru": "a-zабвгдеёжзийклмнопрстуфхцчшщъыьэюя",
    "sv": "a-zåäöéÅÄÖÉ",
    "uk": "a-zабвгґдеєжзиіїйклмнопрстуфхцчшщьєюяёъы“»",
    "vi": "a-zàâçéèêîôûäëïöüùÇÉÂÊÎÔÛÄËÏÖÜÀÈÙ",
    "zh": "",
}

# Kinds of link target (first element of classify_title's result).
MAIN = "main"
CATEGORY = "category"
FILE = "file"
INTERLANGUAGE = "interlanguage"
INTERWIKI = "interwiki"
OTHER_NAMESPACE = "other_namespace"
EMPTY = "empty"
INVALID = "invalid"

CATEGORY_NAMESPACE = 14  # MediaWiki's category namespace number (<ns>14</ns>) in every language

# Characters MediaWiki forbids in titles (after the '#fragment' is split off).
_ILLEGAL_TITLE_CHARS = frozenset("<>[]{}|\n\r\t")


def _prefix_key(prefix: str) -> str:
  return " ".join(prefix.replace("_", " ").split()).lower()


def _kind_of_namespace(number: int) -> str:
  if number == 14:
    return CATEGORY
  if number in (6, -2):  # File:, and Media: (a link straight to the file)
    return FILE
  return OTHER_NAMESPACE


# The prefixes of the English rules (DEFAULT_SITE): key -> (kind, namespace number or None).
_ENGLISH_PREFIXES: Dict[str, Tuple[str, Optional[int]]] = {}
for _names, _kind, _number in ((CATEGORY_NAMESPACES, CATEGORY, 14), (FILE_NAMESPACES, FILE, 6),
                               (OTHER_NAMESPACES, OTHER_NAMESPACE, None)):
  for _name in _names:
    _ENGLISH_PREFIXES[_name] = (_kind, _number)
for _name, _number in CANONICAL_NAMESPACES.items():  # 'template' -> 10, ...
  _ENGLISH_PREFIXES[_name] = (_ENGLISH_PREFIXES[_name][0], _number)
_ENGLISH_PREFIXES["media"] = (FILE, -2)


# English names of namespace numbers, for Site.english_form (canonical, and Wikipedia's usual
# extra namespaces).
_ENGLISH_NAMESPACE_NAMES: Dict[Optional[int], str] = {
    -2: "Media", -1: "Special", 1: "Talk", 2: "User", 3: "User talk", 4: "Project",
    5: "Project talk", 6: "File", 7: "File talk", 8: "MediaWiki", 9: "MediaWiki talk",
    10: "Template", 11: "Template talk", 12: "Help", 13: "Help talk", 14: "Category",
    15: "Category talk", 100: "Portal", 101: "Portal talk", 118: "Draft", 119: "Draft talk",
    710: "TimedText", 711: "TimedText talk", 828: "Module", 829: "Module talk",
}


class Site:
  """The title rules of one wiki: its namespaces, redirect words, link trail and title case.

  Built from a dump's <siteinfo> header (`site_for`): a prefix is a namespace when it is one of
  the dump's localized namespace names, a canonical English name (CANONICAL_NAMESPACES), an
  alias of the content language (LANGUAGE_NAMESPACE_ALIASES) or of the wiki
  (SITE_NAMESPACE_ALIASES); else an interlanguage (LANGUAGE_PREFIXES) or interwiki
  (INTERWIKI_PREFIXES) prefix; else part of a main-namespace title. Prefixes match case- and
  '_'-insensitively, as in MediaWiki. English Wikipedia and dumps without a header
  (SiteInfo() or None) get the English tables of this module (CATEGORY_NAMESPACES, ...),
  which also hold the few German and other localized names English dumps have always been
  read with, plus the header's names.

  Attributes:
    lang: the content language code ('' when unknown: English rules).
    first_letter: titles of the main namespace upper-case their first letter ('first-letter'
      case); False on a 'case-sensitive' wiki.
    link_trail: compiled pattern of a link trail (matched at the start of the text after
      ']]'), or None for a language without link trails.
  """

  def __init__(self, info: Optional[xml_dump.SiteInfo] = None):
    info = info or xml_dump.SiteInfo()
    self.info = info
    self.lang = info.lang.lower()
    base = self.lang.split("-", 1)[0]
    english = base in ("", "en")
    self.first_letter = info.case != "case-sensitive"
    self._case_by_number = {number: case for number, _, case in info.namespaces}
    prefixes: Dict[str, Tuple[str, Optional[int]]] = {}
    if english:
      prefixes.update(_ENGLISH_PREFIXES)
    for name, number in CANONICAL_NAMESPACES.items():
      prefixes.setdefault(name, (_kind_of_namespace(number), number))
    for aliases in (LANGUAGE_NAMESPACE_ALIASES.get(self.lang, {}),
                    LANGUAGE_NAMESPACE_ALIASES.get(base, {}),
                    SITE_NAMESPACE_ALIASES.get(info.dbname, {})):
      for name, number in aliases.items():
        prefixes[_prefix_key(name)] = (_kind_of_namespace(number), number)
    for number, name, _ in info.namespaces:  # the dump's own names win
      if name:
        prefixes[_prefix_key(name)] = (_kind_of_namespace(number), number)
    self._prefixes = prefixes
    self.namespace_prefixes: FrozenSet[str] = frozenset(prefixes)
    # Redirect words: the language's and English '#REDIRECT'; every known one for English
    # rules (as this module always accepted a few localized words in any dump).
    if english:
      keywords = sorted({k for words in REDIRECT_KEYWORDS.values() for k in words})
    else:
      keywords = list(REDIRECT_KEYWORDS.get(self.lang, REDIRECT_KEYWORDS.get(base, ())))
      keywords.append("#REDIRECT")
    self._redirect = re.compile(
        r"\s*(?:" + "|".join(re.escape(k) for k in sorted(set(keywords), key=len, reverse=True))
        + r")\s*:?\s*\[\[", re.IGNORECASE)
    trail = LINK_TRAILS.get(self.lang, LINK_TRAILS.get(base, LINK_TRAILS["en"]))
    self.link_trail = re.compile(f"[{trail}]+") if trail else None

  def __reduce__(self):  # pickled (Beam) as its SiteInfo; rebuilt on the worker
    return (site_for, (self.info,))

  def namespace_number(self, prefix: str) -> Optional[int]:
    """The namespace number of a prefix ('Шаблон' -> 10), None when it is no namespace."""
    entry = self._prefixes.get(_prefix_key(prefix))
    return None if entry is None else entry[1]

  def classify_title(self, raw: str) -> Tuple[str, str, bool]:
    """Classifies a link target as MediaWiki does by its prefix before the first ':'.

    Args:
      raw: the target as written between '[[' and '|' or ']]', e.g. ':fr:Pont Vert',
        'category:Bridges', 'Категорія:Мости', 'Harbor Lights: The Return'.

    Returns:
      (kind, rest, leading_colon): kind is one of MAIN, CATEGORY, FILE, INTERLANGUAGE,
      INTERWIKI, OTHER_NAMESPACE, EMPTY; rest is the title after the prefix (the whole title
      for MAIN; may hold a '#fragment'); leading_colon tells that the link started with ':'
      (a visible link, e.g. '[[:Category:Bridges]]', never a category assignment).
    """
    t = raw.strip()
    leading_colon = t.startswith(":")
    if leading_colon:
      t = t[1:].strip()
    if not t:
      return EMPTY, "", leading_colon
    if ":" in t:
      prefix, rest = t.split(":", 1)
      key = _prefix_key(prefix)
      entry = self._prefixes.get(key)
      if entry is not None:
        return entry[0], rest.strip(), leading_colon
      if key in LANGUAGE_PREFIXES:
        return INTERLANGUAGE, rest.strip(), leading_colon
      if key in INTERWIKI_PREFIXES:
        return INTERWIKI, rest.strip(), leading_colon
    return MAIN, t, leading_colon

  def normalize_target(self, raw: str, namespace: int = 0) -> str:
    """Normalizes a link or redirect target (the part after its namespace prefix): leading
    ':' and '#fragment' dropped, the first letter upper-cased unless the namespace is
    'case-sensitive'. Returns '' for an empty target or one with characters MediaWiki forbids
    in titles."""
    t = raw.strip()
    if t.startswith(":"):
      t = t[1:]
    case = self._case_by_number.get(namespace) if namespace else None
    first_letter = self.first_letter if case is None else case != "case-sensitive"
    t = titles.normalize_title(t, first_letter=first_letter)
    if not _ILLEGAL_TITLE_CHARS.isdisjoint(t):
      return ""
    return t

  def normalize_page_title(self, title: str) -> str:
    """A main-namespace page's title as written in the dump, normalized."""
    return titles.normalize_title(title, first_letter=self.first_letter)

  def is_main_namespace_title(self, title: str) -> bool:
    """True when a normalized title names a main-namespace (article) page of this wiki."""
    if ":" not in title:  # no prefix: classify_title's MAIN, or EMPTY for a blank title
      return not title.isspace() and title != ""
    return self.classify_title(title)[0] == MAIN

  def english_form(self, title: str) -> str:
    """`title` with a namespace prefix of this wiki that the English rules would not see as
    one ('Категорія:Мости') written with MediaWiki's canonical English name instead
    ('Category:Мости'; 'Special:' for a namespace without one), so that steps that know no
    wiki (kb_merge) still tell it from an article title; any other title as it is."""
    if self is DEFAULT_SITE or ":" not in title:
      return title
    if self.classify_title(title)[0] == MAIN or DEFAULT_SITE.classify_title(title)[0] != MAIN:
      return title
    prefix, rest = title.lstrip(":").split(":", 1)
    name = _ENGLISH_NAMESPACE_NAMES.get(self.namespace_number(prefix), "Special")
    return f"{name}:{rest.strip()}"

  def template_name(self, name: str) -> str:
    """A template's name without its 'Template:' (or localized, 'Шаблон:') prefix; `name` is
    lower case with single spaces."""
    if ":" in name:
      prefix, rest = name.split(":", 1)
      if self.namespace_number(prefix) == 10:
        return rest.strip()
    return name

  def redirect_target(self, page: xml_dump.Page) -> Optional[str]:
    """Returns the target of a redirect page, or None when it is not a redirect.

    The <redirect title=.../> element wins when present (every dump since MediaWiki 1.13 has
    it). Otherwise the text is checked for the wiki's redirect magic word at its start
    (REDIRECT_KEYWORDS of the content language, or '#REDIRECT', in any case), an optional ':'
    and spaces; the target is the first wikilink (parsed with mwparserfromhell), with the
    '#section' dropped and normalized like every title.

    Returns:
      The target as written, normalized ('Категорія:Мости' keeps its prefix: a redirect to
      another namespace); '' for a redirect whose target is empty or invalid (still a
      redirect, not an article); None for a normal page.
    """
    if page.redirect_title is not None:
      return self.normalize_target(page.redirect_title)
    match = self._redirect.match(page.text)
    if not match:
      return None
    link_text = page.text[match.end() - 2:]
    close = link_text.find("]]")
    if close >= 0:
      link_text = link_text[:close + 2]
    links = mwparserfromhell.parse(link_text).filter_wikilinks(recursive=False)
    if not links:
      return ""
    return self.normalize_target(str(links[0].title))


@functools.lru_cache(maxsize=64)
def site_for(info: Optional[xml_dump.SiteInfo]) -> Site:
  """The Site of a dump's SiteInfo (cached: one per distinct header)."""
  return Site(info)


DEFAULT_SITE = site_for(None)


def classify_title(raw: str, site: Optional[Site] = None) -> Tuple[str, str, bool]:
  """Site.classify_title of `site` (default: English rules)."""
  return (site or DEFAULT_SITE).classify_title(raw)


def is_main_namespace_title(title: str, site: Optional[Site] = None) -> bool:
  """True when a normalized title names a main-namespace (article) page."""
  return (site or DEFAULT_SITE).is_main_namespace_title(title)


def has_illegal_title_chars(title: str) -> bool:
  """True when `title` holds a character MediaWiki forbids in titles ('<>[]{}|', tab, newline)."""
  return not _ILLEGAL_TITLE_CHARS.isdisjoint(title)


def normalize_target(raw: str, site: Optional[Site] = None) -> str:
  """Normalizes a main-namespace link or redirect target: leading ':' and '#fragment' dropped.

  Returns '' for an empty target or one with characters MediaWiki forbids in titles.
  """
  return (site or DEFAULT_SITE).normalize_target(raw)


def redirect_target(page: xml_dump.Page, site: Optional[Site] = None) -> Optional[str]:
  """Site.redirect_target of `site` (default: English rules)."""
  return (site or DEFAULT_SITE).redirect_target(page)
