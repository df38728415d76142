"""The paper's retrieval baselines: alias table (AT-Prior, AT-Ext) and BM25 over titles.

Gillick et al. (2019), section 5.1 and Table 2:
- AT-Prior: an alias table built from Wikipedia anchor texts; a mention retrieves the entities
  its text was linked to, ranked by the prior P(e|m) = count(m, e) / count(m), top 100. Only
  training anchors count, as in the paper.
- AT-Ext: the alias table extended with the unigram and bigram aliases of the mention: when the
  full mention text misses (or gives few candidates), its word n-grams are looked up too.
- BM25: lexical retrieval of entity titles with the mention text as the query; with the KB's
  redirects, their titles are documents of their target entities too (all Wikipedia titles).
Not in the paper, as built in common practice (e.g. REL, spaCy's KB):
- AT-Prior+TR: AT-Prior with every KB title and redirect title added as an alias of its entity
  (count 1 each, looked up case- and accent-insensitively), so entities that no training anchor
  names can be retrieved by their names.

All three return `[(title, score)]` lists, best first, ties broken by title, so results are
deterministic; evaluation scores them with `metrics.score_rankings` on exactly the same mentions
as the dense model.
"""

import collections
import logging
import re
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

import bm25s
import numpy as np

from dense_entity.kb import script_ranges
from dense_entity.kb.titles import alias_key, fold_text, normalize_title, resolve_redirect

# bm25s sets its own logger to DEBUG, so every BM25 build printed 'DEBUG:bm25s:Building index
# from tokens' through the entry points' log handler; its warnings still show.
logging.getLogger("bm25s").setLevel(logging.WARNING)

# Count given to a title or redirect title as an alias of its entity (AT-Prior+TR).
TITLE_ALIAS_COUNT = 1

# BM25 words, in the units of the featurizer and the mention contexts (kb/script_ranges.py): a
# run of word characters (\w: letters, digits, '_') with the combining marks and ZWJ/ZWNJ inside
# it, so an Indic word ('দার্শনিক') is one token, not cut at each vowel sign and virama; each
# Han ideograph is one token and each run of Hiragana or of Katakana is one, so a Japanese title
# without spaces ('日本語') is not one opaque token. Text without CJK or combining marks
# (English, Cyrillic, precomposed Greek and Latin) gives exactly the tokens of plain \w+.
_WORD = re.compile(script_ranges.py_word_pattern())


def _parse_count(value: str, where: str) -> int:
  try:
    count = int(value)
  except ValueError:
    raise ValueError(f"{where}: count {value!r} is not an integer") from None
  if count < 0:
    raise ValueError(f"{where}: count {count} is negative")
  return count


