"""restore_history: archived pre-compaction transcripts + the current view give back the original history exactly.

The manager is simulated by hand: it assigns ids on add, truncates big tool outputs at write time (full text in a
cache, ref kept), masks old outputs, and at each compaction archives the whole view and replaces its older part
with a summary, retained facts and placeholders.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

try:  # tests/ is a package (tests/__init__.py) in the repository; plain `conftest` when it is not
    from tests.conftest import all_session_files, require
except ImportError:  # pragma: no cover
    from conftest import all_session_files, require  # type: ignore[no-redef]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.archive import Archive, MemoryArchiveStore, merge_histories
from contextfold.errors import RefNotFound
from contextfold.messages import EMPTY, Message, TextPart, ToolCall
from contextfold.redact import Redactor
from contextfold.stores.archive_fs import FilesystemArchiveStore

# Tool outputs longer than this are cut at write time in the simulation (the real cache works in tokens/bytes).
TRUNCATE_OVER = 1_500


@dataclass
class SimManager:
    """Just enough of a context manager to produce realistic views and archives."""

    archive: Archive
    session: str = "sess-1"
    cache: dict[str, str] = field(default_factory=dict)
    view: list[Message] = field(default_factory=list)
    next_id: int = 0
    compactions: int = 0

    def _put(self, text: str) -> str:
        ref = f"tout_{len(self.cache):04d}"
        self.cache[ref] = text
        return ref

    def add(self, m: Message) -> None:
        m = m.with_meta(id=f"m{self.next_id:05d}")
        self.next_id += 1
        if m.role == "tool" and isinstance(m.content, str) and len(m.content) > TRUNCATE_OVER:
            ref = self._put(m.content)
            m = m.with_content(m.content[:200] + f"\n[... output cut; ref={ref}]").with_meta(
                kind="truncated", ref=ref, original_bytes=len(m.content.encode())
            )
        self.view.append(m)

    def mask_old_outputs(self, keep_last: int) -> None:
        tools = [i for i, m in enumerate(self.view) if m.role == "tool" and m.kind in (None, "truncated")]
        for i in tools[: max(0, len(tools) - keep_last)]:
            m = self.view[i]
            ref = m.meta.get("ref")
            if ref is None:
                ref = self._put(m.text) if isinstance(m.content, str) else None
            if ref is None:
                continue  # multi-part outputs stay (the real cache keeps them too)
            self.view[i] = m.with_content(f"[old output masked; ref={ref}]").with_meta(kind="masked", ref=ref)

    def compact(self, keep_recent: int) -> None:
        n = self.archive.archive_transcript(self.session, self.view)
        self.compactions += 1
        system = [m for m in self.view if m.role == "system" and m.kind is None]
        rest = [m for m in self.view if not (m.role == "system" and m.kind is None)]
        kept = (
            [m for m in rest[len(rest) - keep_recent :] if m.kind not in ("summary", "retain")] if keep_recent else []
        )
        summary = Message.user(f"<summary>compaction {n}</summary>", meta={"kind": "summary", "id": f"sum{n}"})
        retain = Message.user("<retain>keep the tests green</retain>", meta={"kind": "retain"})
        placeholder = Message.assistant("[earlier turns summarized]", meta={"kind": "placeholder"})
        user_block = Message.user("(earlier user messages)", meta={"kind": "user_block", "id": f"ub{n}"})
        self.view = [*system, summary, retain, user_block, placeholder, *kept]
        self.archive.archive_summary(self.session, n, {"summary": summary.text, "kept": len(kept)})

    def restore(self, **kw: object) -> list[Message]:
        return self.archive.restore_history(self.session, self.view, resolve_ref=self.cache.__getitem__, **kw)  # type: ignore[arg-type]


def _plain(messages: list[Message]) -> list[Message]:
    """The messages as an agent adds them: no contextfold meta."""
    return [replace(m, meta=EMPTY) for m in messages]


def _run(originals: list[Message], ops: list[tuple[str, int]], archive: Archive) -> SimManager:
    sim = SimManager(archive)
    it = iter(originals)
    for op, k in ops:
        if op == "add":
            for _ in range(k):
                m = next(it, None)
                if m is not None:
                    sim.add(m)
        elif op == "mask":
            sim.mask_old_outputs(k)
        else:
            sim.compact(k)
    for m in it:
        sim.add(m)
    return sim


def _conversation(n_turns: int, big_every: int = 3) -> list[Message]:
    out = [
        Message.system("You are a coding agent."),
        Message.user("Fix the failing test in parser.py", meta={"protected": True}),
    ]
    for t in range(n_turns):
        call = ToolCall(f"call_{t}", "bash", json.dumps({"cmd": f"pytest -k case_{t}"}))
        out.append(Message.assistant(f"step {t}", [call]))
        body = "\n".join(f"line {i} of run {t}" for i in range(200 if t % big_every == 0 else 3))
        out.append(Message.tool(call.id, body, name="bash"))
        if t % 4 == 3:
            out.append(Message.user(f"user note {t}", meta={"label": f"note-{t}"}))
    out.append(Message.assistant("done"))
    return out


def test_hand_simulated_compaction_sequence_restores_exactly(tmp_path: object) -> None:
    originals = _conversation(20)
    archive = Archive(MemoryArchiveStore())
    ops = [("add", 12), ("mask", 2), ("compact", 4), ("add", 15), ("mask", 1), ("compact", 3), ("add", 10),
           ("compact", 0), ("add", 6), ("mask", 1)]  # fmt: skip
    sim = _run(originals, ops, archive)
    assert sim.compactions == 3
    assert any(m.kind == "masked" for m in sim.view) and any(m.kind == "summary" for m in sim.view)
    assert len(sim.view) < len(originals)
    restored = sim.restore()
    assert restored == originals
    # Without resolve_ref: every original message once, in order, with the archive's meta (ids, refs) visible.
    raw = archive.restore_history(sim.session, sim.view)
    assert [m.meta["id"] for m in raw] == [f"m{i:05d}" for i in range(len(originals))]
    assert any(m.kind in ("masked", "truncated") for m in raw)


@st.composite
def _scenario(draw: st.DrawFn) -> tuple[list[Message], list[tuple[str, int]]]:
    n_turns = draw(st.integers(0, 12))
    originals = _conversation(n_turns, big_every=draw(st.integers(1, 4)))
    ops = draw(
        st.lists(
            st.tuples(st.sampled_from(["add", "add", "mask", "compact"]), st.integers(0, 6)),
            max_size=12,
        )
    )
    return originals, ops


@settings(max_examples=60, deadline=None)
@given(_scenario())
def test_any_compaction_schedule_restores_exactly(scenario: tuple[list[Message], list[tuple[str, int]]]) -> None:
    originals, ops = scenario
    sim = _run(originals, ops, Archive(MemoryArchiveStore()))
    assert sim.restore() == originals


def test_restore_from_the_filesystem_archive(tmp_path: object) -> None:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    originals = _conversation(10)
    sim = _run(
        originals, [("add", 9), ("compact", 2), ("add", 9), ("compact", 2)], Archive(FilesystemArchiveStore(tmp_path))
    )
    # A fresh Archive over the same directory (another process) restores the same history.
    again = Archive(FilesystemArchiveStore(tmp_path))
    assert again.restore_history(sim.session, sim.view, resolve_ref=sim.cache.__getitem__) == originals


def test_nothing_archived_gives_the_current_view() -> None:
    originals = _conversation(2, big_every=100)
    sim = _run(originals, [], Archive(MemoryArchiveStore()))
    assert sim.restore() == originals


def test_a_ref_no_longer_cached_keeps_its_view_visibly() -> None:
    originals = _conversation(3, big_every=1)
    sim = _run(originals, [("add", 100)], Archive(MemoryArchiveStore()))

    def gone(ref: str) -> str:
        raise RefNotFound(ref)

    restored = sim.archive.restore_history(sim.session, sim.view, resolve_ref=gone)
    cut = [m for m in restored if m.kind == "truncated"]
    assert cut and all("ref" in m.meta for m in cut)
    assert len(restored) == len(originals)


def test_merge_appends_new_messages_and_prefers_originals() -> None:
    a, b, c, d, e = (Message.user(x, meta={"id": x}) for x in "abcde")
    masked_b = b.with_content("[masked]").with_meta(kind="masked", ref="r1")
    summary = Message.user("<summary/>", meta={"kind": "summary", "id": "s1"})
    merged = merge_histories([[a, masked_b, c], [summary, b, c, d], [summary, d, e]])
    assert merged == [a, b, c, d, e]
    # The first-seen original wins over a later masked copy as well.
    assert merge_histories([[a, b], [masked_b]]) == [a, b]


@pytest.mark.parametrize("ids", [("m1", "m2", "m3"), ("s:0a1b:1", "s:0a1b:2", "s:0a1b:3")])
def test_a_message_repeating_the_first_after_everything_was_summarized_is_kept(ids: tuple[str, str, str]) -> None:
    # Found by the manager's property test: a compaction summarized every original, the next view started with a
    # new message equal to the session's first ("fix" twice), and the merge took it for a new manager re-adding
    # the history: the second "fix" was lost on restore. Caller ids and the manager's own (one manager) alike.
    first, again, later = (Message.assistant("fix", meta={"id": ids[0]}), Message.assistant("fix", meta={"id": ids[1]}),
                           Message.user("go on", meta={"id": ids[2]}))
    summary = Message.user("<summary/>", meta={"kind": "summary", "id": "s1"})
    assert merge_histories([[first], [summary], [summary, again, later]]) == [first, again, later]


def test_a_new_manager_re_adding_the_history_is_still_merged_once() -> None:
    first = Message.user("fix the build", meta={"id": "s:0a1b:1"})
    reply = Message.assistant("ok", meta={"id": "s:0a1b:2"})
    readded = [first.with_meta(id="s:9f8e:1"), reply.with_meta(id="s:9f8e:2")]
    new = Message.user("and the tests", meta={"id": "s:9f8e:3"})
    assert merge_histories([[first, reply], [*readded, new]]) == [first, reply, new]


def test_messages_without_ids_are_matched_by_position_best_effort() -> None:
    ms = [Message.user("a"), Message.assistant("b"), Message.user("c")]
    archive = Archive(MemoryArchiveStore())
    archive.archive_transcript("s", ms[:2])
    assert archive.restore_history("s", ms) == ms


def test_archived_secrets_stay_redacted_on_restore() -> None:
    key = "sk-proj-" + "S3cr3t" * 8
    originals = [Message.user(f"use {key}"), Message.assistant("ok")]
    sim = _run(originals, [("add", 2), ("compact", 1)], Archive(MemoryArchiveStore()))
    restored = sim.restore()
    assert key not in restored[0].text and "[REDACTED:openai_key]" in restored[0].text
    # With redaction turned off the history comes back verbatim.
    sim2 = _run(
        originals, [("add", 2), ("compact", 1)], Archive(MemoryArchiveStore(), redactor=Redactor(enabled=False))
    )
    assert sim2.restore() == originals


def test_multipart_content_round_trips_through_the_archive() -> None:
    m = Message("user", (TextPart("look", cache_control={"type": "ephemeral"}), TextPart("here")))
    sim = _run([m, Message.assistant("seen")], [("add", 2), ("compact", 0)], Archive(MemoryArchiveStore()))
    assert sim.restore() == [m, Message.assistant("seen")]


def test_every_recorded_session_restores_exactly() -> None:
    files = all_session_files()
    require(bool(files), "no recorded sessions under shared/data/trajectories")
    from contextfold.importers._files import load_sessions

    sessions = 0
    compactions = 0
    for path in files:
        for session in load_sessions(path):
            originals = _plain(list(session.messages))
            archive = Archive(MemoryArchiveStore(), redactor=Redactor(enabled=False))
            ops: list[tuple[str, int]] = []
            for _ in range(len(originals) // 8 + 1):
                ops += [("add", 8), ("mask", 3), ("compact", 5)]
            sim = _run(originals, ops, archive)
            assert sim.restore() == originals, session.id
            sessions += 1
            compactions += sim.compactions
    assert sessions >= 200 and compactions > sessions
