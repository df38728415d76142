"""Pages that are not entities and categories that are not features, as MediaWiki tells them.

No Beam here; the extraction (beam_pipelines.pipelines.extraction) calls these on every page.
Gillick et al. (2019), section 5: entities are Wikipedia articles; a disambiguation page is a
list of other entities (its links are not mentions of them in context), and a hidden
maintenance category ('All articles with dead external links') says nothing about an entity.

- Disambiguation pages. MediaWiki's Disambiguator extension marks a page by the behaviour switch
  `__DISAMBIG__`, which the disambiguation templates write; the templates also add the page to
  categories such as 'All disambiguation pages'. A dump holds the calls, not their expansion,
  so a page is a disambiguation page when it writes `__DISAMBIG__` itself, calls one of
  DISAMBIGUATION_TEMPLATES (English and the main other Wikipedias; any English template named
  '... disambiguation'), is in a category named '... disambiguation pages' (or another
  language's disambiguation category, DISAMBIGUATION_CATEGORIES), or is titled
  'X (disambiguation)'. Set index articles ({{Set index article}}, {{Surname}},
  {{Given name}}, {{Ship index}}) are lists MediaWiki does not mark: they stay entities.
  Both switches are case-sensitive in MediaWiki (flag '1' in Disambiguator.i18n.magic.php and
  MessagesEn.php): `__disambig__` or `__HiddenCat__` render as plain text and mark nothing, so
  they mark nothing here either.
- Hidden categories. A category page with `__HIDDENCAT__` is hidden; enwiki's category pages
  write it through {{Hidden category}}, the maintenance and tracking category templates and the
  monthly clean-up templates (HIDDEN_CATEGORY_TEMPLATES; {{Maintenance category}},
  {{Tracking category}} and {{Wikipedia category}} only with hidden=yes). Where the dump holds
  no page of a category, its name decides (is_maintenance_category): the standard English
  maintenance and tracking category names (MAINTENANCE_CATEGORY_PATTERNS) and other
  languages' 'Wikipedia:' categories.
"""

import re
from typing import Optional

import mwparserfromhell
from mwparserfromhell import nodes as mw_nodes

from beam_pipelines.parsers import mw_tree
from beam_pipelines.parsers import wikitext

DISAMBIGUATION_SWITCH = "__DISAMBIG__"
HIDDEN_CATEGORY_SWITCH = "__HIDDENCAT__"
DISAMBIGUATION_QUALIFIER = "(disambiguation)"

# Reasons (counter suffixes) for a disambiguation page, strongest first.
BY_SWITCH, BY_TEMPLATE, BY_CATEGORY, BY_TITLE = "switch", "template", "category", "title"

# Disambiguation templates by name (lower case, as wikitext.ParsedArticle.templates): English
# Wikipedia's {{Disambiguation}} and its redirects and variants, then the main other languages.
DISAMBIGUATION_TEMPLATES = frozenset([
    # en
    "disambiguation", "disambig", "disamb", "dab", "disambiguation page", "disambig-plants",
    "hndis", "hndab", "human name disambiguation", "geodis", "geo-dis", "geodab",
    "place name disambiguation", "numberdis", "number disambiguation", "numdis",
    "letter-number combination disambiguation", "letter-numbercombdisambig", "lndab",
    "mil-unit-dis", "military unit disambiguation", "hospitaldis", "hospital disambiguation",
    "schooldis", "school disambiguation", "roaddis", "road disambiguation",
    "species latin name disambiguation", "genus disambiguation", "taxonomy disambiguation",
    "chinese title disambiguation", "call sign disambiguation", "mathdab",
    "mathematical disambiguation", "disambiguation cleanup", "dab cleanup",
    "disambig-cleanup", "airport disambiguation", "molecular formula disambiguation",
    # other languages
    "begriffsklärung",  # de
    "homonymie", "bandeau standard pour page d'homonymie",  # fr
    "desambiguación", "desambiguacion",  # es
    "disambigua",  # it
    "dp", "dpintro",  # nl
    "ujednoznacznienie",  # pl
    "desambiguação", "desambig",  # pt
    "неоднозначность", "многозначность", "disambig-ru",  # ru
    "неоднозначність", "багатозначність",  # uk
    "förgrening", "gren",  # sv
    "aimai", "曖昧さ回避",  # ja
    "消歧义", "消歧義",  # zh
    "trang định hướng", "định hướng",  # vi
    "αποσαφήνιση",  # el
    "բազմիմաստություն",  # hy
    "দ্ব্যর্থতা নিরসন",  # bn
    "निःसंदिग्धीकरण",  # mr
    "täsmennyssivu",  # fi
    "peker", "pekerside",  # no
    "flertydig",  # da
    "rozcestník",  # cs
    "egyért",  # hu
    "anlam ayrımı",  # tr
    "توضيح",  # ar
    "ابهام‌زدایی",  # fa
    "פירושונים",  # he
    "동음이의",  # ko
    "desambiguació",  # ca
])
# Names of templates that are not disambiguation templates though they end like one.
_NOT_DISAMBIGUATION = frozenset(["disambiguation needed", "dn"])

