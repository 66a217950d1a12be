"""The redaction corpora: every realistic secret caught, every piece of real code and log left byte for byte."""

from __future__ import annotations

import pytest
from redact_corpus import CODE, SECRETS, Code, Secret, shared_code_excerpts

from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.messages import Message
from contextfold.redact import Redactor

_SHARED_CODE = shared_code_excerpts(limit=200)


def test_the_corpora_are_as_large_as_issue_21_asks() -> None:
    # 146 realistic credential forms and at least 100 innocent snippets (the issue's two broken ones among them).
    assert len(SECRETS) >= 146
    assert len(CODE) + len(_SHARED_CODE) >= 100 or not _SHARED_CODE
    assert {"shell expansion with an error", "shell expansion with a default"} <= {c.label for c in CODE}


@pytest.mark.parametrize("secret", SECRETS, ids=[s.label for s in SECRETS])
def test_every_realistic_secret_is_caught(secret: Secret) -> None:
    out = Redactor(remember=False).redact_text(secret.text)
    # Whole values, and pieces of them: `[REDACTED:password]&3horse` leaks the password's tail.
    assert secret.leaked(out) == [], f"{secret.label}: leaked in {out!r}"
    assert "[REDACTED:" in out


@pytest.mark.parametrize("code", CODE, ids=[c.label for c in CODE])
def test_code_and_logs_come_through_unchanged(code: Code) -> None:
    assert Redactor(remember=False).redact_text(code.text) == code.text


def test_real_code_from_the_shared_sessions_comes_through_unchanged() -> None:
    if not _SHARED_CODE:
        pytest.skip("shared sessions not found")
    redactor = Redactor(remember=False)
    changed = [c.label for c in _SHARED_CODE if redactor.redact_text(c.text) != c.text]
    assert changed == []
    assert len(_SHARED_CODE) >= 20  # the excerpts are there to be tested, not an empty loop


def test_the_learning_redactor_learns_nothing_from_code() -> None:
    """After every code snippet has gone through, the same snippets still come through unchanged."""
    redactor = Redactor()
    texts = [c.text for c in CODE] + [c.text for c in _SHARED_CODE]
    for text in texts:
        redactor.redact_text(text)
    assert redactor._learned == {}
    assert [t for t in texts if redactor.redact_text(t) != t] == []


def test_the_learning_redactor_still_learns_secrets_but_not_their_context() -> None:
    redactor = Redactor()
    for secret in SECRETS:
        redactor.redact_text(secret.text)
    # A repeat without its context is caught (a summary listing the value alone) ...
    token = next(s for s in SECRETS if s.label == "JWT_SECRET").values[0]
    assert token not in redactor.redact_text(f"the signing secret was {token}.")
    # ... and the code corpus is still left alone by a redactor that has learned every secret.
    assert [c.label for c in CODE if redactor.redact_text(c.text) != c.text] == []


def test_a_pem_marker_in_source_does_not_swallow_the_rest_of_the_file() -> None:
    source = next(c.text for c in CODE if c.label == "PEM marker in a string literal")
    redactor = Redactor()
    assert redactor.redact_text(source) == source
    assert redactor.redact_text("helper_v2_Base64Decoder3 is used") == "helper_v2_Base64Decoder3 is used"


def test_archive_restore_gives_the_code_back() -> None:
    archive = Archive(MemoryArchiveStore(), redactor=Redactor())
    messages = [Message.user("show me the code"), *(Message.assistant(c.text) for c in CODE)]
    archive.archive_transcript("s", messages)
    assert [m.content for m in archive.restore_history("s")] == [m.content for m in messages]
