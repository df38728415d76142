"""Measuring retrieval (paper section 5): evaluation datasets (AIDA, JSONL, NIF, Wikinews; and
their linked mentions as training examples, labeled_mentions),
recall@k with title resolution, the baselines (alias table AT-Prior / AT-Ext, BM25), the
evaluator and its reports and plots, fitting the NIL calibrator and NIL metrics
(nil_calibration), context probes, and the index speed / recall trade-off.

May import: dense_entity.common, dense_entity.kb, dense_entity.modeling, dense_entity.serving,
dense_entity.retrieval.
"""
