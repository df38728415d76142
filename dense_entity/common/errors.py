"""One-line errors for the command-line entry points.

An ordinary user error (a missing or unfinished input, a file of the wrong format, a flag value
out of range) raises FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError,
PermissionError or ValueError with a message that names the file or record. The entry points
(`python -m dense_entity.train`, `.evaluate`, `export.*`, `beam_pipelines.*`) print that
message as one line and exit with status 2, as `dense-entity link` does, instead of a
traceback; DENSE_ENTITY_TRACEBACK=1 keeps the traceback. Any other exception (a bug) keeps its
traceback.
"""

import functools
import os
import sys
import traceback
from typing import Callable

USER_ERRORS = (FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError,
               PermissionError, ValueError)
USER_ERROR_STATUS = 2
TRACEBACK_ENV = "DENSE_ENTITY_TRACEBACK"


def one_line_errors(main: Callable, program: str) -> Callable:
  """Wraps an absl `main(argv)`: a USER_ERRORS exception prints `PROGRAM: error: MESSAGE` to
  stderr and exits with USER_ERROR_STATUS (2)."""

  @functools.wraps(main)
  def wrapped(argv):
    try:
      return main(argv)
    except USER_ERRORS as e:
      if os.environ.get(TRACEBACK_ENV) == "1":
        traceback.print_exc()
      message = " ".join(str(e).split()) or type(e).__name__
      print(f"{program}: error: {message}", file=sys.stderr)
      sys.exit(USER_ERROR_STATUS)

  return wrapped
