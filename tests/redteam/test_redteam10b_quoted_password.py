"""A password holding a quote, given bare (``password: Zq8"Lm3\\Tw6pXv2``), was redacted up to the quote only.

A bare value ran to the first quote, so the rule took ``Zq8`` (too short to remember) and left ``"Lm3\\Tw6pXv2`` in
the archive; the whole password went on in clear wherever it came back (the tool-call arguments that sent it, a
tool output echoing it, JSON-escaped or not). A user would find 13 of the password's 16 characters next to the
marker in the archived transcript and all 16 in the archived tool call. A quote between two characters of a bare
value is part of it; a quote that closes or follows it (``password=abc"``, ``password=abc", next``) still ends it.
"""

from __future__ import annotations

import json

import pytest

from contextfold.manager import ContextManager
from contextfold.redact import Redactor
from contextfold.serialize import message_to_dict

PASSWORDS = ['Zq8"Lm3\\Tw6pXv2', "Zq8'Lm3/Tw6<pXv&2", "rt10b`Qz7!kq'Wm2"]


@pytest.mark.parametrize("password", PASSWORDS)
def test_a_bare_password_holding_a_quote_is_redacted_whole(password: str) -> None:
    text = Redactor().redact_text(f"Use the database password: {password} for staging.")
    assert text == "Use the database password: [REDACTED:password] for staging."


@pytest.mark.parametrize("password", PASSWORDS)
def test_its_copies_never_reach_the_archive(password: str) -> None:
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id="rt10b-quoted")
    cm.add([{"role": "user", "content": f"Use the database password: {password} for staging."},
            {"role": "assistant", "content": "ok"}])
    cm.add([{"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {
        "name": "login", "arguments": json.dumps({"pw": password})}}]},
            {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"echo": password})}])
    cm.add([{"role": "user", "content": "next " + "filler " * 40}])
    cm.compact(force=True)
    cm.close()
    assert cm.archive is not None
    archived = [m for _, ms in cm.archive.transcripts(cm.session_id) for m in ms]
    texts = " ".join(m.text + " ".join(c.arguments for c in m.tool_calls) for m in archived)
    blob = json.dumps([message_to_dict(m) for m in archived])
    for form in (password, json.dumps(password)[1:-1], password[4:]):
        assert form not in texts and form not in blob, form


@pytest.mark.parametrize(("text", "kept"), [
    ('run "mysql --password=abc9Xk2q" now', '" now'),
    ("sh -c 'psql password=abc9Xk2q' && ls", "' && ls"),
    ('{"url": "https://x.internal/?token=abc9Xk2qZ8","next": 2}', '","next": 2}'),
    ('password="abc9Xk2q"x', None),
])
def test_a_quote_that_closes_a_bare_value_still_ends_it(text: str, kept: str | None) -> None:
    redacted = Redactor().redact_text(text)
    assert "abc9Xk2q" not in redacted
    if kept is not None:
        assert redacted.endswith(kept), redacted
