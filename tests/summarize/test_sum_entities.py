"""extract_entities: the names an agent needs again, and no plain English."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.summarize.entities import extract_entities, extract_entities_by_kind


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Edit /testbed/django/db/backends/client.py now.", {"/testbed/django/db/backends/client.py"}),
        ("see src/contextfold/summarize/llm.py:120", {"src/contextfold/summarize/llm.py"}),
        ("open setup.py and the Makefile", {"setup.py", "Makefile"}),
        ("fetch https://github.com/django/django/pull/13614.", {"https://github.com/django/django/pull/13614"}),
        ("run tests/test_api.py::TestClient::test_get", {"tests/test_api.py::TestClient::test_get"}),
        ("It raised ValueError and then KeyboardInterrupt", {"ValueError", "KeyboardInterrupt"}),
        ("call runshell_db() on DatabaseClient", {"runshell_db", "DatabaseClient"}),
        ("uses os.environ.get for it", {"os.environ.get"}),
        ("flight HAT136 from JFK, user mia_li_3668", {"HAT136", "JFK", "mia_li_3668"}),
        ("paid $250 on 2024-05-20, took 3.5 s, 12 GB, v1.2.3", {"$250", "2024-05-20", "3.5 s", "12 GB", "v1.2.3"}),
        ("pass --no-cache to it", {"--no-cache"}),
        ("mail mia.li3818@example.com", {"mia.li3818@example.com"}),
        ("the `sslrootcert` option", {"sslrootcert"}),
    ],
)
def test_examples(text: str, expected: set[str]) -> None:
    assert extract_entities(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Let's look at the code and fix the bug, e.g. the one in the 20th line, i.e. and/or yes/no.",
        "I will now run it. It works! Great, the change is minimal.",
        "</parameter>\n</function>",
        "line one\\nPython is great",
    ],
)
def test_prose_has_no_entities(text: str) -> None:
    assert extract_entities(text) == set()


def test_a_path_claims_its_parts() -> None:
    kinds = extract_entities_by_kind("/srv/app/models/user_profile.py")
    assert kinds["path"] == ["/srv/app/models/user_profile.py"]
    assert kinds["identifier"] == [] and kinds["id"] == []


def test_kinds_keep_first_appearance_order() -> None:
    kinds = extract_entities_by_kind("b_two then a_one then b_two")
    assert kinds["identifier"] == ["b_two", "a_one"]


segment = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
prose = st.lists(st.sampled_from(["the", "fix", "is", "in", "then", "run", "ok", "and", "we", "see"]), max_size=8)


@settings(max_examples=150, deadline=None)
@given(st.lists(segment, min_size=1, max_size=5), st.sampled_from(["py", "js", "md", "toml"]), prose, prose,
       st.sampled_from([" ", "\n", "\t", " (", " '"]), st.sampled_from([" ", ".", ",", ")", "'", ":12"]))
def test_any_absolute_path_in_prose_is_found_whole(parts: list[str], ext: str, before: list[str],
                                                   after: list[str], left: str, right: str) -> None:
    path = "/" + "/".join(parts) + "." + ext
    text = " ".join(before) + left + path + right + " " + " ".join(after)
    found = extract_entities(text)
    assert path in found
    assert not any(e != path and e in path for e in found)  # no fragments of it
