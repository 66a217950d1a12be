"""Refs the model writes into a retrieval call: another session's, forged, overlong (red team 16).

Held on 309338f: another session's ref and every forged spelling (``..``, an absolute path, upper case, Cyrillic
and fullwidth lookalikes, a newline or a space around it) answer "no cached tool output" and read nothing. Broke: a
made-up ref up to the arguments' cap (65,536 characters) was echoed whole in the answer, which goes into the view
(the model's own garbage, twice the tokens); a ``ref_id`` that is no string was echoed as its repr. Now at most 64
characters of it are repeated, and a wrong type is named by its type.
"""

from __future__ import annotations

import json

import pytest

from contextfold import ContextManager
from contextfold.serve.retrieval import answer
from contextfold.stores import open_blob_store

NONCE = "rt16-refs-Pw4x"
READ, GREP = "tool_output_cache", "tool_output_cache_grep"


@pytest.fixture(name="sessions")
def sessions_fixture() -> tuple[ContextManager, ContextManager, str]:
    store = open_blob_store("memory")
    a = ContextManager("gpt-4o-mini", max_context_tokens=6_000, store=store, archive="memory", session_id="rt16-a")
    b = ContextManager("gpt-4o-mini", max_context_tokens=6_000, store=store, archive="memory", session_id="rt16-b")
    assert a.cache is not None
    return a, b, a.cache.put(f"{NONCE} output of session a\n" * 50).id


def _forgeries(ref: str) -> list[str]:
    return [ref, f"../{ref}", f"/tmp/{ref}", ref.upper(), ref.replace("e", "\u0435").replace("a", "\u0430"),
            "tout_" + "\uff10" * 16, f"{ref}\n", f" {ref}", f"{ref}*"]


def test_another_sessions_ref_and_its_forgeries_read_nothing(sessions: tuple[ContextManager, ContextManager, str],
                                                            ) -> None:
    a, b, ref = sessions
    assert NONCE in answer(a, READ, json.dumps({"ref_id": ref}), "c0")
    for forged in _forgeries(ref):
        for tool, args in ((READ, {"ref_id": forged}), (GREP, {"pattern": NONCE, "ref_id": forged})):
            text = answer(b, tool, json.dumps(args), "c1")
            assert text.startswith("error: no cached tool output with ref"), (forged, text)
            assert "output of session a" not in text
    assert "0 cached output" in answer(b, GREP, json.dumps({"pattern": NONCE}), "c2")


@pytest.mark.parametrize("tool", [READ, GREP])
def test_a_made_up_ref_is_not_echoed_whole(sessions: tuple[ContextManager, ContextManager, str], tool: str) -> None:
    _, b, _ = sessions
    made_up = "tout_" + "9" * 60_000
    args = {"ref_id": made_up} if tool == READ else {"pattern": NONCE, "ref_id": made_up}
    text = answer(b, tool, json.dumps(args), "c3")
    assert text.startswith("error: no cached tool output with ref") and len(text) < 300, len(text)
    assert "60,005 characters" in text


def test_a_ref_id_of_the_wrong_type_is_named_by_its_type(sessions: tuple[ContextManager, ContextManager, str],
                                                         ) -> None:
    _, b, _ = sessions
    text = answer(b, GREP, json.dumps({"pattern": NONCE, "ref_id": {"k": "v" * 30_000}}), "c4")
    assert text == "error: ref_id must be a string, got dict"
