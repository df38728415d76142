"""Nearest-neighbour entity retrieval (paper section 5.2): encoding the KB's entities (one row
per entity, plus a name row per alias), brute-force and ScaNN (AH, AH + tree) indexes with
their build summaries, the `EntityRetriever` API (mention markup in, ranked entities out; NIL below a
calibrated probability, nil) and the one-directory serving SavedModel.

May import: dense_entity.common, dense_entity.kb, dense_entity.modeling, dense_entity.serving.
"""
