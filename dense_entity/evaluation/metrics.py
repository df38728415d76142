"""Recall@k for entity retrieval, scored fairly against a KB (paper section 5, Tables 1 and 2).

Gillick et al. (2019) report recall@k: the fraction of mentions whose gold entity is among the
top k retrieved entities (R@1 is accuracy; R@100 measures candidate generation). Scoring here is
"fair" in three ways:

1. Gold and predicted titles pass through the same function, `resolve_title` (normalize as
   MediaWiki does, then follow the KB's redirects), so 'Silver_Owls', 'Owls (band)' and
   'The Silver Owls' compare equal when the redirects say so. Given a `titles.TitleResolver`
   instead of a redirect map, titles that differ from a KB title or redirect only in case or
   accents resolve to it too (the KB's matching key).
2. Mentions are partitioned, never dropped silently:
   - NIL: gold is a NIL label ('--NME--', 'NIL', '') -- reported apart, not scored;
   - unresolvable: the gold title normalizes to '' or its redirect chain loops or is too long;
   - missing from KB: the resolved gold title is not a KB entity;
   - in KB: everything else.
   `num_mentions` counts all non-NIL mentions (in KB + missing + unresolvable).
3. Two recalls: in-KB recall@k (over in-KB mentions; what a retriever can be blamed for) and
   overall recall@k (over all non-NIL mentions; missing and unresolvable gold are always misses).

A ranking is a list of predicted titles, best first. Predictions are resolved the same way, then
de-duplicated keeping the first occurrence (a redirect and its target are one entity), and
unresolvable predictions are skipped; the gold rank is its position in that de-duplicated list.
"""

from typing import Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

from dense_entity.kb.titles import TitleResolver, normalize_title, resolve_redirect

# A redirect map (normalized redirect title -> target) or a KB's TitleResolver.
Redirects = Union[Mapping[str, str], TitleResolver]

DEFAULT_KS = (1, 10, 100)
DEFAULT_NIL_LABELS = ("--NME--", "NIL", "")


def resolve_title(raw_title: str, redirects: Redirects) -> Optional[str]:
  """Normalizes a raw title and follows redirects: resolve_redirect(normalize_title(raw)).

  Args:
    raw_title: a title as found in a dataset or a ranking, e.g. 'Silver_Owls', 'Tabby%27s_star'.
    redirects: normalized redirect title -> normalized target title (one hop each); or a
      `titles.TitleResolver`, which also matches case and accent variants of KB titles.

  Returns:
    The normalized title of the page the chain ends at, or None when the title normalizes to ''
    or the redirect chain loops or exceeds `titles.MAX_REDIRECT_HOPS`.
  """
  if isinstance(redirects, TitleResolver):
    return redirects(raw_title)
  title = normalize_title(raw_title)
  if not title:
    return None
  return resolve_redirect(title, redirects)


def is_nil_label(raw_gold: Optional[str],
                 nil_labels: Sequence[str] = DEFAULT_NIL_LABELS) -> bool:
  """Whether a raw gold value means "no entity" (None, or a NIL label raw or normalized)."""
  return (raw_gold is None or raw_gold.strip() in nil_labels
          or normalize_title(raw_gold) in nil_labels)


class _Resolver:
  """Memoizes `resolve_title` for one scoring call (rankings repeat titles a lot)."""

  def __init__(self, redirects: Redirects):
    self._resolve = lambda raw: resolve_title(raw, redirects)
    self._cache: Dict[str, Optional[str]] = {}

  def __call__(self, raw_title: str) -> Optional[str]:
    try:
      return self._cache[raw_title]
    except KeyError:
      resolved = self._resolve(raw_title)
      self._cache[raw_title] = resolved
      return resolved


# Gold categories.
_NIL, _UNRESOLVABLE, _MISSING, _IN_KB = "nil", "unresolvable", "missing", "in_kb"


def _gold_ranks(rankings: Sequence[Sequence[str]], gold: Sequence[str], kb_titles: Set[str],
                redirects: Redirects,
                nil_labels: Sequence[str]) -> Tuple[List[str], List[Optional[int]]]:
  """Categorizes each mention and finds the 0-based rank of its gold entity.

  Returns:
    (categories, ranks): per mention one of _NIL/_UNRESOLVABLE/_MISSING/_IN_KB, and for in-KB
    mentions the gold rank among the de-duplicated resolved predictions (None when absent;
    None for every other category).

  Raises:
    ValueError: if `rankings` and `gold` differ in length or a ranking is a bare string.
  """
  if len(rankings) != len(gold):
    raise ValueError(f"{len(rankings)} rankings for {len(gold)} gold labels; expected one "
                     "ranking per mention")
  resolve = _Resolver(redirects)
  nil = set(nil_labels)
  categories, ranks = [], []
  for i, (ranking, raw_gold) in enumerate(zip(rankings, gold)):
    if isinstance(ranking, str):
      raise ValueError(f"ranking {i} is a string ({ranking!r}); expected a sequence of titles")
    if is_nil_label(raw_gold, nil):
      categories.append(_NIL)
      ranks.append(None)
      continue
    gold_title = resolve(raw_gold)
    if gold_title is None:
      categories.append(_UNRESOLVABLE)
      ranks.append(None)
      continue
    if gold_title not in kb_titles:
      categories.append(_MISSING)
      ranks.append(None)
      continue
    categories.append(_IN_KB)
    rank, seen = None, set()
    for raw_prediction in ranking:
      predicted = resolve(raw_prediction)
      if predicted is None or predicted in seen:
        continue
      if predicted == gold_title:
        rank = len(seen)
        break
      seen.add(predicted)
    ranks.append(rank)
  return categories, ranks


