"""The knowledge base and its records: entity ids (normalized titles), redirects and alias keys,
the record schema shared by Beam and tf.data, mention features built from a text and a span,
reading the extraction's TFRecords, and the KB's redirects as context-free training mentions
(redirect_examples).

May import: dense_entity.common.
"""
