"""The model (paper section 4): the in-graph text featurizer, layers (bag-of-n-grams encoders,
compound encoders, the lexical context channel), the mention and entity towers, the tasks
(in-batch softmax, logistic hard-negative loss, in-batch recall and AUC) and the typed configs
with their presets.

May import: dense_entity.common, dense_entity.kb.
"""
