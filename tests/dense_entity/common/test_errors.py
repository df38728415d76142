"""Entry points print ordinary user errors as one line and exit 2 (dense_entity.common.errors)."""

import logging
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from dense_entity.common import errors
from tests import testutil


def test_a_user_error_is_one_line_and_status_2(capsys):
  def main(argv):
    raise FileNotFoundError(f"/data/{argv[1]}: missing\n  (second line)")

  with pytest.raises(SystemExit) as exit_info:
    errors.one_line_errors(main, "prog")(["prog", "x.tsv"])
  assert exit_info.value.code == 2
  assert capsys.readouterr().err == "prog: error: /data/x.tsv: missing (second line)\n"


def test_a_bug_keeps_its_traceback():
  def main(argv):
    raise KeyError("bug")

  with pytest.raises(KeyError):
    errors.one_line_errors(main, "prog")(["prog"])


@pytest.mark.parametrize("module,args", [
    ("dense_entity.evaluate", ["--workspace=/nonexistent/ws"]),
    ("export.export_model", ["--model_dir=/nonexistent/model", "--export_dir=/nonexistent/e"]),
])
def test_entry_points_print_the_missing_input_without_a_traceback(module, args):
  proc = subprocess.run([sys.executable, "-m", module, *args], cwd=testutil.REPO_ROOT,
                        capture_output=True, text=True, check=False,
                        env={**os.environ, errors.TRACEBACK_ENV: "0"})
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert "Traceback" not in proc.stderr
  last = proc.stderr.strip().splitlines()[-1]
  assert last.startswith(f"python -m {module}: error: /nonexistent/")


@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_an_interrupted_run_cleans_up_and_is_one_line(capsys, tmp_path, signum, status):
  # SIGTERM's default exit ran no cleanup (a stage's temporary directory stayed behind), and
  # Ctrl-C printed a traceback (from Beam, a RuntimeError naming the step).
  partial = tmp_path / ".partial"

  def main(argv):
    del argv
    partial.mkdir()
    try:
      os.kill(os.getpid(), signum)
      time.sleep(10)  # the handler raises here
    finally:
      partial.rmdir()

  before = signal.getsignal(signal.SIGTERM)
  with pytest.raises(SystemExit) as exit_info:
    errors.one_line_errors(main, "prog", interrupted_note="DIR left as it was")(["prog"])
  assert exit_info.value.code == status
  assert capsys.readouterr().err == (
      f"prog: error: interrupted ({signal.Signals(signum).name}); DIR left as it was\n")
  assert not partial.exists()
  assert signal.getsignal(signal.SIGTERM) is before  # handlers restored after the run


def test_an_interrupt_re_raised_as_another_error_is_still_the_interrupt(capsys):
  # Beam re-raises a step's KeyboardInterrupt as a RuntimeError; a user-error type it might
  # become is not reported as the user's error.
  def main(argv):
    del argv
    try:
      os.kill(os.getpid(), signal.SIGTERM)
      time.sleep(10)
    except KeyboardInterrupt as e:
      raise ValueError("while running 'Step'") from e

  with pytest.raises(SystemExit) as exit_info:
    errors.one_line_errors(main, "prog")(["prog"])
  assert exit_info.value.code == 143
  assert capsys.readouterr().err == "prog: error: interrupted (SIGTERM)\n"


def test_the_demo_command_ends_in_one_line_on_sigterm(capsys, monkeypatch):
  from dense_entity import cli  # pylint: disable=g-import-not-at-top

  def kb(args, stdout=None):
    del args, stdout
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(10)

  monkeypatch.setattr(cli, "_kb", kb)
  assert cli.main(["kb", "status", "--workspace", "/nonexistent/ws"]) == 143
  assert capsys.readouterr().err.splitlines()[-1] == (
      "dense-entity kb: error: interrupted (SIGTERM)")


