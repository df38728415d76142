"""Entry points print ordinary user errors as one line and exit 2 (dense_entity.common.errors)."""

import os
import subprocess
import sys

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
