"""Training the dual encoder under any tf.distribute strategy (paper section 4.2-4.3): the
trainer with its step functions, checkpointing and evaluation hooks, lazy sparse optimizers,
GloVe initialisation and the strategy factory.

May import: dense_entity.common, dense_entity.kb, dense_entity.modeling.
"""
