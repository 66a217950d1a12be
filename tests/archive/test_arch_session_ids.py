"""Session ids the way users write them (issue 21 §4): e-mail addresses, ``org:42``, and worse.

Before, an id outside the archive's alphabet was accepted by the manager and raised ``ValueError`` out of
``prepare()`` at the first compaction, and again out of ``close()``; through an adapter's degrade path the session
then never compacted. Now every non-empty string the archive can name works, stored under a reversible encoding
that stays inside the archive's folder, and what cannot be named is a ``ConfigError`` at construction.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.archive import Archive, MemoryArchiveStore, validate_session_id
from contextfold.errors import ConfigError
from contextfold.manager import ContextManager
from contextfold.messages import Message
from contextfold.stores.archive_fs import FilesystemArchiveStore

# The ids of the issue, and a few more of the same kinds.
USER_IDS = ["../escape", "/abs", "a/b", "nul\x00byte", "user@example.com", "org:42", "trailing-newline\n",
            "ｆｕｌｌｗｉｄｔｈ", "..", ".", "_leading-underscore", "space in it", "tab\tin", "C:\\windows\\path",
            "🙂"]


def history() -> list[Message]:
    return [Message.user(f"request {i} " + "word " * 500) if i % 2 == 0 else Message.assistant(f"reply {i}")
            for i in range(30)]


@pytest.mark.parametrize("session_id", USER_IDS)
def test_a_user_written_session_id_compacts_archives_and_restores_inside_the_archive(
        tmp_path: Path, session_id: str) -> None:
    from contextfold.archive import archive_key

    root = tmp_path / "archive"
    cm = ContextManager("gpt-4o", max_context_tokens=8_000, store="memory", archive=str(root), session_id=session_id)
    cm.add(history())
    cm.prepare()  # compacts: the transcript goes to the archive
    assert cm.compactions == 1
    cm.close()
    # One folder, inside the root, named by the encoding (its capitals marked: see folder_name); nothing anywhere
    # else in tmp_path.
    from contextfold.stores.archive_fs import folder_name

    [folder] = [p for p in root.iterdir() if not p.name.startswith(".")]  # (.pruned: the retention stamp)
    assert folder.name == folder_name(archive_key(session_id)) and folder.parent == root
    assert sorted(p.name for p in tmp_path.iterdir()) == ["archive"]
    archive = Archive(FilesystemArchiveStore(root))
    assert archive.sessions() == [session_id]
    restored = archive.restore_history(session_id)
    assert [m.text for m in restored] == [m.text for m in history()]


@pytest.mark.parametrize("session_id", ["", "x" * 201, "ü" * 40, "lone\udcffsurrogate", 42, b"bytes"])
def test_an_id_the_archive_cannot_name_is_a_config_error_at_construction(session_id: object) -> None:
    with pytest.raises(ConfigError) as info:
        ContextManager("gpt-4o", store="memory", archive="memory", session_id=session_id)  # type: ignore[arg-type]
    assert info.value.field == "session_id"


def test_plain_ids_keep_their_names_and_stores_still_refuse_raw_unsafe_names(tmp_path: Path) -> None:
    from contextfold.archive import archive_key, session_from_key

    for plain in ("s1", "session_3-0", "a.b-c_d", "x" * 200):
        assert archive_key(plain) == plain == session_from_key(plain)
    store = FilesystemArchiveStore(tmp_path)
    for unsafe in ("../escape", "a/b", "sess\n", "", ".", ".."):
        with pytest.raises(ValueError):
            store.write(unsafe, "summary-001.json", b"{}")
    with pytest.raises(ValueError):
        validate_session_id("sess\n")  # "$" matched before a trailing newline
    assert os.listdir(tmp_path) == []


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=16))  # 16 characters of any kind always fit 200 encoded
def test_the_encoding_is_reversible_path_safe_and_never_collides_with_a_plain_id(session_id: str) -> None:
    from contextfold.archive import archive_key, session_from_key

    key = archive_key(session_id)
    assert session_from_key(key) == session_id
    assert validate_session_id(key) == key
    assert "/" not in key and "\x00" not in key and key not in (".", "..")
    if key != session_id:
        assert key.startswith("_")  # plain ids never do
    store = MemoryArchiveStore()
    Archive(store).archive_summary(session_id, 1, {"summary": "s"})
    assert Archive(store).sessions() == [session_id]


@pytest.mark.parametrize("session_id", ["user@example.com", "org:42"])
def test_through_an_adapters_degrade_path_such_a_session_compacts_instead_of_degrading(session_id: str) -> None:
    # Before, the archive's ValueError at the first compaction was caught by the adapters' degrade path: the
    # session was sent the smallest valid view, with a warning, at every turn, and never compacted.
    from contextfold.integrations._degrade import DEGRADED_CODE, prepare_messages
    from contextfold.telemetry import CompactWarning, RecordingTelemetry

    telemetry = RecordingTelemetry()
    cm = ContextManager("gpt-4o", max_context_tokens=8_000, store="memory", archive="memory",
                        session_id=session_id, telemetry=telemetry)
    cm.add(history())
    view = prepare_messages(cm, strict=False, where="test adapter")
    assert cm.compactions == 1 and any(m.kind == "summary" for m in cm.messages())
    assert view[-1].text == "reply 29"  # the newest messages are sent
    assert not [e for e in telemetry.events if isinstance(e, CompactWarning) and e.code == DEGRADED_CODE]
    cm.close()
