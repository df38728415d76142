"""Entry points that write the model's artifacts into a workspace (WORKSPACE.md):
`python -m export.export_model` (encoder SavedModels), `export.encode_entities` (entity
encodings and indexes), `export.build_index` (indexes from an encodings file), `export.serving`
(the one-directory serving SavedModel), `export.tradeoff` (reports/tradeoff.json).

Each module holds flags and a `main` only; the work is done by dense_entity.serving,
dense_entity.retrieval and dense_entity.evaluation. May import: any dense_entity library
package; never beam_pipelines or another entry point.
"""