class AliasTable:
  """Alias table: alias key -> {entity title: anchor count} (paper section 5.1, AT-Prior).

  Keys are `titles.alias_key(mention text)` (case-folded, whitespace-collapsed); entities are
  normalized, redirect-resolved titles.
  """

  def __init__(self, counts: Mapping[str, Mapping[str, int]]):
    """Builds the table from counts.

    Args:
      counts: alias (any text; re-keyed with `alias_key`) -> {entity title: count >= 0}.
        Entries with the same key after re-keying are summed; zero counts are dropped.
    """
    table: Dict[str, Dict[str, int]] = collections.defaultdict(dict)
    for alias, entities in counts.items():
      key = alias_key(alias)
      if not key:
        continue
      for title, count in entities.items():
        if count > 0:
          table[key][title] = table[key].get(title, 0) + count
    self._counts: Dict[str, Dict[str, int]] = dict(table)
    self._totals: Dict[str, int] = {k: sum(v.values()) for k, v in self._counts.items()}

  @classmethod
  def from_tsv(cls, alias_counts_path: str,
               redirects_path: Optional[str] = None) -> "AliasTable":
    """Loads the alias counts written by extraction (training anchors only, paper 5.1).

    Args:
      alias_counts_path: `alias_counts.tsv`, one `alias_key \\t entity title \\t count` line per
        (alias, entity) pair, counted over training anchors only. Entity titles are normalized
        and resolved through the redirects here too. Blank lines are skipped.
      redirects_path: optional `redirects.tsv`, `redirect title \\t resolved target` lines,
        used to resolve the entity titles (not as aliases: see TitleAliases). Entities whose
        redirects loop are skipped.

    Returns:
      The table.

    Raises:
      ValueError: naming the file and line, for a line without exactly 3 (resp. 2) tab-separated
        fields, a non-integer or negative count, or an empty title.
      OSError: if a file cannot be read.
    """
    redirects = load_redirects(redirects_path) if redirects_path else {}
    counts: Dict[str, Dict[str, int]] = collections.defaultdict(dict)

    def add(alias: str, raw_title: str, count: int, where: str) -> None:
      title = normalize_title(raw_title)
      if not title:
        raise ValueError(f"{where}: empty entity title")
      title = resolve_redirect(title, redirects)
      if title is None:  # The target's redirect chain loops: nothing to retrieve.
        return
      entities = counts[alias]
      entities[title] = entities.get(title, 0) + count

    with open(alias_counts_path, encoding="utf-8") as f:
      for line_number, line in enumerate(f, 1):
        line = line.rstrip("\r\n")
        if not line.strip():
          continue
        where = f"{alias_counts_path}:{line_number}"
        fields = line.split("\t")
        if len(fields) != 3:
          raise ValueError(f"{where}: expected 3 tab-separated fields (alias, entity, count), "
                           f"got {len(fields)}")
        add(fields[0], fields[1], _parse_count(fields[2], where), where)
    return cls(counts)

  def __len__(self) -> int:
    """Number of distinct alias keys."""
    return len(self._counts)

  def counts(self, mention_text: str) -> Dict[str, int]:
    """Returns {entity title: anchor count} for alias_key(mention_text) ({} when absent)."""
    return dict(self._counts.get(alias_key(mention_text), {}))

  def at_prior(self, mention_text: str, k: int = 100) -> List[Tuple[str, float]]:
    """AT-Prior: the top-k entities of the mention text by prior P(e|m) (paper section 5.1).

    Args:
      mention_text: the mention span text; looked up as `alias_key(mention_text)`.
      k: number of candidates to return at most (>= 0).

    Returns:
      `[(title, P(e|m))]`, at most k, prior descending, ties broken by title ascending; [] when
      the alias is unknown. Priors of one alias sum to 1.
    """
    key = alias_key(mention_text)
    entities = self._counts.get(key)
    if not entities or k <= 0:
      return []
    total = self._totals[key]
    ranked = sorted(entities.items(), key=lambda item: (-item[1], item[0]))
    return [(title, count / total) for title, count in ranked[:k]]

  def at_ext(self, mention_text: str, k: int = 100) -> List[Tuple[str, float]]:
    """AT-Ext: AT-Prior extended with the mention's unigram and bigram aliases (section 5.1).

    Merging rule, in two tiers:
    1. the full mention's candidates, exactly as `at_prior` ranks them (score P(e|m));
    2. then the candidates of every word unigram and bigram of the mention (the words of
       `alias_key(mention_text)` split on whitespace; an n-gram equal to the full key is not
       looked up again): for each entity its anchor counts are summed over all those n-grams,
       and entities are ranked by that sum descending, ties by title; score = the entity's share
       of the summed n-gram counts, in (0, 1]. Entities already in tier 1 are not repeated.
    The list is truncated to k. Scores are comparable within a tier only; the list order (tier
    1 before tier 2) is the ranking.

    Args:
      mention_text: the mention span text.
      k: number of candidates to return at most (>= 0).

    Returns:
      `[(title, score)]`, at most k, in ranking order; [] when nothing matches.
    """
    if k <= 0:
      return []
    full = self.at_prior(mention_text, k)
    if len(full) >= k:
      return full
    key = alias_key(mention_text)
    words = key.split()
    ngrams = words + [" ".join(pair) for pair in zip(words, words[1:])]
    summed: Dict[str, int] = collections.defaultdict(int)
    for ngram in dict.fromkeys(ngrams):  # Each distinct n-gram once, in order.
      if ngram == key:
        continue
      for title, count in self._counts.get(ngram, {}).items():
        summed[title] += count
    seen = {title for title, _ in full}
    extra = [(t, c) for t, c in summed.items() if t not in seen]
    extra.sort(key=lambda item: (-item[1], item[0]))
    total = sum(c for _, c in extra)
    result = list(full)
    for title, count in extra[:k - len(full)]:
      result.append((title, count / total))
    return result