def test_a_step_logging_the_interrupt_is_not_printed(capsys):
  # Beam logs a step's exception with its traceback ('SIGTERM [while running ...]') before it
  # re-raises it: 18-21 lines before the run's one line. Other records still pass.
  records = []
  handler = logging.Handler()
  handler.emit = records.append
  logging.getLogger().addHandler(handler)

  def main(argv):
    del argv
    logging.getLogger("a.step").error("before the interrupt")
    try:
      os.kill(os.getpid(), signal.SIGTERM)
      time.sleep(10)
    except KeyboardInterrupt:
      logging.getLogger("a.step").exception("SIGTERM [while running 'Step']")
      logging.getLogger("a.step").error("after it, no traceback")
      raise

  try:
    with pytest.raises(SystemExit):
      errors.one_line_errors(main, "prog")(["prog"])
  finally:
    logging.getLogger().removeHandler(handler)
  assert [r.getMessage() for r in records] == ["before the interrupt", "after it, no traceback"]
  assert capsys.readouterr().err == "prog: error: interrupted (SIGTERM)\n"
  assert not handler.filters  # the filter goes with the run


def test_an_interrupt_python_ignores_is_raised_again(monkeypatch):
  """A SIGTERM whose KeyboardInterrupt was raised where Python ignores exceptions (here a
  callback it runs after a fork in this process, as logging's is; an extraction's worker pool
  forks) was lost: the run went on to its end and published. It is raised again in the main
  thread's code that runs on, and the original hook still gets other unraisable errors."""
  calls = []
  monkeypatch.setattr(sys, "unraisablehook", lambda info: calls.append(info.exc_type))
  os.register_at_fork(after_in_parent=lambda: _AFTER_FORK[0]())
  _AFTER_FORK[0] = lambda: time.sleep(0.3)  # the signal comes while this runs
  try:
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
      with errors.interrupts_raise() as received:
        threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGTERM)).start()
        pid = os.fork()
        if pid == 0:
          os._exit(0)  # pylint: disable=protected-access
        os.waitpid(pid, 0)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
          pass
    assert received and received[0] == signal.SIGTERM
    assert calls == []  # the interrupt did not reach the previous hook
  finally:
    _AFTER_FORK[0] = lambda: None
  assert sys.unraisablehook is not None and calls == []


_AFTER_FORK = [lambda: None]


def test_a_beam_state_sampler_an_interrupt_left_running_is_stopped(capsys):
  """A SIGTERM test's extraction printed its one line and never exited: its KeyboardInterrupt
  landed in Beam's StateSampler.start after the sampling thread (not a daemon) started and
  before the sampler was marked started, so the bundle's end did not stop it and the
  interpreter's exit waited for it. The interrupted ending stops it."""
  from apache_beam.runners.worker import statesampler  # pylint: disable=g-import-not-at-top
  from apache_beam.utils import counters  # pylint: disable=g-import-not-at-top
  sampler = statesampler.StateSampler("interrupted", counters.CounterFactory())
  # What the interrupt left: the base class's start (the thread) without `started` set.
  super(statesampler.StateSampler, sampler).start()
  thread = next(t for t in threading.enumerate()
                if getattr(getattr(t, "_target", None), "__self__", None) is sampler)
  try:
    assert thread.is_alive() and not thread.daemon and not sampler.started
    sampler.stop_if_still_running()  # what the bundle's end does: nothing, not started
    assert thread.is_alive()
    status = errors.interrupted_status([signal.SIGTERM], KeyboardInterrupt(), "prog")
    assert status == 128 + signal.SIGTERM
    thread.join(timeout=5)
    assert not thread.is_alive() and sampler.finished
    assert capsys.readouterr().err.strip() == "prog: error: interrupted (SIGTERM)"
    assert errors.stop_left_state_samplers() == 0  # none left
  finally:
    if not sampler.finished:  # this test's process must still be able to exit
      sampler.stop()
