"""An unsigned thinking part's ``extra`` is redacted as a text part's is (review of lane S, eighteenth stop).

``_redact_part`` redacted a ThinkingPart's text only: a provider key kept in its extra (what the formats keep for a
lossless round trip) reached the archive in clear, while the same key in a TextPart's extra was redacted. A signed
or encrypted part (opaque provider state) is still never rewritten.
"""
from __future__ import annotations

from contextfold.archive import Archive, MemoryArchiveStore
from contextfold.messages import Message, TextPart, ThinkingPart
from contextfold.redact import Redactor

NONCE = "f2th6k2v"
SECRET = f"ghp_{NONCE}a1B2c3D4e5F6g7H8i9J0k1L2m3N4"


def test_an_unsigned_thinking_parts_extra_is_redacted_like_a_text_parts() -> None:
    m = Message("assistant", (ThinkingPart(f"thought {NONCE}", extra={"note": f"k {SECRET}"}),
                              TextPart(f"said {NONCE}")))
    out = Redactor().redact_message(m)
    assert SECRET not in repr(out)
    assert f"thought {NONCE}" in repr(out)


def test_the_archive_gets_no_secret_from_a_thinking_parts_extra() -> None:
    archive = Archive(MemoryArchiveStore())
    archive.archive_transcript(f"s-{NONCE}", [Message.user(f"hi {NONCE}"), Message(
        "assistant", (ThinkingPart("t", extra={"n": SECRET}), TextPart("ok")))])
    store = archive.store
    written = "".join((store.read(sid, name) or b"").decode() for sid in store.sessions() for name in store.names(sid))
    assert f"hi {NONCE}" in written
    assert SECRET not in written


def test_a_clean_thinking_part_is_itself_and_a_signed_one_is_never_rewritten() -> None:
    r = Redactor()
    clean = Message("assistant", (ThinkingPart(f"plain {NONCE}", extra={"n": "fine"}),))
    assert r.redact_message(clean) is clean
    signed = Message("assistant", (ThinkingPart(f"signed {NONCE}", signature="sig", extra={"n": SECRET}),))
    assert r.redact_message(signed).content == signed.content
