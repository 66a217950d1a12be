"""A password typed after "my password is" in a message of its own is redacted everywhere contextfold writes.

Found by the twelfth red team and left open: people type a credential the way they say it ("Log into staging, my
password is", send, then the value alone). No rule finds it: the phrase and the value are in two texts and a bare
value matches no pattern, so the value reached the view sent (redaction applied to the model), the archive and the
summary in clear. The value typed alone after a user message that ends with a key phrase is now learned into the
session's memory (``redact/_split.py``), which redacts it wherever it stands.
"""

from __future__ import annotations

import json

import pytest

from contextfold.manager import ContextManager
from contextfold.messages import Message
from contextfold.redact import Redactor
from contextfold.redact._split import SplitSecrets, bare_value, key_at_end

VALUE = "Zq8-rt13split-Kx9vQ7mZ"
PLAIN = "make-target-rt13-b42x"


def _manager(session: str) -> ContextManager:
    return ContextManager(model="gpt-4o", store="memory", archive="memory", session_id=session,
                          redact=Redactor(apply_to_model=True))


def _written(cm: ContextManager) -> str:
    """What contextfold sends and writes: the prepared view, the view after a compaction, the archive."""
    sent = json.dumps(cm.prepare(), ensure_ascii=False)
    cm.compact(force=True)
    assert cm.archive is not None
    archived = [m.text for _, messages in cm.archive.transcripts(cm.session_id) for m in messages]
    return sent + json.dumps(cm.prepare(), ensure_ascii=False) + json.dumps(archived, ensure_ascii=False)


@pytest.mark.parametrize("apart", [False, True], ids=["one-add", "two-adds"])
def test_a_value_typed_after_my_password_is_never_leaves_in_clear(apart: bool) -> None:
    cm = _manager(f"rt13-split-{apart}")
    first = [Message("user", "Log into the staging box for me. My password is"), Message("assistant", "Go ahead.")]
    second = [Message("user", VALUE), Message("assistant", "Logged in."),
              Message("user", "Now build it: the target is"), Message("user", PLAIN)]
    rest = [m for i in range(6) for m in (Message("user", f"step {i}"), Message("assistant", f"did step {i}"))]
    if apart:
        cm.add(first)
        cm.prepare()
        cm.add([*second, *rest])
    else:
        cm.add([*first, *second, *rest])
    written = _written(cm)
    cm.close()
    assert VALUE not in written
    assert PLAIN in written  # (a bare value after a phrase that names no secret stays as it was)


def test_the_split_finder_reads_only_user_messages_and_key_phrases_at_the_end() -> None:
    assert key_at_end("my password is") == "password"
    assert key_at_end("Here is my API key:") == "api_key"
    assert key_at_end("the token =  ") == "secret"
    assert key_at_end("my password is in the vault.") is None
    assert key_at_end("we pass") is None
    assert bare_value("  hunter2-Kx9  ") == "hunter2-Kx9" and bare_value("two words") is None
    assert bare_value("postgres") is None  # (a plain lower-case word is too common to remember)
    split = SplitSecrets()
    assert split.values([Message("user", "my password is"), Message("tool", "x", tool_call_id="c"),
                         Message("user", VALUE)]) == [(VALUE, "password")]
    assert split.values([Message("user", "my password is"), Message("user", "it is in the vault"),
                         Message("user", VALUE)]) == []


def test_through_the_proxy_the_value_of_the_next_request_is_redacted_too() -> None:
    """A manager per request: the phrase ends the stored view, the value comes alone with the next request."""
    first = _manager("rt13-split-adopt")
    first.add([Message("user", "Deploy it. My password is")])
    first.prepare()
    stored = first.stored_messages()
    second = ContextManager(model="gpt-4o", store=first.cache.store if first.cache else "memory", archive="memory",
                            session_id="rt13-split-adopt", redact=Redactor(apply_to_model=True))
    second.adopt(stored)
    second.add([Message("assistant", "Go ahead."), Message("user", VALUE)])
    sent = json.dumps(second.prepare(), ensure_ascii=False)
    first.close()
    second.close()
    assert VALUE not in sent
