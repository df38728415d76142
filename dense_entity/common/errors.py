"""One-line errors for the command-line entry points.

An ordinary user error (a missing or unfinished input, a file of the wrong format, a flag value
out of range) raises FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError,
PermissionError or ValueError with a message that names the file or record. The entry points
(`python -m dense_entity.train`, `.evaluate`, `export.*`, `beam_pipelines.*`) print that
message as one line and exit with status 2, as `dense-entity link` does, instead of a
traceback; DENSE_ENTITY_TRACEBACK=1 keeps the traceback. Any other exception (a bug) keeps its
traceback.

A run stopped by Ctrl-C (SIGINT) or SIGTERM (a scheduler or `kill` stopping the job) ends the
same way for both: KeyboardInterrupt raised where the run is, so every `finally` and `except`
on the way out runs (a stage's temporary output directory removed, a worker pool shut down;
SIGTERM's default exit ran none of them), then one line naming the signal and exit status
128 + its number (130, 143), instead of a traceback (Beam re-raises it from a step as a
RuntimeError naming the step).
"""

import _thread
import contextlib
import functools
import logging
import os
import signal
import sys
import threading
import time
import traceback
from typing import Callable, Iterator, List, Optional

USER_ERRORS = (FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError,
               PermissionError, ValueError)
USER_ERROR_STATUS = 2
TRACEBACK_ENV = "DENSE_ENTITY_TRACEBACK"


INTERRUPT_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def interrupts_raise() -> Iterator[List[int]]:
  """Within the block, SIGINT and SIGTERM raise KeyboardInterrupt (SIGTERM's default ends the
  process at once, no cleanup run); yields the list of the signals received, in order. The
  previous handlers come back at the block's end. Outside the main thread (where no handler
  can be set) nothing changes. Once a signal was received, log records carrying the
  KeyboardInterrupt (Beam logs a step's exception with its traceback) are dropped by the root
  logger's handlers."""
  received: List[int] = []

  def interrupt(signum, frame):
    del frame
    received.append(signum)
    raise KeyboardInterrupt(signal.Signals(signum).name)

  def not_the_interrupt(record: logging.LogRecord) -> bool:
    # Beam logs a step's exception with its traceback before re-raising it ('SIGTERM [while
    # running ...]'): for the interrupt, the run's one line says it.
    return not (received and record.exc_info
                and isinstance(record.exc_info[1], KeyboardInterrupt))

  def unraisable(info) -> None:
    # Python ignores an exception raised where it cannot propagate (a callback it runs after
    # a fork in this process, such as logging's lock release, when a worker pool forks; a
    # __del__): an interrupt raised there was lost and the run went on to its end. It is
    # raised again, from a thread, in the main thread's next bytecode instead.
    if received and isinstance(info.exc_value, KeyboardInterrupt):
      threading.Thread(target=_interrupt_main_soon, args=(received[-1],), daemon=True).start()
      return
    previous_hook(info)

  previous = {}
  previous_hook = sys.unraisablehook
  if threading.current_thread() is threading.main_thread():
    previous = {signum: signal.signal(signum, interrupt) for signum in INTERRUPT_SIGNALS}
    sys.unraisablehook = unraisable
  handlers = list(logging.getLogger().handlers)
  for handler in handlers:
    handler.addFilter(not_the_interrupt)
  try:
    yield received
  finally:
    for handler in handlers:
      handler.removeFilter(not_the_interrupt)
    for signum, handler in previous.items():
      signal.signal(signum, handler)
    if previous:
      sys.unraisablehook = previous_hook


def _interrupt_main_soon(signum: int) -> None:
  """Signals `signum` to the main thread once it is likely past the code that ignored it (what
  interrupts_raise's unraisable hook starts; if it lands in such code again, the hook starts
  another)."""
  time.sleep(0.01)
  _thread.interrupt_main(signum)


def interrupted_line(program: str, signum: int, note: Optional[str] = None) -> str:
  """'PROGRAM: error: interrupted (SIGTERM)[; NOTE]': what an interrupted run prints."""
  return (f"{program}: error: interrupted ({signal.Signals(signum).name})"
          + (f"; {note}" if note else ""))


# Where Beam's state samplers live (a sampler's class is defined there: statesampler.StateSampler).
_BEAM_STATE_SAMPLER_MODULE = "apache_beam.runners.worker.statesampler"


def stop_left_state_samplers() -> int:
  """Stops the threads of Beam state samplers (one per bundle, sampling its time) that an
  interrupt left running; returns how many.

  Beam 2.x's StateSampler.start starts its sampling thread (not a daemon) before it marks
  itself started, and a bundle's end stops only a started sampler: a KeyboardInterrupt raised
  between the two (SIGTERM or Ctrl-C, interrupts_raise) left a thread that nothing stopped, and
  the interpreter's exit waited for it forever (a SIGTERM test's extraction printed its one line
  and never exited). Found by their threads' targets; nothing is imported from Beam.
  """
  stopped = 0
  for thread in threading.enumerate():
    sampler = getattr(getattr(thread, "_target", None), "__self__", None)
    if (sampler is not None
        and type(sampler).__module__.startswith(_BEAM_STATE_SAMPLER_MODULE)
        and not getattr(sampler, "finished", True)):
      sampler.stop()
      stopped += 1
  return stopped


def interrupted_status(received: List[int], error: BaseException, program: str,
                       note: Optional[str] = None, traceback_env: bool = False
                       ) -> Optional[int]:
  """For `error` ending a run within interrupts_raise (`received`: its signals): when a signal
  was received, whatever the interrupt became (Beam re-raises it as another exception) except
  an exit, prints interrupted_line to stderr (after the traceback with `traceback_env` and
  TRACEBACK_ENV=1) and returns 128 + the first signal's number; else None (the error is not
  the interrupt's). Beam state samplers the interrupt left running are stopped
  (stop_left_state_samplers), so that the process can exit."""
  if not received or isinstance(error, SystemExit):
    return None
  stop_left_state_samplers()
  if traceback_env and os.environ.get(TRACEBACK_ENV) == "1":
    traceback.print_exc()
  print(interrupted_line(program, received[0], note), file=sys.stderr)
  return 128 + received[0]


def one_line_errors(main: Callable, program: str,
                    interrupted_note: Optional[str] = None) -> Callable:
  """Wraps an absl `main(argv)`: a USER_ERRORS exception prints `PROGRAM: error: MESSAGE` to
  stderr and exits with USER_ERROR_STATUS (2); SIGINT or SIGTERM during `main` prints
  interrupted_line(PROGRAM, signal, interrupted_note) and exits with 128 + the signal's
  number (interrupted_status; the module docstring). `interrupted_note`: what the interrupted run leaves (e.g. the
  extraction's: the finished extraction in place)."""

  @functools.wraps(main)
  def wrapped(argv):
    with interrupts_raise() as received:
      try:
        return main(argv)
      except BaseException as e:  # pylint: disable=broad-except
        status = interrupted_status(received, e, program, interrupted_note,
                                    traceback_env=True)
        if status is not None:
          sys.exit(status)
        if not isinstance(e, USER_ERRORS):
          raise
        if os.environ.get(TRACEBACK_ENV) == "1":
          traceback.print_exc()
        message = " ".join(str(e).split()) or type(e).__name__
        print(f"{program}: error: {message}", file=sys.stderr)
        sys.exit(USER_ERROR_STATUS)

  return wrapped