# Disambiguation categories: English '... disambiguation pages' (and '... pages with short
# descriptions' of them), and other languages' category names (lower case).
_DISAMBIGUATION_CATEGORY = re.compile(r"(?:^|\s)disambiguation pages\b", re.IGNORECASE)
DISAMBIGUATION_CATEGORIES = frozenset([
    "begriffsklärung", "homonymie", "desambiguación", "disambigua", "ujednoznacznienie",
    "desambiguação", "неоднозначности", "многозначные термины", "förgreningssidor",
    "曖昧さ回避", "消歧义", "trang định hướng", "αποσαφήνιση", "täsmennyssivut",
])

HIDDEN_CATEGORY_TEMPLATES = frozenset([
    "hidden category", "hiddencat", "hidden cat", "hidden categories",
    "monthly clean-up category", "monthly clean up category", "monthly cleanup category",
    "maintenance category autocat", "tracking category autocat", "cs1 maintenance",
    "cs1 error category", "hiddencategory",
])
# These hide a category when called with hidden=yes.
_HIDING_WITH_PARAMETER = frozenset(["maintenance category", "tracking category",
                                    "wikipedia category", "maintenance", "tracking"])
_YES = frozenset(["yes", "y", "1", "true"])

# Standard English maintenance and tracking category names (Wikipedia:Maintenance, WP:HIDDENCAT)
# and the 'Wikipedia:' categories other Wikipedias use for maintenance. 'Articles with
# example ... code' is a visible topical category, not maintenance.
_MONTH = (r"(?:January|February|March|April|May|June|July|August|September|October|November|"
          r"December)")
MAINTENANCE_CATEGORY_PATTERNS = (
    r"^(?:All )?[Aa]rticles (?!with example )(?:with|containing|needing|lacking|using|to be|"
    r"that|which|covered|prone|incorporating|created|citing|in need|sourced|requiring|having|"
    r"including|slanted|tagged|missing|copied|written|under|lacking|with unsourced|in "
    r"Wikipedia|whose|where|edited|sourcing|contradicting|needing)\b",
    r"^All (?:pages|stub articles|Wikipedia articles|disambiguation pages|set index articles|"
    r"orphaned articles|accuracy disputes|self-contradictory|unreferenced)\b",
    r"^Wikipedia (?:articles|pages|indefinitely|semi-protected|extended-confirmed-protected|"
    r"move-protected|pending changes|fully protected|categories|maintenance|requested|"
    r"introduction cleanup|neutral point of view disputes|references cleanup|"
    r"list cleanup|expert|spam cleanup)\b",
    r"^Wikipedia:",
    r"^CS1\b",
    r"^Webarchive template\b",
    r"^Pages (?:using|with|containing|including|that|which|where|needing|to|in|displaying)\b",
    r"^Use (?:[A-Z][a-z]+ )+English\b",
    r"^Use (?:dmy|mdy|ymd) dates\b",
    r"^Short description\b",
    r"^Harv and Sfn\b",
    r"^Commons (?:category|link)\b",
    r"^Instances of\b",
    r"^Official website\b",
    r"^Coordinates (?:on|not on) Wikidata\b",
    r".Wikidata|Wikidata.",  # 'Coordinates on Wikidata', not the category 'Wikidata'
    r"^(?:Hidden|Tracking|Maintenance|Noindexed|Container) (?:categories|category|pages)\b",
    r"^Template:",
    r"^Redirects? (?:from|to|with)\b",
    r"^Good articles$",
    r"^Featured articles$",
    r"^Dead-end pages\b",
    r"^Orphaned articles\b",
    r"^Vague or ambiguous\b",
    r"^Accuracy disputes\b",
    r"^Self-contradictory\b",
    r"\barticles (?:needing|with incorrect|lacking|missing|requiring|with unsourced|"
    r"with dead)\b",  # 'Television channel articles with incorrect naming style'
    r" from " + _MONTH + r" \d{4}$",  # monthly clean-up categories
)
_MAINTENANCE = re.compile("|".join(f"(?:{p})" for p in MAINTENANCE_CATEGORY_PATTERNS))


