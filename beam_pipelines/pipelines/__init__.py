"""The Beam graphs (batch jobs) and the Beam pieces they share.

  extraction  MediaWiki dumps -> entities, train/held-out mentions, alias counts, redirects
              (DoFns, the ExtractWikipedia PTransform, build_pipeline, run; paper section 5)
  kb_merge    every KB source (pages, link targets, descriptions, title and redirect lists)
              -> one entity per matching key, by joins (MergeKnowledgeBase)
  mining      hard negative mining with an exported model (build_pipeline, run; paper
              section 4.3)
  beam_io     shared pieces: deterministic sharded TFRecord and TSV writers, default
              PipelineOptions (DirectRunner), reading counters from a pipeline result

Each graph is built by `build_pipeline(pipeline, ...)` (tests pass a TestPipeline) and run by
`run(...)`, which publishes its outputs atomically. Flags live in the entry points
beam_pipelines.extract_wikipedia and beam_pipelines.mine_hard_negatives.

May import: beam_pipelines.dumps, beam_pipelines.parsers and any dense_entity library package;
never an entry point.
"""
