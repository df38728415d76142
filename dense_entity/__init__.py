"""Dense entity retrieval: the dual encoder of Gillick et al. (CoNLL 2019), "DEER".

Library packages, bottom layer first (README "Architecture"); each imports only its own package
and the layers below it, and never an entry point:
  common      workspace paths, atomic file publishing, JSONL reading
  kb          the knowledge base and its records: titles, redirects, record schema, mention
              features, reading the extraction's TFRecords
  modeling    featurizer, layers, towers (models), tasks (losses and metrics), configs
  training    trainer (steps, checkpointing, evaluation hooks), optimizers, strategies
  serving     the towers as SavedModels (raw strings in): export and load
  retrieval   entity encodings, brute-force / ScaNN indexes, the retriever, the serving model
  evaluation  datasets, metrics, baselines, the evaluator and its reports, probes, trade-off
Entry points (the only modules that may import across dense_entity/beam_pipelines/export):
`cli` (the `dense-entity` command), `demo`, `train`, `evaluate`, `context_probes`.
"""

__version__ = "0.1.0"

# Compiled builds (setup.py) of the hot pure-Python modules, taken only while they match their
# source (common.compiled); installed before any of them is imported.
from dense_entity.common import compiled as _compiled  # pylint: disable=g-import-not-at-top

_compiled.install()
