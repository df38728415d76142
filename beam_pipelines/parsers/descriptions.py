"""Entity descriptions: a line of the descriptions JSONL ({"title", "text", ...} per line)."""

import json
from typing import Optional, Tuple

from dense_entity.kb import titles


def parse_description_line(line: str) -> Optional[Tuple[str, str]]:
  """A JSONL line {"title", "text", ...} -> (normalized title, text with whitespace collapsed).

  Returns:
    None for a blank line; otherwise (title, text), where title is '' when the "title" value
    normalizes to nothing and text is '' when "text" is missing or empty.

  Raises:
    ValueError: the line is not JSON.
    KeyError: the object has no "title".
    TypeError: the line is JSON but not an object.
  """
  if not line.strip():
    return None
  record = json.loads(line)
  title = titles.normalize_title(str(record["title"]))
  text = " ".join(str(record.get("text") or "").split())
  return title, text
