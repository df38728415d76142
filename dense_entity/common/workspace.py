"""Paths of a workspace: one directory holding every stage's artifacts (WORKSPACE.md)."""

import os


class Workspace:
  """Paths of a workspace laid out as WORKSPACE.md describes."""

  def __init__(self, root: str):
    self.root = root
    self.extract = os.path.join(root, "extract")
    self.model = os.path.join(root, "model")
    self.export = os.path.join(root, "export")
    self.index = os.path.join(root, "index")
    self.reports = os.path.join(root, "reports")
