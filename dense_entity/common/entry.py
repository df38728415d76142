"""Running a command-line entry point: quiet native logs, `--help` that exits 0, one-line errors.

Every absl entry point (`python -m dense_entity.train`, `.evaluate`, `.context_probes`,
`export.*`, `beam_pipelines.*`) ends with `entry.run(main, "python -m MODULE")`, which

- sets TF_CPP_MIN_LOG_LEVEL (`quiet_native_logs`) unless the environment sets it, so a CPU run
  prints no native INFO/WARNING lines and no error-level CUDA line;
- answers `--help` / `-h` / `-?` / `--helpshort` (the module's flags) and `--helpfull` (every
  flag) on stdout with exit status 0, before `main` and before anything heavy is imported
  (absl itself exits with status 1 after help);
- parses the flags with `one_line_flags_parser`: a bad, unknown or missing flag is one line
  and status 2 (absl exits 1);
- runs `main` under absl's `app.run`, with user errors printed as one line and status 2,
  and Ctrl-C or SIGTERM ending the run through its cleanup with one line and status 130 or
  143 (errors.one_line_errors).

Entry points import TensorFlow inside `main` (or call `quiet_native_logs` before importing it),
so the log level applies and `--help` does not load TensorFlow.
"""

import os
import sys
from typing import Callable, List, MutableMapping, Optional, Sequence

# Where an NVIDIA driver shows itself (Linux, WSL2). Without one, TensorFlow can use no GPU.
_NVIDIA_DRIVER_PATHS = ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/dxg")
LOG_LEVEL_ENV = "TF_CPP_MIN_LOG_LEVEL"
SHORT_HELP = ("--help", "-help", "-h", "-?", "--helpshort", "-helpshort")
FULL_HELP = ("--helpfull", "-helpfull")


def has_nvidia_driver(paths: Sequence[str] = _NVIDIA_DRIVER_PATHS) -> bool:
  """Whether the machine has an NVIDIA driver (one of `paths` exists)."""
  return any(os.path.exists(p) for p in paths)


def quiet_native_logs(environ: Optional[MutableMapping[str, str]] = None,
                      gpu_driver: Optional[bool] = None) -> str:
  """Sets TensorFlow's native log level, unless `environ` sets it; call before TF loads.

  Level 3 (no INFO, WARNING or ERROR lines) on a machine without an NVIDIA driver: there
  TensorFlow's CUDA platform logs 'failed call to cuInit' at error level on every start, and
  problems reach the user as Python exceptions anyway. Level 2 (errors shown) where a driver
  is present, so GPU problems stay visible. TF_CPP_MIN_LOG_LEVEL=0 shows everything.

  Args:
    environ: the environment to change (default os.environ).
    gpu_driver: whether a driver is present (default: has_nvidia_driver()).

  Returns:
    The level in effect.
  """
  environ = os.environ if environ is None else environ
  if LOG_LEVEL_ENV not in environ:
    driver = has_nvidia_driver() if gpu_driver is None else gpu_driver
    environ[LOG_LEVEL_ENV] = "2" if driver else "3"
  return environ[LOG_LEVEL_ENV]


def help_requested(argv: Sequence[str]) -> Optional[str]:
  """'short' or 'full' when the arguments (before any '--') ask for help, else None."""
  for arg in argv:
    if arg == "--":
      return None
    if arg in FULL_HELP:
      return "full"
    if arg in SHORT_HELP:
      return "short"
  return None


def print_help(kind: str) -> None:
  """Writes the main module's docstring and flags (kind 'short': its own flags; 'full': every
  flag) to stdout, as absl's --help and --helpfull do."""
  from absl import app  # pylint: disable=g-import-not-at-top
  app.usage(shorthelp=kind == "short", writeto_stdout=True)
  if kind == "short":
    print("\nTry --helpfull to get a list of all flags.")


def one_line_flags_parser(program: str,
                          known_only: bool = False) -> Callable[[List[str]], List[str]]:
  """An app.run flags_parser: a bad, unknown or missing required flag is one line on stderr,
  '{program}: error: ...' (absl's own 'Did you mean' suggestion included), and exit status 2,
  as argparse does; absl's default parser exits 1 after a 'FATAL Flags parsing error' line.

  Args:
    program: how the user runs it (prefix of the error line).
    known_only: parse only this program's flags and return argv[0] and the rest (e.g. Beam
      pipeline options, checked by their own parser); else an unknown flag is an error.
  """

  def parse(argv: List[str]) -> List[str]:
    from absl import flags  # pylint: disable=g-import-not-at-top
    try:
      return flags.FLAGS(argv, known_only=known_only)
    except flags.Error as e:
      message = " ".join(str(e).split("\n"))
      print(f"{program}: error: {message}", file=sys.stderr)
      sys.exit(2)

  return parse


def known_flags_parser(program: str) -> Callable[[List[str]], List[str]]:
  """one_line_flags_parser(program, known_only=True): for entry points that pass the flags
  they do not define on to Beam."""
  return one_line_flags_parser(program, known_only=True)


def run(main: Callable, program: str, flags_parser: Optional[Callable] = None,
        argv: Optional[Sequence[str]] = None,
        environ: Optional[MutableMapping[str, str]] = None,
        interrupted_note: Optional[str] = None):
  """Runs an absl `main(argv)` as the entry point `program` (see the module docstring).

  Args:
    main: the absl main function.
    program: how the user runs it, e.g. 'python -m dense_entity.train' (prefix of one-line
      errors).
    flags_parser: passed to app.run (e.g. known_flags_parser, to pass unknown flags on to
      Beam); default one_line_flags_parser(program): every flag must be this program's.
    argv: the command line (default sys.argv).
    environ: the environment (default os.environ).
    interrupted_note: what a run stopped by Ctrl-C or SIGTERM leaves, said on its one line
      (errors.one_line_errors).

  Raises:
    SystemExit: 0 after help; 2 after a bad flag or a user error; 130 or 143 after Ctrl-C or
      SIGTERM.
  """
  quiet_native_logs(environ)
  argv = list(sys.argv if argv is None else argv)
  kind = help_requested(argv[1:])
  if kind:
    print_help(kind)
    sys.exit(0)
  from absl import app  # pylint: disable=g-import-not-at-top
  from dense_entity.common import errors  # pylint: disable=g-import-not-at-top
  app.run(errors.one_line_errors(main, program, interrupted_note), argv=argv,
          flags_parser=flags_parser or one_line_flags_parser(program))
