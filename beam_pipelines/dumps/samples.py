"""Paths of the sample dumps that installed packages ship (the default input of the demo)."""

import os

GENSIM_SAMPLE = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def gensim_sample_path() -> str:
  """Path of gensim's packaged Wikipedia sample (106 articles, 99 redirects).

  Raises:
    FileNotFoundError: when gensim (or its test data) is not installed.
  """
  import gensim  # pylint: disable=g-import-not-at-top
  path = os.path.join(os.path.dirname(gensim.__file__), "test", "test_data", GENSIM_SAMPLE)
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path}: gensim's Wikipedia sample is not installed; "
                            "pass --input=GLOB")
  return path
