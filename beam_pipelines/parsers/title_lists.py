"""Lines of title lists and redirect lists, the knowledge-base sources beside the dumps.

- A title list holds one main-namespace title per line, as Wikimedia's `all-titles-in-ns0`
  files do (underscores for spaces; a first line 'page_title' is their header), or as
  lower-cased, accent-folded lists such as DBpedia's resource names ('jurgen_klinsmann').
- A redirect list holds `redirect title <TAB> target title` per line (the same spellings).
No Beam here; the extraction (beam_pipelines.pipelines.extraction) reads the files and merges
them into the KB by dense_entity.kb.titles.match_key (beam_pipelines.pipelines.kb_merge).
"""

from typing import Optional, Tuple

from dense_entity.kb import titles

# The header line of Wikimedia's all-titles-in-ns0 files.
TITLE_LIST_HEADER = "page_title"


class TitleListError(ValueError):
  """A line of a title or redirect list that cannot be read (the message quotes it)."""


def parse_title_line(line: str) -> Optional[str]:
  """A title-list line -> the normalized title ('jurgen_klinsmann' -> 'Jurgen klinsmann').

  Returns:
    None for a blank line or the 'page_title' header.

  Raises:
    TitleListError: the line holds a tab (a redirect list given as a title list?) or a title
      that normalizes to nothing.
  """
  line = line.rstrip("\r\n")
  if not line.strip() or line == TITLE_LIST_HEADER:
    return None
  if "\t" in line:
    raise TitleListError(f"a title line holds a tab (is this a redirect list?): {line[:100]!r}")
  title = titles.normalize_title(line)
  if not title:
    raise TitleListError(f"the title normalizes to nothing: {line[:100]!r}")
  return title


def parse_redirect_line(line: str) -> Optional[Tuple[str, str]]:
  """A redirect-list line 'redirect<TAB>target' -> (normalized redirect, normalized target).

  Returns:
    None for a blank line.

  Raises:
    TitleListError: not exactly two tab-separated fields, or a title that normalizes to
      nothing.
  """
  line = line.rstrip("\r\n")
  if not line.strip():
    return None
  fields = line.split("\t")
  if len(fields) != 2:
    raise TitleListError(f"expected 'redirect<TAB>target', got {len(fields)} field(s): "
                         f"{line[:100]!r}")
  redirect, target = titles.normalize_title(fields[0]), titles.normalize_title(fields[1])
  if not redirect or not target:
    raise TitleListError(f"a title normalizes to nothing: {line[:100]!r}")
  return redirect, target
