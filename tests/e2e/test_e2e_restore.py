"""Issue 6 acceptance: every recorded session, replayed through a real ContextManager with compaction, is restored
from the archive exactly.

The agent loop is the real one: messages are added turn by turn, ``prepare()`` runs before every assistant message
(where an agent calls its model), a manual ``compact()`` every few turns on top of what the policy does,
``finish()`` at the end; the archive is a directory on disk and is read back
through a fresh :class:`Archive`. The restored history is compared with the imported messages on role, content,
tool calls, tool-call id and name, and on ``meta`` minus contextfold's own keys (:data:`BOOKKEEPING_META`: the
manager's ``id``, the view's ``kind``, ``ref``, ``original_bytes`` and ``content_parts``; importer keys such as
``source_extra`` must come back).

Semantics with redaction on (the default): archived transcripts are redacted, so a restored message is either the
original (it came from the current view or the tool output cache, which stay in-process and unredacted) or the
original with exactly the secrets :meth:`Redactor.scan` finds replaced by their markers (plus verbatim repeats of
a secret found earlier in the session, which the redactor remembers), nothing else changed. With ``redact=False``
the restore is exact.
"""

from __future__ import annotations

import multiprocessing
import re
import tempfile
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest
from conftest import TRAJECTORIES, all_session_files, require

from contextfold.archive import BOOKKEEPING_META, DEFAULT_KEEP_META, Archive
from contextfold.importers._files import load_sessions
from contextfold.importers._session import RecordedSession
from contextfold.manager import ContextManager
from contextfold.messages import EMPTY, Message, TextPart, ToolCall, freeze
from contextfold.redact import Redactor
from contextfold.stores.archive_fs import FilesystemArchiveStore

# The windows of the brief: SWE-agent sessions hold 27K-300K characters, tau-bench ones a 6 KB policy plus a short
# dialogue, so these force several compactions in almost every session of each kind.
SWE_WINDOW = 16_000
TAU_WINDOW = 4_000
# Besides what the policy decides, a manual /compact every this many assistant turns: whatever the thresholds'
# tuning, every session's history then goes through the archive several times.
COMPACT_EVERY = 4
# Two worker processes: the suite runs on 2 cores.
WORKERS = 2
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_FIELDS = ("role", "content", "tool_calls", "tool_call_id", "name")
# Sessions the fast subset replays: one with `password=`/`SECRET_KEY=` lines (redaction changes its archive), one
# with multi-part tool outputs (Claude), and the first tau-bench entries.
FAST_SWE = ("sweagent-lm32b/django__django-11451.traj", "sweagent-claude4sonnet/matplotlib__matplotlib-24970.traj")
FAST_TAU = 12
# A policy that masks outputs and clears tool-call inputs all the time, so restore must undo both.
# Lines of a synthetic tool output: a few KB, under the write-time truncation limits.
MASKABLE_OUTPUT_LINES = 40
# Room for eight such outputs before masking, so that masking (not write-time truncation) is what shrinks them.
SYNTHETIC_WINDOW = 32_000
AGGRESSIVE_MASKING: dict[str, Any] = {"clear_tool_inputs": True, "tool_output_budget_tokens": 1_500,
                                      "clear_at_least": 0}


@lru_cache(maxsize=8)
def _sessions(path: str) -> list[RecordedSession]:
    return load_sessions(path)


def _window(session: RecordedSession) -> int:
    return SWE_WINDOW if session.source == "swe_agent" else TAU_WINDOW


def replay(session: RecordedSession, root: str, *, compact_every: int | None = COMPACT_EVERY,
           window: int | None = None, **options: Any) -> ContextManager:
    """Run ``session`` through a manager the way an agent would; the caller closes it."""
    cm = ContextManager("gpt-4o", max_context_tokens=window or _window(session), store="memory", archive=root,
                        session_id=_UNSAFE.sub("_", session.id), **options)
    turns = 0
    for m in session.messages:
        if m.role == "assistant":
            turns += 1
            if compact_every and turns % compact_every == 0:
                cm.compact()
            cm.prepare()
        cm.add(m)
    cm.finish()
    return cm


def restore(cm: ContextManager, root: str, keep_meta: Any = None) -> list[Message]:
    """The history rebuilt from the archive directory (a fresh reader) plus the manager's view and cache."""
    archive = Archive(FilesystemArchiveStore(root))
    return archive.restore_history(cm.session_id, cm.messages(), resolve_ref=cm.cache.get, keep_meta=keep_meta)


def _comparable(m: Message) -> Message:
    return replace(m, meta=freeze({k: v for k, v in m.meta.items() if k not in BOOKKEEPING_META}))


