"""benchmarks.channel_recall: weights parsing and the per-channel scan."""

import numpy as np
import pytest

from benchmarks import channel_recall


def test_weights_are_three_numbers_summing_to_one():
  assert channel_recall.parse_weights("0.4/0.25/0.35, 0.3/0.2/0.5") == [(0.4, 0.25, 0.35),
                                                                        (0.3, 0.2, 0.5)]
  assert channel_recall.parse_weights("") == []
  for bad in ("0.5/0.5", "0.5/0.5/0.5", "-0.1/0.6/0.5"):
    with pytest.raises(ValueError, match="--weights"):
      channel_recall.parse_weights(bad)


def test_each_channel_and_each_mix_picks_its_own_best_row():
  # 2-d learned part, 1-d context, 1-d name (trained weights 0.5 / 0.25 / 0.25, carried by the
  # stored encodings as sqrt(w) factors). Row 0 wins on the learned part, row 1 on the name.
  trained = (0.5, 0.25, 0.25)
  scale = np.sqrt([0.5, 0.5, 0.25, 0.25])
  rows = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 1.0, 0.0]]) * scale
  query = (np.array([[0.8, 0.0, 0.1, 0.6]]) * scale).astype(np.float32)
  slices = (slice(0, 2), slice(2, 3), slice(3, 4))
  best = channel_recall.scan(query, rows.astype(np.float16), slices,
                             [(0.2, 0.0, 0.8)], trained, block_rows=2)
  # full: 0.5*0.8=0.40 vs 0.25*0.6=0.15 vs 0.25*0.1 -> row 0; learned alone -> row 0;
  # context alone -> row 2; name alone -> row 1; name-heavy mix 0.2*0.8=0.16 vs 0.8*0.6=0.48.
  assert best[:, 0].tolist() == [0, 0, 2, 1, 1]
