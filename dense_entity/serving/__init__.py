"""The towers as SavedModels that take raw strings (featurization in the graph): exporting a
trained DualEncoder's mention and entity encoders, and loading them in any process.

May import: dense_entity.common, dense_entity.kb, dense_entity.modeling.
"""