def differences(restored: list[Message], original: list[Message], redactor: Redactor | None) -> Iterator[str]:
    """What is wrong with ``restored``.

    With a redactor, a message may also be the original redacted. The redactor reads the originals in order, as the
    manager did, so that it remembers the same secrets by the time it meets their verbatim repeats.
    """
    if len(restored) != len(original):
        yield f"{len(restored)} messages restored, {len(original)} imported"
    for i, (got, want) in enumerate(zip(restored, original, strict=False)):
        if _comparable(got) == _comparable(want):
            continue
        if redactor is not None and _comparable(got) == _comparable(redactor.redact_message(want)):
            continue
        wrong = [f for f in _FIELDS if getattr(got, f) != getattr(want, f)] or ["meta"]
        yield f"message {i} ({want.role}): {', '.join(wrong)} differ"


def check_session(job: tuple[str, int, bool, bool]) -> dict[str, Any]:
    """Replay and restore one session; the figures and the problems found (run in a worker process)."""
    path, index, redact, aggressive = job
    session = _sessions(path)[index]
    redactor = Redactor() if redact else None
    with tempfile.TemporaryDirectory() as root:
        options: dict[str, Any] = {"redact": redact}
        if aggressive:
            # Masking alone: a manual compaction would take the outputs away before they are masked.
            options.update(policy=AGGRESSIVE_MASKING, compact_every=None)
        cm = replay(session, root, **options)
        try:
            restored = restore(cm, root)
            problems = list(differences(restored, session.messages, redactor))
            redacted = sum(_comparable(a) != _comparable(b) for a, b in zip(restored, session.messages, strict=False))
            return {"id": session.id, "messages": len(session.messages), "compactions": cm.compactions,
                    "maskings": cm.maskings, "redacted_messages": redacted, "problems": problems[:5]}
        finally:
            cm.close()


def _jobs(redact: bool) -> list[tuple[str, int, bool, bool]]:
    return [(str(path), i, redact, False) for path in all_session_files() for i in range(len(_sessions(str(path))))]


