"""Compares two extraction output directories file by file (issue 17, item 1: byte-identical).

Every output file of beam_pipelines.extract_wikipedia (TFRecord shards, alias_counts.tsv,
redirects.tsv, stats.json) must be byte-identical in both directories; MANIFEST.json must be
equal except for the run's wall-clock times ('started', 'finished'), which differ by nature.
Run an extraction with the old code and with the new one on the same input, then:

  python -m benchmarks.compare_extractions BEFORE_DIR AFTER_DIR [BEFORE_DIR AFTER_DIR ...]

Prints one line per file (sha256 prefix, size, 'equal' or what differs) and exits 1 when any
pair differs, 2 when an argument is not a directory (nothing compared).
"""

import hashlib
import json
import os
import sys
from typing import List, Sequence, Tuple

# MANIFEST.json keys that hold the run's own times, not its outputs.
_MANIFEST_TIME_KEYS = ("started", "finished")


def _sha256(path: str) -> str:
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def compare_dirs(before: str, after: str) -> Tuple[bool, List[str]]:
  """(all equal, report lines) for two extraction output directories."""
  lines = []
  ok = True
  names_before = sorted(n for n in os.listdir(before) if not n.startswith("."))
  names_after = sorted(n for n in os.listdir(after) if not n.startswith("."))
  if names_before != names_after:
    ok = False
    lines.append(f"  file lists differ: only before {sorted(set(names_before) - set(names_after))}"
                 f", only after {sorted(set(names_after) - set(names_before))}")
  for name in sorted(set(names_before) & set(names_after)):
    a, b = os.path.join(before, name), os.path.join(after, name)
    if name == "MANIFEST.json":
      with open(a, encoding="utf-8") as f:
        ma = json.load(f)
      with open(b, encoding="utf-8") as f:
        mb = json.load(f)
      for key in _MANIFEST_TIME_KEYS:
        ma.pop(key, None)
        mb.pop(key, None)
      same = ma == mb
      diff = "" if same else " keys " + ",".join(
          sorted(k for k in set(ma) | set(mb) if ma.get(k) != mb.get(k)))
      lines.append(f"  {name:<45} {'equal (but started/finished)' if same else 'DIFFERS' + diff}")
    else:
      ha, hb = _sha256(a), _sha256(b)
      same = ha == hb
      lines.append(f"  {name:<45} {os.path.getsize(a):>10} B {ha[:12]} "
                   f"{'equal' if same else 'DIFFERS: after ' + hb[:12]}")
    ok = ok and same
  return ok, lines


def main(argv: Sequence[str]) -> int:
  if any(a in ("-h", "--help", "--helpfull") for a in argv):
    print(__doc__)
    return 0
  if len(argv) < 2 or len(argv) % 2:
    print(__doc__)
    return 2
  missing = [d for d in argv if not os.path.isdir(d)]
  if missing:
    print(f"not a directory: {', '.join(missing)}", file=sys.stderr)
    return 2
  all_ok = True
  for before, after in zip(argv[::2], argv[1::2]):
    ok, lines = compare_dirs(before, after)
    print(f"{before} vs {after}: {'ALL EQUAL' if ok else 'DIFFERENT'}")
    print("\n".join(lines))
    all_ok = all_ok and ok
  return 0 if all_ok else 1


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
