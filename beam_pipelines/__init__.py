"""Batch jobs (Apache Beam) that turn MediaWiki dumps into the model's training data.

Library packages, bottom layer first (README "Architecture"); each imports only its own package,
the layers below it and the dense_entity library, never an entry point:
  dumps      reading MediaWiki XML dumps: pages, multistream indexes and byte ranges, the
             packaged sample dump
  parsers    pure functions, no Beam: link and redirect targets (namespaces), the wikitext
             renderer, mentions with their features, description lines, title and redirect
             lists, the extraction's records and their tf.train.Examples
  pipelines  the Beam graphs (extraction with its KB merge, hard negative mining) and the Beam
             pieces they share
Entry points (flags and `main` only, over beam_pipelines.pipelines):
  `python -m beam_pipelines.extract_wikipedia`    dumps -> entities, mentions, alias counts
  `python -m beam_pipelines.mine_hard_negatives`  hard negative pairs from an exported model
"""

import logging as _logging


class _DropBigQueryClientWarning(_logging.Filter):
  """Drops the warning Beam logs on import, through the root logger, that its BigQuery client
  libraries are missing ('apitools not found, ...'): nothing here reads BigQuery, and every
  command printed it as its first line."""

  def filter(self, record: _logging.LogRecord) -> bool:
    return not (record.name == "root" and record.getMessage().startswith("apitools not found"))


_logging.getLogger().addFilter(_DropBigQueryClientWarning())

# The compiled builds of beam_pipelines.parsers (setup.py), taken only while they match their
# source (dense_entity.common.compiled); installed before any of them is imported.
from dense_entity.common import compiled as _compiled  # pylint: disable=g-import-not-at-top

_compiled.install()
