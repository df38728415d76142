"""Link and redirect targets: a title's namespace, its normalized form, a redirect's target.

MediaWiki decides what a link is by the prefix before the first ':' of its target (Category:,
File:, an interlanguage or interwiki prefix, another namespace, or none: a main-namespace
article, the only kind of target a mention has). Redirect pages are found by their
<redirect title=.../> element or the '#REDIRECT [[...]]' magic word.
"""

import re
from typing import Optional, Tuple

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

# Kinds of link target (first element of classify_title's result).
MAIN = "main"
CATEGORY = "category"
FILE = "file"
INTERLANGUAGE = "interlanguage"
INTERWIKI = "interwiki"
OTHER_NAMESPACE = "other_namespace"
EMPTY = "empty"
INVALID = "invalid"

# Characters MediaWiki forbids in titles (after the '#fragment' is split off).
_ILLEGAL_TITLE_CHARS = frozenset("<>[]{}|\n\r\t")


def _prefix_key(prefix: str) -> str:
  return " ".join(prefix.replace("_", " ").split()).lower()


def classify_title(raw: str) -> Tuple[str, str, bool]:
  """Classifies a link target as MediaWiki does by its prefix before the first ':'.

  Args:
    raw: the target as written between '[[' and '|' or ']]', e.g. ':fr:Pont Vert',
      'category:Bridges', 'Harbor Lights: The Return'.

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
    if key in CATEGORY_NAMESPACES:
      return CATEGORY, rest.strip(), leading_colon
    if key in FILE_NAMESPACES:
      return FILE, rest.strip(), leading_colon
    if key in LANGUAGE_PREFIXES:
      return INTERLANGUAGE, rest.strip(), leading_colon
    if key in INTERWIKI_PREFIXES:
      return INTERWIKI, rest.strip(), leading_colon
    if key in OTHER_NAMESPACES:
      return OTHER_NAMESPACE, rest.strip(), leading_colon
  return MAIN, t, leading_colon


def is_main_namespace_title(title: str) -> bool:
  """True when a normalized title names a main-namespace (article) page."""
  kind, _, _ = classify_title(title)
  return kind == MAIN


def has_illegal_title_chars(title: str) -> bool:
  """True when `title` holds a character MediaWiki forbids in titles ('<>[]{}|', tab, newline)."""
  return any(c in _ILLEGAL_TITLE_CHARS for c in title)


def normalize_target(raw: str) -> str:
  """Normalizes a main-namespace link or redirect target: leading ':' and '#fragment' dropped.

  Returns '' for an empty target or one with characters MediaWiki forbids in titles.
  """
  t = raw.strip()
  if t.startswith(":"):
    t = t[1:]
  t = titles.normalize_title(t)
  if any(c in _ILLEGAL_TITLE_CHARS for c in t):
    return ""
  return t


# --------------------------------------------------------------------------------------------
# Redirects
# --------------------------------------------------------------------------------------------

# '#REDIRECT' in any case, localized spellings of a few large wikis, optional ':' and spaces.
_REDIRECT = re.compile(
    r"\s*#(?:REDIRECT|WEITERLEITUNG|REDIRECTION|REDIRECCIÓN|REDIRECCION|RINVIA|RINVIO|"
    r"DOORVERWIJZING|PATRZ|PRZEKIERUJ|PERENAPRAVLENIE|ПЕРЕНАПРАВЛЕНИЕ|ПЕРЕНАПР|"
    r"REDIRECIONAMENTO|OMDIRIGERING|OHJAUS|UUDELLEENOHJAUS|ÁTIRÁNYÍTÁS|PŘESMĚRUJ|YÖNLENDİRME|"
    r"転送|重定向)\s*:?\s*\[\[",
    re.IGNORECASE)


def redirect_target(page: xml_dump.Page) -> Optional[str]:
  """Returns the normalized target of a redirect page, or None when it is not a redirect.

  The <redirect title=.../> element wins when present. Otherwise the text is checked for the
  redirect magic word at its start: '#REDIRECT' in any case, localized words ('#WEITERLEITUNG',
  ...), an optional ':' and spaces; the target is the first wikilink (parsed with
  mwparserfromhell), with the '#section' dropped and normalized like every title.

  Returns:
    The normalized target; '' for a redirect whose target is empty or invalid (still a
    redirect, not an article); None for a normal page.
  """
  if page.redirect_title is not None:
    return normalize_target(page.redirect_title)
  match = _REDIRECT.match(page.text)
  if not match:
    return None
  link_text = page.text[match.end() - 2:]
  close = link_text.find("]]")
  if close >= 0:
    link_text = link_text[:close + 2]
  links = mwparserfromhell.parse(link_text).filter_wikilinks(recursive=False)
  if not links:
    return ""
  return normalize_target(str(links[0].title))