def is_disambiguation_template(name: str) -> bool:
  """True for a disambiguation template name (lower case, single spaces, no 'Template:')."""
  if name in _NOT_DISAMBIGUATION:
    return False
  return name in DISAMBIGUATION_TEMPLATES or name.endswith(" disambiguation")


def is_disambiguation_category(name: str) -> bool:
  """True for a category that holds disambiguation pages ('All disambiguation pages',
  'Human name disambiguation pages', de 'Begriffsklärung', ...)."""
  return bool(_DISAMBIGUATION_CATEGORY.search(name)) or name.lower() in DISAMBIGUATION_CATEGORIES


def disambiguation_reason(parsed: wikitext.ParsedArticle, title: str) -> Optional[str]:
  """Why an article page is a disambiguation page, or None when it is not one.

  Args:
    parsed: the page rendered by wikitext.parse_article (its switches, templates, categories).
    title: the page's normalized title.

  Returns:
    BY_SWITCH ('__DISAMBIG__' written in the page), BY_TEMPLATE (a disambiguation template),
    BY_CATEGORY (a disambiguation category) or BY_TITLE ('X (disambiguation)'); None.
  """
  if DISAMBIGUATION_SWITCH in parsed.switches:
    return BY_SWITCH
  if any(is_disambiguation_template(name) for name in parsed.templates):
    return BY_TEMPLATE
  if any(is_disambiguation_category(name) for name in parsed.categories):
    return BY_CATEGORY
  if title.endswith(" " + DISAMBIGUATION_QUALIFIER):
    return BY_TITLE
  return None


def hidden_category_page(category_wikitext: str) -> bool:
  """True when a category page's wikitext hides the category: it writes '__HIDDENCAT__' (in
  text, not in a comment or <nowiki>) or calls a template that does (HIDDEN_CATEGORY_TEMPLATES,
  or a maintenance/tracking/Wikipedia category template with hidden=yes).

  Raises:
    mw_tree.UnclosedMarkupError: wikitext the tokenizer would take minutes or more on
      (mw_tree.check_unclosed); the extraction skips such a page and reports why.
  """
  if "__" not in category_wikitext and "{{" not in category_wikitext:
    return False
  mw_tree.check_unclosed(category_wikitext)
  code = mwparserfromhell.parse(category_wikitext, skip_style_tags=True)
  for node in code.filter(recursive=True, forcetype=mw_nodes.Text):
    if HIDDEN_CATEGORY_SWITCH in node.value:
      return True
  for template in code.filter_templates(recursive=True):
    name = " ".join(str(template.name).replace("_", " ").split()).lower()
    name = name.removeprefix("template:").strip()
    if name in HIDDEN_CATEGORY_TEMPLATES:
      return True
    if name in _HIDING_WITH_PARAMETER and template.has("hidden"):
      if str(template.get("hidden").value).strip().lower() in _YES:
        return True
  return False


def is_maintenance_category(name: str) -> bool:
  """True for a category name of a standard maintenance or tracking category
  (MAINTENANCE_CATEGORY_PATTERNS): 'All articles with dead external links', 'Articles with
  short description', 'Wikipedia articles needing clarification from May 2012', 'CS1 maint:
  archived copy as title', 'Webarchive template wayback links', 'Use dmy dates from March
  2019'. Used where the dump holds no page of the category."""
  return bool(_MAINTENANCE.search(name))
