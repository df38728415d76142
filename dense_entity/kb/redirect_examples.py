"""Redirects as training examples: every (redirect title -> entity) pair of the KB becomes a
mention without context whose gold is that entity.

Gillick et al. (2019) train on anchors alone (112.7M of them, section 3). At our scale most
entities of a Wikipedia-wide KB are linked by no training anchor (4.4M title-only entities of
the full-KB workspace against ~38k anchors), so the span-to-title mapping of the towers is
learned on a few thousand entities. A redirect is a name that Wikipedia's editors resolved to
an entity ('Brain cancer' -> 'Brain tumor', 'ANOVA' -> 'Analysis of variance'): a labeled
mention with no context. These examples are a separate split of training
(`Trainer.set_labeled_mentions(..., name='redirects')`), drawn at a chosen fraction of the
batches, so their effect is measured apart. Measured on the full-KB workspace (README, "Redirects as
training mentions"): a quarter of the batches of them lowers in-KB recall@1 by 5-7 points on
every evaluation set, with or without the span among the aliases, so training does not use
them unless asked.

Example features (kb.schema): MENTION_SPAN is the redirect title; MENTION_LEFT and MENTION_RIGHT
are empty; MENTION_SENTENCE is the bare MENTION_MASK (the sentence of a context-free span); the
entity features are the target's record, with the redirect used as the span left out of its
ENTITY_ALIASES, so that the example teaches span -> title/text matching rather than copying
the alias through the name channel (modeling.layers name channel).
"""

import collections
from typing import Dict, Iterable, List, Tuple

import numpy as np

from dense_entity.kb import records
from dense_entity.kb import schema

# Keys of every example, as evaluation.labeled_mentions and Trainer.set_labeled_mentions use.
EXAMPLE_KEYS = tuple(records.MENTION_SPEC)
SOURCE = b"redirect"
_BATCH = 8192
_SEPARATOR = schema.CATEGORY_SEPARATOR.encode("utf-8")


def sample_pairs(batches: Iterable[Dict[str, np.ndarray]], max_examples: int, seed: int
                 ) -> Tuple[List[tuple], collections.Counter]:
  """Draws up to `max_examples` (redirect, entity) pairs uniformly from entity batches.

  Priority sampling without weights: every pair gets one uniform random key and the pairs
  with the smallest keys are kept, so every pair is equally likely and the result depends
  only on `seed` and the order of `batches`. Memory holds at most ~2 x `max_examples` pairs.

  Args:
    batches: dicts of `[batch]` bytes arrays with the ENTITY_FEATURES names, aliases
      '|'-joined (records.entity_dataset as numpy).
    max_examples: the most pairs kept, >= 1.
    seed: seed of the draw.

  Returns:
    (pairs, counts): pairs as (redirect, title, text, categories, the other redirects
    '|'-joined, all the entity's redirects '|'-joined) in random order; counts of 'entities', 'entities_with_redirects', 'redirects'.
  """
  rng = np.random.default_rng(seed)
  counts = collections.Counter()
  keys = np.empty(0, np.float64)
  kept: List[tuple] = []  # aligned with keys

  def prune(keys, kept):
    if len(kept) <= max_examples:
      return keys, kept
    order = np.argpartition(keys, max_examples - 1)[:max_examples]
    return keys[order], [kept[i] for i in order]

  for batch in batches:
    titles = batch[schema.ENTITY_TITLE]
    aliases = batch[schema.ENTITY_ALIASES]
    counts["entities"] += len(titles)
    with_aliases = np.flatnonzero(aliases != b"")
    counts["entities_with_redirects"] += len(with_aliases)
    new_kept = []
    for i in with_aliases:
      names = aliases[i].split(_SEPARATOR)
      counts["redirects"] += len(names)
      for j, name in enumerate(names):
        new_kept.append((name, titles[i], batch[schema.ENTITY_TEXT][i],
                         batch[schema.ENTITY_CATEGORIES][i],
                         _SEPARATOR.join(names[:j] + names[j + 1:]), aliases[i]))
    if new_kept:
      keys = np.concatenate([keys, rng.random(len(new_kept))])
      kept.extend(new_kept)
      if len(kept) > 2 * max_examples:
        keys, kept = prune(keys, kept)
  keys, kept = prune(keys, kept)
  return [kept[i] for i in np.argsort(keys, kind="stable")], counts


def load(extract_dir: str, max_examples: int = 200_000, seed: int = 0,
         hold_out_span: bool = True) -> Tuple[Dict[str, List[bytes]], Dict[str, int]]:
  """Up to `max_examples` (redirect, entity) pairs drawn uniformly from the KB's entities.

  One streaming pass over the entity records (memory bounded by ~2 x `max_examples` pairs,
  not by the KB: the full-KB workspace has 1.28M pairs over 4.47M entities; ~75 s on 2
  cores), drawn by `sample_pairs`.

  Args:
    extract_dir: a finished extraction (its entity records carry the aliases).
    max_examples: the most pairs returned, >= 1.
    seed: seed of the draw.
    hold_out_span: leave the redirect used as the span out of the entity's aliases (the
      module docstring); False keeps every alias, as the entity's encoding at inference has.

  Returns:
    (examples, stats): examples maps every EXAMPLE_KEYS name to a list of `[num_used]` bytes
    values, in random order (SOURCE_PAGE is b'redirect', MENTION_ID b'redirect:N'); stats
    counts 'entities', 'entities_with_redirects', 'redirects' (pairs in the KB), 'used' and
    'distinct_entities'.

  Raises:
    ValueError: when `max_examples` < 1, or when no entity of the KB has a redirect (nothing
      to train on), naming the extraction.
    FileNotFoundError: when `extract_dir` holds no entity records.
  """
  if max_examples < 1:
    raise ValueError(f"max_examples must be >= 1, got {max_examples}")
  files = records.record_files(extract_dir, schema.ENTITIES_PREFIX)
  kept, counts = sample_pairs(records.entity_dataset(files, _BATCH).as_numpy_iterator(),
                              max_examples, seed)
  if not kept:
    raise ValueError(f"no entity of the KB in {extract_dir} has a redirect "
                     f"({counts['entities']} entities); nothing to train on")
  examples: Dict[str, List[bytes]] = {key: [] for key in EXAMPLE_KEYS}
  mask = schema.MENTION_MASK.encode("utf-8")
  for n, (alias, title, text, categories, others, every) in enumerate(kept):
    examples[schema.MENTION_SPAN].append(alias)
    examples[schema.MENTION_LEFT].append(b"")
    examples[schema.MENTION_RIGHT].append(b"")
    examples[schema.MENTION_SENTENCE].append(mask)
    examples[schema.ENTITY_TITLE].append(title)
    examples[schema.ENTITY_TEXT].append(text)
    examples[schema.ENTITY_CATEGORIES].append(categories)
    examples[schema.ENTITY_ALIASES].append(others if hold_out_span else every)
    examples[schema.SOURCE_PAGE].append(SOURCE)
    examples[schema.MENTION_ID].append(b"redirect:%d" % n)
  stats = {k: counts[k] for k in ("entities", "entities_with_redirects", "redirects")}
  stats["used"] = len(kept)
  stats["distinct_entities"] = len(set(examples[schema.ENTITY_TITLE]))
  return examples, stats