class TitleAliases:
  """Every KB title and redirect title as an alias of its entity (for AT-Prior+TR).

  Keys are `titles.fold_text` of the title (case- and accent-insensitive, so the folded titles
  of a Wikipedia-wide title list match mention spans with accents). Memory: one dict entry
  per distinct key (5.9M for all of English Wikipedia).

  Args:
    kb_titles: the KB's entity titles.
    redirects: redirect title -> entity title (redirects to titles outside the KB are skipped).
  """

  def __init__(self, kb_titles: Iterable[str], redirects: Mapping[str, str]):
    kb = kb_titles if isinstance(kb_titles, (set, frozenset)) else set(kb_titles)
    table: Dict[str, object] = {}

    def add(alias: str, title: str) -> None:
      key = fold_text(alias)
      old = table.get(key)
      if old is None:
        table[key] = title
      elif isinstance(old, str):
        if old != title:
          table[key] = (old, title)
      elif title not in old:
        table[key] = old + (title,)

    for title in sorted(kb):
      add(title, title)
    for redirect in sorted(redirects):
      target = redirects[redirect]
      if target in kb:
        add(redirect, target)
    self._table = table

  def __len__(self) -> int:
    return len(self._table)

  def entities(self, mention_text: str) -> Tuple[str, ...]:
    """The entities whose title or a redirect title folds to the mention text's key."""
    found = self._table.get(fold_text(mention_text), ())
    return (found,) if isinstance(found, str) else found


def at_prior_tr(alias_table: AliasTable, title_aliases: TitleAliases, mention_text: str,
                k: int = 100) -> List[Tuple[str, float]]:
  """AT-Prior+TR: anchor counts plus TITLE_ALIAS_COUNT for every entity the mention text names
  by title or redirect; ranked by the resulting prior, ties by title.

  Returns:
    `[(title, P(e|m))]`, at most k; [] when the text is neither an anchor nor a title.
  """
  if k <= 0:
    return []
  counts = alias_table.counts(mention_text)
  for title in title_aliases.entities(mention_text):
    counts[title] = counts.get(title, 0) + TITLE_ALIAS_COUNT
  if not counts:
    return []
  total = sum(counts.values())
  ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
  return [(title, count / total) for title, count in ranked[:k]]


def load_redirects(path: str) -> Dict[str, str]:
  """Reads `redirects.tsv` (`redirect title \\t resolved target` per line) into a dict.

  Both sides are normalized with `titles.normalize_title`. Blank lines are skipped.

  Returns:
    normalized redirect title -> normalized target title.

  Raises:
    ValueError: naming the file and line, for a line without exactly 2 tab-separated fields or
      with an empty title.
  """
  redirects: Dict[str, str] = {}
  with open(path, encoding="utf-8") as f:
    for line_number, line in enumerate(f, 1):
      line = line.rstrip("\r\n")
      if not line.strip():
        continue
      fields = line.split("\t")
      if len(fields) != 2:
        raise ValueError(f"{path}:{line_number}: expected 2 tab-separated fields (redirect, "
                         f"target), got {len(fields)}")
      source, target = normalize_title(fields[0]), normalize_title(fields[1])
      if not source or not target:
        raise ValueError(f"{path}:{line_number}: empty redirect or target title")
      if source != target:
        redirects[source] = target
  return redirects


def tokenize(text: str) -> List[str]:
  """BM25 tokens: lower-cased (case-folded) Unicode word tokens, no stemming or stop words.

  'Port Alder (harbor)' -> ['port', 'alder', 'harbor']; combining marks stay inside their word
  ('দার্শনিক' -> ['দার্শনিক']); Han ideographs one by one, kana runs whole ('東京タワー' ->
  ['東', '京', 'タワー']).
  """
  return _WORD.findall(text.casefold())


