"""The Beam entry points on the command line: a misspelt flag is an error naming it (exit 2),
and nothing is written (issue 14, item 2)."""

import os
import subprocess
import sys

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
