"""Tests of beam_pipelines.parsers.descriptions: one line of the descriptions JSONL."""

import pytest

from beam_pipelines.parsers import descriptions


def test_title_normalized_and_text_whitespace_collapsed():
  line = '{"title": "lake_Fen", "text": "  Lake Fen is\\na  shallow lake. ", "topic": "x"}'
  assert descriptions.parse_description_line(line) == ("Lake Fen",
                                                        "Lake Fen is a shallow lake.")


def test_missing_text_and_empty_title():
  assert descriptions.parse_description_line('{"title": "Zug"}') == ("Zug", "")
  assert descriptions.parse_description_line('{"title": "Zug", "text": null}') == ("Zug", "")
  assert descriptions.parse_description_line('{"title": " _ "}') == ("", "")


def test_blank_and_bad_lines():
  assert descriptions.parse_description_line("  \n") is None
  with pytest.raises(ValueError):
    descriptions.parse_description_line("not json")
  with pytest.raises(KeyError):
    descriptions.parse_description_line('{"text": "no title"}')
  with pytest.raises(TypeError):
    descriptions.parse_description_line('["Zug"]')
