"""The paper's retrieval baselines: alias table (AT-Prior, AT-Ext) and BM25 over titles.

Gillick et al. (2019), section 5.1 and Table 2:
- AT-Prior: an alias table built from Wikipedia anchor texts; a mention retrieves the entities
  its text was linked to, ranked by the prior P(e|m) = count(m, e) / count(m), top 100.
- AT-Ext: the alias table extended with the unigram and bigram aliases of the mention: when the
  full mention text misses (or gives few candidates), its word n-grams are looked up too.
- BM25: lexical retrieval of entity titles with the mention text as the query.

All three return `[(title, score)]` lists, best first, ties broken by title, so results are
deterministic; evaluation scores them with `metrics.score_rankings` on exactly the same mentions
as the dense model.
"""

import collections
import re
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

import bm25s
import numpy as np

from dense_entity.kb.titles import alias_key, normalize_title, resolve_redirect

# Count given to a redirect title as an alias of its target (added to any anchor counts).
REDIRECT_ALIAS_COUNT = 1

_WORD = re.compile(r"\w+", re.UNICODE)


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
    """Loads the alias counts written by extraction, plus redirects as aliases.

    Args:
      alias_counts_path: `alias_counts.tsv`, one `alias_key \\t entity title \\t count` line per
        (alias, entity) pair, counted over training anchors only. Entity titles are normalized
        and resolved through the redirects here too. Blank lines are skipped.
      redirects_path: optional `redirects.tsv`, `redirect title \\t resolved target` lines. Each
        redirect title becomes an alias of its (resolved) target with count
        `REDIRECT_ALIAS_COUNT` = 1, added to the anchor counts of that pair. Redirects that loop
        are skipped.

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
    for redirect, target in redirects.items():
      add(redirect, target, REDIRECT_ALIAS_COUNT, f"{redirects_path}")
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

  'Port Alder (harbor)' -> ['port', 'alder', 'harbor'].
  """
  return _WORD.findall(text.casefold())


class BM25Index:
  """BM25 over entity titles (paper section 5.1, the BM25 baseline), with `bm25s`.

  Uses bm25s's 'lucene' variant: idf = ln(1 + (N - n + 0.5) / (n + 0.5)), never negative, so a
  term in half or more of the titles still scores > 0 for the titles containing it; tf
  saturation k1 = 1.5 and length normalization b = 0.75 (bm25s defaults). Degenerate corpora are
  handled without dividing by zero: titles without any token can never match, and a corpus with
  no token at all returns [] for every query.
  """

  def __init__(self, entity_titles: Iterable[str], k1: float = 1.5, b: float = 0.75):
    """Indexes the titles.

    Args:
      entity_titles: entity titles (ids); duplicates are indexed once.
      k1: BM25 term-frequency saturation.
      b: BM25 length normalization in [0, 1].
    """
    self._titles: List[str] = list(dict.fromkeys(entity_titles))
    # Rank of each title in sorted order, to break score ties by title with numpy.
    order = sorted(range(len(self._titles)), key=self._titles.__getitem__)
    self._title_rank = np.empty(len(self._titles), dtype=np.int64)
    self._title_rank[order] = np.arange(len(self._titles))
    corpus = [tokenize(title) for title in self._titles]
    self._retriever: Optional[bm25s.BM25] = None
    if any(corpus):
      self._retriever = bm25s.BM25(method="lucene", k1=k1, b=b)
      self._retriever.index(corpus, show_progress=False)

  def __len__(self) -> int:
    """Number of indexed titles."""
    return len(self._titles)

  def scores(self, query: str) -> np.ndarray:
    """BM25 score of every indexed title for `query`, `[num_titles]` float32 (0 = no match)."""
    if self._retriever is None:
      return np.zeros(len(self._titles), dtype=np.float32)
    ids = self._retriever.get_tokens_ids([t for t in tokenize(query) if t])
    if not ids:
      return np.zeros(len(self._titles), dtype=np.float32)
    return np.asarray(self._retriever.get_scores_from_ids(ids), dtype=np.float32)

  def search(self, query: str, k: int = 100) -> List[Tuple[str, float]]:
    """Returns the top-k titles for the query (a mention's text), by BM25 score.

    Args:
      query: the query text; tokenized like the titles.
      k: number of results at most (>= 0).

    Returns:
      `[(title, score)]`, score descending, ties broken by title ascending; only titles with a
      score > 0 (a title sharing no token with the query is not returned). [] for an empty
      query, a query with no indexed token, or a corpus without tokens.
    """
    if k <= 0:
      return []
    scores = self.scores(query)
    candidates = np.flatnonzero(scores > 0)
    if candidates.size == 0:
      return []
    if candidates.size > k:
      # Keep every title scoring at least the k-th best score, so ties at the cut are broken
      # by title below rather than by array position.
      kth = np.partition(scores[candidates], candidates.size - k)[candidates.size - k]
      candidates = candidates[scores[candidates] >= kth]
    order = np.lexsort((self._title_rank[candidates], -scores[candidates]))
    top = candidates[order[:k]]
    return [(self._titles[i], float(scores[i])) for i in top]
