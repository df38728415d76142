"""Publishing a finished output directory in place of an older one."""

import os
import shutil
import uuid


def replace_directory(finished_dir: str, directory: str) -> None:
  """Moves the complete `finished_dir` to `directory`, replacing what was there.

  The old directory is renamed aside first and deleted only after the new one is in place, so
  `directory` never holds a half-written or half-deleted artifact. Both paths must be on one
  filesystem (`finished_dir` is normally a temporary sibling of `directory`).
  """
  backup = None
  if os.path.exists(directory):
    backup = f"{directory}.old-{uuid.uuid4().hex[:8]}"
    os.rename(directory, backup)
  os.rename(finished_dir, directory)
  if backup:
    shutil.rmtree(backup, ignore_errors=True)
