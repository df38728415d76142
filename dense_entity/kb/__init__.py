"""The knowledge base and its records: entity ids (normalized titles), redirects and alias keys,
the record schema shared by Beam and tf.data, mention features built from a text and a span,
and reading the extraction's TFRecords.

May import: dense_entity.common.
"""
