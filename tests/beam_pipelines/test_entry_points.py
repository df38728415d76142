"""The Beam entry points on the command line: a misspelt flag is an error naming it (exit 2),
and nothing is written (issue 14, item 2)."""

import glob
import os
import signal
import subprocess
import sys
import time

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("module, args, flag, suggestion", [
    ("beam_pipelines.extract_wikipedia", ["--input={inputs}/dump.xml", "--title=titles.txt"],
     "--title", "--titles"),
    ("beam_pipelines.mine_hard_negatives",
     ["--export_dir={inputs}", "--index_dir={inputs}", "--extract_dir={inputs}",
      "--indexkind=ah_tree"], "--indexkind", "--index_kind"),
])
def test_misspelt_flag_exits_2_naming_it_and_writes_nothing(tmp_path, module, args, flag,
                                                            suggestion):
  # A user types '--title=' for '--titles=' (or '--indexkind' for '--index_kind'): Beam would
  # have dropped it as an unknown pipeline option and run without it.
  inputs = tmp_path / "inputs"
  inputs.mkdir()
  (inputs / "dump.xml").write_text("<mediawiki><page><title>A</title><ns>0</ns><id>1</id>"
                                   "<revision><text>A.</text></revision></page></mediawiki>\n")
  out = tmp_path / "out"
  command = [sys.executable, "-m", module, f"--output_dir={out}"]
  command += [a.format(inputs=inputs) for a in args]
  proc = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=False,
                        timeout=300)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert f"{flag} (did you mean {suggestion}?)" in proc.stderr
  assert not out.exists()


def _dump(tmp_path):
  inputs = tmp_path / "inputs"
  inputs.mkdir()
  dump = inputs / "dump.xml"
  dump.write_text("<mediawiki><page><title>A</title><ns>0</ns><id>1</id>"
                  "<revision><text>A.</text></revision></page></mediawiki>\n")
  return dump


def _run_extraction(*args):
  proc = subprocess.run([sys.executable, "-m", "beam_pipelines.extract_wikipedia", *args],
                        cwd=REPO_ROOT, capture_output=True, text=True, check=False, timeout=300)
  assert proc.returncode == 2, proc.stderr[-2000:]
  assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
  return proc.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("flag, message", [
    ("--num_shards=-3", "flag --num_shards=-3: -3 is not a positive integer"),
    ("--num_shards=0", "flag --num_shards=0: 0 is not a positive integer"),
    ("--multistream_range_mb=-1", "--multistream_range_mb must be > 0"),
])
def test_a_flag_out_of_range_is_refused_at_parsing(tmp_path, flag, message):
  # --num_shards=-3 wrote 'entities--0001-of--0003.tfrecord' files, exit 0.
  out = tmp_path / "out"
  line = _run_extraction(f"--input={_dump(tmp_path)}", f"--output_dir={out}", flag)
  assert line.startswith("python -m beam_pipelines.extract_wikipedia: error: "), line
  assert message in line, line
  assert not out.exists()


def test_an_output_dir_that_is_a_file_is_one_line_before_any_work(tmp_path):
  # It exited 1 with two tracebacks (NotADirectoryError on .staging-...).
  a_file = tmp_path / "out.txt"
  a_file.write_text("keep")
  line = _run_extraction(f"--input={_dump(tmp_path)}", f"--output_dir={a_file}")
  assert line == (f"python -m beam_pipelines.extract_wikipedia: error: --output_dir={a_file} is "
                  "a file, not a directory; give a new or empty directory for an extraction, "
                  "or one that already holds an extraction")
  assert a_file.read_text() == "keep"


def test_another_stages_output_dir_is_refused_and_left_as_it_was(tmp_path):
  # --output_dir=WS/reports: the extraction was written among the reports.
  reports = tmp_path / "reports"
  reports.mkdir()
  (reports / "eval.json").write_text("{}\n")
  (reports / "eval.md").write_text("# DEER\n")
  line = _run_extraction(f"--input={_dump(tmp_path)}", f"--output_dir={reports}")
  assert line.startswith(f"python -m beam_pipelines.extract_wikipedia: error: "
                         f"--output_dir={reports} holds evaluation reports (eval.json"), line
  assert sorted(os.listdir(reports)) == ["eval.json", "eval.md"]
  assert (reports / "eval.md").read_text() == "# DEER\n"


def test_sigterm_ends_a_run_in_one_line_and_leaves_the_finished_extraction(tmp_path):
  # A scheduler stopping the job (SIGTERM) left the run's staging directory behind with the
  # default exit (143, no cleanup), and Ctrl-C printed Beam's wrapped KeyboardInterrupt as a
  # traceback of ~120 lines: both now end like a failed run, the staging directory removed and
  # one line naming the signal, exit 128 + its number.
  from beam_pipelines.pipelines import extraction  # pylint: disable=g-import-not-at-top
  real = sorted(glob.glob(os.path.join(REPO_ROOT, "..", "shared", "data", "enwiki", "*.bz2")))
  if not real:
    pytest.skip("../shared/data/enwiki not available")
  out = tmp_path / "out"
  extraction.run([str(_dump(tmp_path))], str(out), heldout_fraction=0.0)
  before = {name: (out / name).read_bytes() for name in os.listdir(out)}
  proc = subprocess.Popen(
      [sys.executable, "-m", "beam_pipelines.extract_wikipedia", f"--input={','.join(real)}",
       f"--output_dir={out}"], cwd=REPO_ROOT, stdout=subprocess.DEVNULL,
      stderr=subprocess.PIPE, text=True)
  deadline = time.time() + 120
  while not [n for n in os.listdir(out) if n.startswith(".staging-")]:
    assert proc.poll() is None and time.time() < deadline, "the run never staged anything"
    time.sleep(0.05)
  time.sleep(0.5)  # into the pipeline (the 7 dumps take seconds)
  proc.send_signal(signal.SIGTERM)
  stderr = proc.communicate(timeout=120)[1]
  assert proc.returncode == 128 + signal.SIGTERM, stderr[-3000:]
  assert stderr.strip().splitlines()[-1] == (
      "python -m beam_pipelines.extract_wikipedia: error: interrupted (SIGTERM); a finished "
      "extraction in --output_dir is left as it was (unless the run was publishing: then it "
      "holds no MANIFEST.json; run again)")
  assert not [n for n in os.listdir(out) if n.startswith(".staging-")]
  assert {name: (out / name).read_bytes() for name in os.listdir(out)} == before


def test_importing_the_pipelines_logs_no_bigquery_client_warning():
  # Beam warned on every command that its BigQuery client libraries were missing ('apitools
  # not found'); the project reads no BigQuery. Other root warnings still show.
  proc = subprocess.run(
      [sys.executable, "-c", "import logging\nimport beam_pipelines.pipelines.extraction\n"
       "logging.warning('another warning')"], cwd=REPO_ROOT, capture_output=True, text=True,
      check=True, timeout=300)
  assert "apitools" not in proc.stderr
  assert "another warning" in proc.stderr