class BM25Index:
  """BM25 over entity titles (paper section 5.1, the BM25 baseline), with `bm25s`.

  Uses bm25s's 'lucene' variant: idf = ln(1 + (N - n + 0.5) / (n + 0.5)), never negative, so a
  term in half or more of the titles still scores > 0 for the titles containing it; tf
  saturation k1 = 1.5 and length normalization b = 0.75 (bm25s defaults). Degenerate corpora are
  handled without dividing by zero: titles without any token can never match, and a corpus with
  no token at all returns [] for every query. With `aliases`, each redirect title is one more
  document of its entity (all Wikipedia titles, as the issue of a Wikipedia-wide KB asks), and
  an entity is returned once, with its best document's score.
  """

  def __init__(self, entity_titles: Iterable[str], k1: float = 1.5, b: float = 0.75,
               aliases: Optional[Mapping[str, str]] = None):
    """Indexes the titles.

    Args:
      entity_titles: entity titles (ids); duplicates are indexed once.
      k1: BM25 term-frequency saturation.
      b: BM25 length normalization in [0, 1].
      aliases: optional redirect title -> entity title; redirects to titles outside
        `entity_titles` are skipped.
    """
    self._titles: List[str] = list(dict.fromkeys(entity_titles))
    entity_of = {t: i for i, t in enumerate(self._titles)}
    documents = list(self._titles)
    doc_entity = list(range(len(self._titles)))
    for alias, target in sorted((aliases or {}).items()):
      if target in entity_of and alias not in entity_of:
        documents.append(alias)
        doc_entity.append(entity_of[target])
    self._doc_entity = np.asarray(doc_entity, dtype=np.int64)
    # Rank of each title in sorted order, to break score ties by title with numpy.
    order = sorted(range(len(self._titles)), key=self._titles.__getitem__)
    self._title_rank = np.empty(len(self._titles), dtype=np.int64)
    self._title_rank[order] = np.arange(len(self._titles))
    corpus = [tokenize(doc) for doc in documents]
    self._retriever: Optional[bm25s.BM25] = None
    if any(corpus):
      self._retriever = bm25s.BM25(method="lucene", k1=k1, b=b)
      self._retriever.index(corpus, show_progress=False)

  def __len__(self) -> int:
    """Number of indexed documents (titles and redirect titles)."""
    return len(self._doc_entity)

  def scores(self, query: str) -> np.ndarray:
    """BM25 score of every indexed document for `query`, `[num_documents]` float32 (0 = no
    match); documents 0..num_titles-1 are the entity titles, in order."""
    if self._retriever is None:
      return np.zeros(len(self._doc_entity), dtype=np.float32)
    ids = self._retriever.get_tokens_ids([t for t in tokenize(query) if t])
    if not ids:
      return np.zeros(len(self._doc_entity), dtype=np.float32)
    return np.asarray(self._retriever.get_scores_from_ids(ids), dtype=np.float32)

  def search(self, query: str, k: int = 100) -> List[Tuple[str, float]]:
    """Returns the top-k entities for the query (a mention's text), by BM25 score.

    Args:
      query: the query text; tokenized like the titles.
      k: number of results at most (>= 0).

    Returns:
      `[(title, score)]`, score descending, ties broken by title ascending, each entity once
      (its best document); only documents with a score > 0. [] for an empty query, a query
      with no indexed token, or a corpus without tokens.
    """
    if k <= 0:
      return []
    scores = self.scores(query)
    candidates = np.flatnonzero(scores > 0)
    if candidates.size == 0:
      return []
    # Best score per entity.
    entities = self._doc_entity[candidates]
    best = np.full(len(self._titles), -np.inf, dtype=np.float32)
    np.maximum.at(best, entities, scores[candidates])
    candidates = np.unique(entities)
    entity_scores = best[candidates]
    if candidates.size > k:
      # Keep every entity scoring at least the k-th best score, so ties at the cut are broken
      # by title below rather than by array position.
      kth = np.partition(entity_scores, candidates.size - k)[candidates.size - k]
      keep = entity_scores >= kth
      candidates, entity_scores = candidates[keep], entity_scores[keep]
    order = np.lexsort((self._title_rank[candidates], -entity_scores))
    top = candidates[order[:k]]
    return [(self._titles[i], float(best[i])) for i in top]
