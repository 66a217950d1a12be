"""A manager's ids hold no built-in secret trigger of their own (issue 22).

Each id is ``<session>:<nonce>:<n>``. A hex nonce holding "eaa", "acca" or starting "aa" (":aa" is a trigger: 0.55%
of managers) made every id a suspect of the redactor's prefilter, each then read again one by one: +1 s or more to
the first compaction of 100,000 messages.
"""

from __future__ import annotations

import re
import uuid

import pytest

from contextfold.manager import ContextManager
from contextfold.redact import Redactor

_NONCE = "n7h2q5"


def _ids(cm: ContextManager) -> list[str]:
    return [str(m.meta["id"]) for m in cm.messages()]


@pytest.mark.parametrize("drawn", ["eaa0b1c2d3e4f5a6b7c8d9e0f1a2b3c4", "aa01b2c3d4e5f6a7b8c9d0e1f2a3b4c5",
                                   "12acca56789b0c1d2e3f4a5b6c7d8e9f"])
def test_a_nonce_drawn_with_a_trigger_in_it_gives_ids_the_prefilter_clears(monkeypatch: pytest.MonkeyPatch,
                                                                          drawn: str) -> None:
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(drawn))
    cm = ContextManager("gpt-4o", store="memory", archive=None, session_id=f"s{_NONCE}")
    cm.add([{"role": "user", "content": f"task {_NONCE} {i}"} for i in range(8)])
    ids = _ids(cm)
    assert len(set(ids)) == 8 and all(i.startswith(f"s{_NONCE}:") for i in ids)
    # No trigger in them (the gate clears "eaa" and "acca" ids, one read each: the cost; not ":aa" ones)...
    assert [i for i in ids if any(t in i.lower() for t in _triggers())] == []
    assert Redactor()._message_redactor.clean_strings(ids) == set(ids)  # (...and so nothing to read again)


def _triggers() -> tuple[str, ...]:
    redactor = Redactor()
    _ = redactor.patterns  # (resolves the prefilter)
    assert redactor._scanner.prefilter is not None
    return tuple(redactor._scanner.prefilter[0])


def test_no_builtin_trigger_is_made_of_the_nonces_characters() -> None:
    assert [t for t in _triggers() if re.fullmatch(r"[0-9b-g:]+", t)] == []


def test_the_nonce_keeps_its_48_random_bits() -> None:
    from contextfold.manager._manager import _id_nonce

    drawn = {_id_nonce() for _ in range(2_000)}
    assert len(drawn) == 2_000
    assert all(re.fullmatch(r"[0-9b-g]{12}", n) for n in drawn)
