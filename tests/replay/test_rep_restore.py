"""After a replay with compactions, the archive (plus the cache and the current view) gives back the original."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from conftest import TRAJECTORIES, require

from contextfold.archive import DEFAULT_KEEP_META
from contextfold.importers._files import load_session, load_sessions
from contextfold.messages import EMPTY, Message
from contextfold.replay.harness import ReplayOptions, SessionReplayer

SESSIONS = [
    TRAJECTORIES / "sweagent-claude4sonnet" / "matplotlib__matplotlib-24970.traj",
    TRAJECTORIES / "sweagent-lm32b" / "django__django-11451.traj",  # holds password= and SECRET_KEY= lines
]
_REDACTED = re.compile(r"\[REDACTED:[a-z_]+\]")


def _strip(messages: list[Message]) -> list[Message]:
    return [replace(m, meta=EMPTY) for m in messages]


def _restore(replayer: SessionReplayer) -> list[Message]:
    cm = replayer.manager
    return cm.archive.restore_history(cm.session_id, cm.messages(), resolve_ref=cm.cache.get)


# Masking goes first and would leave few compactions to test; with it off, these sessions compact repeatedly.
NO_MASKING = {"tool_output_budget_tokens": 1_000_000}


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.stem)
def test_restore_without_redaction_is_exact(path) -> None:
    require(path.is_file(), f"shared data not found: {path}")
    session = load_session(path)
    replayer = SessionReplayer(session, ReplayOptions(window=6_000, redact=False, policy=NO_MASKING))
    replayer.run()
    assert replayer.manager.compactions >= 2
    restored = _restore(replayer)
    assert _strip(restored) == _strip(session.messages)
    # Only the caller's own meta keys survive; contextfold's bookkeeping (ids, refs, kinds) is gone.
    assert all(set(m.meta) <= set(DEFAULT_KEEP_META) for m in restored)


def test_restore_with_redaction_differs_only_where_secrets_were_redacted() -> None:
    path = SESSIONS[1]
    require(path.is_file(), f"shared data not found: {path}")
    session = load_session(path)
    replayer = SessionReplayer(session, ReplayOptions(window=6_000))
    replayer.run()
    restored = _restore(replayer)
    assert len(restored) == len(session.messages)
    differing = 0
    for got, original in zip(_strip(restored), _strip(session.messages), strict=True):
        if got == original:
            continue
        differing += 1
        assert (got.role, got.tool_call_id) == (original.role, original.tool_call_id)
        got_text = got.text + "".join(c.arguments for c in got.tool_calls)
        original_text = original.text + "".join(c.arguments for c in original.tool_calls)
        # Every changed line carries a redaction marker: the archive redacts secrets (issue 6), by design.
        for new, old in zip(got_text.splitlines(), original_text.splitlines(), strict=True):
            if new != old:
                assert _REDACTED.search(new), (old, new)
    assert differing >= 1


def test_restore_is_exact_for_every_claude_session() -> None:
    folder = TRAJECTORIES / "sweagent-claude4sonnet"
    require(folder.is_dir(), f"shared data not found: {folder}")
    for session in load_sessions(folder):
        replayer = SessionReplayer(session, ReplayOptions(window=8_000, redact=False))
        replayer.run()
        assert _strip(_restore(replayer)) == _strip(session.messages), session.id
