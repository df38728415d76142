"""Dense entity retrieval: the dual encoder of Gillick et al. (CoNLL 2019), "DEER"."""

__version__ = "0.1.0"
