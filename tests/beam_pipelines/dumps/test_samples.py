"""Tests of beam_pipelines.dumps.samples: the packaged default input is a readable dump."""

import itertools

import pytest

from beam_pipelines.dumps import samples
from beam_pipelines.dumps import xml_dump


def test_gensim_sample_is_a_dump():
  pytest.importorskip("gensim")
  path = samples.gensim_sample_path()
  assert path.endswith(samples.GENSIM_SAMPLE)
  pages = list(itertools.islice(xml_dump.iter_pages(path), 3))
  assert len(pages) == 3 and all(page.title for page in pages)