def _run_all(jobs: list[tuple[str, int, bool, bool]]) -> list[dict[str, Any]]:
    """Every job on :data:`WORKERS` processes; prints the figures (``pytest -s`` shows them)."""
    # spawn, not fork: the parent may hold telemetry threads, and a forked lock held by one of them never unlocks.
    with ProcessPoolExecutor(WORKERS, mp_context=multiprocessing.get_context("spawn")) as pool:
        # Big chunks: each worker parses the 200-entry tau-bench file once, not once per entry.
        results = list(pool.map(check_session, jobs, chunksize=max(1, len(jobs) // (WORKERS * 4))))
    print(f"\nrestored {len(results)} sessions: {sum(r['compactions'] for r in results)} compactions, "
          f"{sum(r['maskings'] for r in results)} maskings, {sum(r['redacted_messages'] for r in results)} messages "
          f"restored redacted, {sum(r['compactions'] > 0 for r in results)} sessions compacted")
    return results


def _assert_all_restored(results: list[dict[str, Any]], compacted_share: float = 0.75) -> None:
    failed = {r["id"]: r["problems"] for r in results if r["problems"]}
    assert not failed, failed
    # The replay must have compacted or masked for the test to mean anything (the shortest tau-bench dialogues fit
    # as they are, and a forced compact() with nothing compactable is a no-op).
    assert sum(r["compactions"] + r["maskings"] > 0 for r in results) >= compacted_share * len(results)


# ---- every session ----------------------------------------------------------------------------------------------


def test_every_recorded_session_restores_with_default_redaction(trajectories: Path) -> None:
    jobs = _jobs(redact=True)
    require(len(jobs) >= 272, f"expected 72 SWE-agent + 200 tau-bench sessions, found {len(jobs)}")
    results = _run_all(jobs)
    _assert_all_restored(results)
    # Redaction did act: some sessions hold password= and SECRET_KEY= lines in their tool outputs.
    assert sum(r["redacted_messages"] for r in results) > 0


@pytest.mark.slow
def test_every_recorded_session_restores_exactly_without_redaction(trajectories: Path) -> None:
    results = _run_all(_jobs(redact=False))
    _assert_all_restored(results)
    assert all(r["redacted_messages"] == 0 for r in results)


# ---- a fast subset, unmarked ------------------------------------------------------------------------------------


def _fast_jobs(redact: bool, aggressive: bool = False) -> list[tuple[str, int, bool, bool]]:
    jobs = [(str(TRAJECTORIES / name), 0, redact, aggressive) for name in FAST_SWE]
    tau = TRAJECTORIES / "taubench-airline" / "gpt-4o-airline.json"
    jobs += [(str(tau), i, redact, aggressive) for i in range(FAST_TAU)]
    for path, _, _, _ in jobs:
        require(Path(path).is_file(), f"shared data not found: {path}")
    return jobs


@pytest.mark.parametrize("redact", [False, True], ids=["plain", "redacted"])
def test_subset_restores(redact: bool) -> None:
    results = [check_session(job) for job in _fast_jobs(redact)]
    _assert_all_restored(results, compacted_share=0.8)
    by_id = {r["id"]: r for r in results}
    secrets = by_id["django__django-11451"]["redacted_messages"]
    assert secrets > 0 if redact else secrets == 0


def test_subset_restores_after_masking_outputs_and_clearing_inputs() -> None:
    results = [check_session(job) for job in _fast_jobs(redact=False, aggressive=True)]
    _assert_all_restored(results, compacted_share=0.8)
    assert sum(r["maskings"] for r in results) >= 10


def test_redacted_restore_differs_exactly_at_the_secrets_scan_finds() -> None:
    path = TRAJECTORIES / FAST_SWE[0]
    require(path.is_file(), f"shared data not found: {path}")
    session = _sessions(str(path))[0]
    redactor = Redactor()
    with tempfile.TemporaryDirectory() as root:
        cm = replay(session, root)
        try:
            restored = restore(cm, root)
        finally:
            cm.close()
    changed = 0
    for got, want in zip(restored, session.messages, strict=True):
        if got.content == want.content:
            continue
        changed += 1
        original = want.text
        findings = redactor.scan(original)
        assert findings, f"message changed but scan finds no secret: {original[:200]!r}"
        # Rebuild the text from the findings alone: every other character is unchanged.
        expected, pos = [], 0
        for f in findings:
            expected += [original[pos : f.start], f"[REDACTED:{f.name}]"]
            pos = f.end
        expected.append(original[pos:])
        assert got.text == "".join(expected)
    assert changed >= 1


def test_default_keep_meta_keeps_only_the_callers_keys() -> None:
    path = TRAJECTORIES / FAST_SWE[1]
    require(path.is_file(), f"shared data not found: {path}")
    session = _sessions(str(path))[0]
    with tempfile.TemporaryDirectory() as root:
        cm = replay(session, root, redact=False)
        try:
            narrow = restore(cm, root, keep_meta=DEFAULT_KEEP_META)
            wide = restore(cm, root)
        finally:
            cm.close()
    assert all(set(m.meta) <= set(DEFAULT_KEEP_META) for m in narrow)
    assert [m.meta for m in wide] == [m.meta for m in session.messages]
    assert any(m.meta for m in wide)  # the importer's source_extra came back


# ---- the pieces restore relies on -------------------------------------------------------------------------------


def _tool_session(parts: bool) -> list[Message]:
    """Outputs small enough to stay whole when added, many enough that masking must take the older ones."""
    big = "\n".join(f"line {i}: " + "x" * 60 for i in range(MASKABLE_OUTPUT_LINES))
    out: list[Message] = [Message("system", "sys"), Message("user", "go")]
    for k in range(8):
        args = '{"command": "' + "y" * 400 + f'", "k": {k}' + "}"
        out.append(Message("assistant", "", tool_calls=(ToolCall(f"c{k}", "bash", args),)))
        content: Any = (TextPart(f"head {k}", cache_control={"type": "ephemeral"}), TextPart(big)) if parts else big
        out.append(Message("tool", content, tool_call_id=f"c{k}", name="bash"))
    out.append(Message("assistant", "done"))
    return out


@pytest.mark.parametrize("parts", [False, True], ids=["string", "parts"])
def test_masked_multipart_outputs_and_cleared_inputs_come_back(parts: bool) -> None:
    messages = _tool_session(parts)
    session = RecordedSession("synthetic", "jsonl", messages)
    with tempfile.TemporaryDirectory() as root:
        cm = replay(session, root, redact=False, policy=AGGRESSIVE_MASKING, compact_every=None,
                    window=SYNTHETIC_WINDOW)
        try:
            masked = [m for m in cm.messages() if m.kind == "masked"]
            trimmed = [c for m in cm.messages() for c in m.tool_calls if '"trimmed"' in c.arguments]
            assert masked and trimmed
            assert all(("content_parts" in m.meta) == parts for m in masked)
            assert list(differences(restore(cm, root), messages, None)) == []
        finally:
            cm.close()


def test_a_ref_gone_from_the_cache_leaves_the_view_visible() -> None:
    session = RecordedSession("synthetic", "jsonl", _tool_session(parts=False))
    with tempfile.TemporaryDirectory() as root:
        cm = replay(session, root, redact=False, policy=AGGRESSIVE_MASKING, compact_every=None,
                    window=SYNTHETIC_WINDOW)
        try:
            def gone(ref: str) -> str:
                raise KeyError(ref)

            restored = Archive(FilesystemArchiveStore(root)).restore_history(cm.session_id, cm.messages(),
                                                                            resolve_ref=gone, keep_meta=None)
        finally:
            cm.close()
    views = [m for m in restored if m.meta.get("ref")]
    assert views and all(m.kind in ("masked", "truncated") for m in views)
    assert restored[0].meta == EMPTY