def score_rankings(rankings: Sequence[Sequence[str]], gold: Sequence[str], kb_titles: Set[str],
                   redirects: Redirects, ks: Sequence[int] = DEFAULT_KS,
                   nil_labels: Sequence[str] = DEFAULT_NIL_LABELS) -> Dict[str, float]:
  """Scores rankings against gold titles: in-KB and overall recall@k, with counts.

  Paper section 5 (recall@k, Tables 1-2). See the module docstring for the fairness rules.

  Args:
    rankings: per mention, predicted titles best first, `[mentions, (candidates)]`; raw titles
      are fine (normalized and redirect-resolved here).
    gold: per mention, the raw gold title, `[mentions]`, e.g. 'Silver_Owls' or '--NME--'.
    kb_titles: normalized titles of the KB's entities.
    redirects: normalized redirect title -> normalized target title (one hop each), or a
      `titles.TitleResolver` of the KB (then also case- and accent-insensitive).
    ks: cut-offs, positive ints.
    nil_labels: gold values meaning "no entity" (compared to the stripped raw and the
      normalized gold).

  Returns:
    {"num_mentions": non-NIL mentions, "num_in_kb", "num_gold_missing_from_kb", "num_nil",
     "num_unresolvable_gold" (ints), and for each k "recall@k" (in-KB, fraction in [0, 1]) and
     "overall_recall@k" (over all non-NIL mentions)}. Empty denominators give 0.0.

  Raises:
    ValueError: if lengths differ or a k is not a positive int.
  """
  for k in ks:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
      raise ValueError(f"recall cut-off k must be a positive int, got {k!r}")
  categories, ranks = _gold_ranks(rankings, gold, kb_titles, redirects, nil_labels)
  num_in_kb = categories.count(_IN_KB)
  num_missing = categories.count(_MISSING)
  num_unresolvable = categories.count(_UNRESOLVABLE)
  num_nil = categories.count(_NIL)
  num_mentions = num_in_kb + num_missing + num_unresolvable
  result: Dict[str, float] = {
      "num_mentions": num_mentions,
      "num_in_kb": num_in_kb,
      "num_gold_missing_from_kb": num_missing,
      "num_nil": num_nil,
      "num_unresolvable_gold": num_unresolvable,
  }
  for k in ks:
    hits = sum(1 for r in ranks if r is not None and r < k)
    result[f"recall@{k}"] = hits / num_in_kb if num_in_kb else 0.0
    result[f"overall_recall@{k}"] = hits / num_mentions if num_mentions else 0.0
  return result


def recall_curve(rankings: Sequence[Sequence[str]], gold: Sequence[str], kb_titles: Set[str],
                 redirects: Redirects, max_k: int = 100,
                 nil_labels: Sequence[str] = DEFAULT_NIL_LABELS) -> List[float]:
  """In-KB recall@k for k = 1..max_k (for a recall@k plot), same rules as `score_rankings`.

  Args:
    rankings, gold, kb_titles, redirects, nil_labels: as in `score_rankings`.
    max_k: the largest cut-off, a positive int.

  Returns:
    `[max_k]` floats in [0, 1], non-decreasing; element k-1 is in-KB recall@k (all 0.0 when no
    mention is in the KB).

  Raises:
    ValueError: if lengths differ or max_k < 1.
  """
  if isinstance(max_k, bool) or not isinstance(max_k, int) or max_k < 1:
    raise ValueError(f"max_k must be a positive int, got {max_k!r}")
  categories, ranks = _gold_ranks(rankings, gold, kb_titles, redirects, nil_labels)
  num_in_kb = categories.count(_IN_KB)
  hits_at = [0] * max_k  # hits_at[r] = in-KB mentions whose gold rank is exactly r
  for r in ranks:
    if r is not None and r < max_k:
      hits_at[r] += 1
  curve, cumulative = [], 0
  for count in hits_at:
    cumulative += count
    curve.append(cumulative / num_in_kb if num_in_kb else 0.0)
  return curve



def top1_outcomes(rankings: Sequence[Sequence[str]], gold: Sequence[str], kb_titles: Set[str],
                  redirects: Redirects, nil_labels: Sequence[str] = DEFAULT_NIL_LABELS
                  ) -> Tuple[List[bool], List[bool], List[bool]]:
  """Per mention: whether its gold is NIL, whether the top-1 prediction is its gold entity,
  and whether its (non-NIL) gold names no KB entity. For NIL prediction
  (evaluation.nil_calibration). Same resolution rules as `score_rankings`.

  Args:
    rankings, gold, kb_titles, redirects, nil_labels: as in `score_rankings`.

  Returns:
    (gold_nil, top1_correct, gold_not_in_kb), each `[mentions]` bools: gold_nil for a NIL
    label; gold_not_in_kb for a gold missing from the KB or unresolvable; top1_correct only for
    in-KB gold ranked first. At most one of the three is True for a mention.

  Raises:
    ValueError: if lengths differ.
  """
  categories, ranks = _gold_ranks(rankings, gold, kb_titles, redirects, nil_labels)
  return ([c == _NIL for c in categories], [r == 0 for r in ranks],
          [c in (_MISSING, _UNRESOLVABLE) for c in categories])
