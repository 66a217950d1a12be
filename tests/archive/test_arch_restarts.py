"""A session compacted by several managers (a recording compacted twice, an app that re-adds its history to a fresh
manager): the archive restores each original message once, in order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import TRAJECTORIES, require

from contextfold.archive import Archive, MemoryArchiveStore, merge_histories
from contextfold.cli import main
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.stores.archive_fs import FilesystemArchiveStore
from contextfold.stores.memory import MemoryBlobStore


def _history(n: int) -> list[dict[str, str]]:
    out = [{"role": "system", "content": "be brief"}]
    for i in range(n):
        out += [{"role": "user", "content": f"question {i} " + "word " * 120},
                {"role": "assistant", "content": f"answer {i} " + "word " * 120}]
    return out


def _compact_in_a_new_manager(archive: Path, history: list[dict[str, str]]) -> None:
    with ContextManager("gpt-4o", store="memory", archive=str(archive), session_id="s") as cm:
        cm.add(history)
        cm.compact()


def test_the_same_history_compacted_by_two_managers_restores_once(tmp_path: Path) -> None:
    history = _history(20)
    _compact_in_a_new_manager(tmp_path, history)
    _compact_in_a_new_manager(tmp_path, history)
    archive = Archive(FilesystemArchiveStore(str(tmp_path)))
    assert len(archive.transcript_numbers("s")) == 2
    restored = archive.restore_history("s")
    assert [m.text for m in restored] == [m["content"] for m in history]


def test_a_new_manager_that_re_adds_and_continues_restores_the_continuation_once(tmp_path: Path) -> None:
    first, more = _history(10), _history(16)
    _compact_in_a_new_manager(tmp_path, first)
    _compact_in_a_new_manager(tmp_path, more)  # the same 21 messages, then 12 new ones
    restored = Archive(FilesystemArchiveStore(str(tmp_path))).restore_history("s")
    assert [m.text for m in restored] == [m["content"] for m in more]


def test_repeated_messages_of_one_manager_are_not_merged() -> None:
    # The same text twice in one view is two messages (ids differ); only a new manager's replay of history aligns.
    a = [Message.user("again", meta={"id": "x:1"}), Message.user("again", meta={"id": "x:2"})]
    b = [Message.user("again", meta={"id": "y:1"}), Message.user("again", meta={"id": "y:2"}),
         Message.user("again", meta={"id": "y:3"})]
    assert [m.meta["id"] for m in merge_histories([a, b])] == ["x:1", "x:2", "y:3"]
    different = [Message.user("new start", meta={"id": "z:1"})]
    assert [m.meta["id"] for m in merge_histories([a, different])] == ["x:1", "x:2", "z:1"]


def test_cli_compact_twice_then_restore_gives_the_session_once(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    session = TRAJECTORIES / "sweagent-claude4sonnet" / "sympy__sympy-19954.traj"
    require(session.is_file(), "shared SWE-agent data missing")
    archive, store = tmp_path / "archive", f"local://{tmp_path}/store"
    for out in ("c1.jsonl", "c2.jsonl"):
        assert main(["compact", str(session), "-o", str(tmp_path / out), "--window", "16000",
                     "--archive", str(archive), "--store", store]) == 0
    assert main(["convert", str(session), "--to", "openai_chat", "--session", "sympy__sympy-19954"]) == 0
    restored = tmp_path / "restored.jsonl"
    assert main(["archive", "restore", "sympy__sympy-19954", "--archive", str(archive), "--store", store,
                 "-o", str(restored)]) == 0
    lines = restored.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 60
    original = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [json.loads(line) for line in lines] == original



def _tool_turn(turn: int, output_bytes: int) -> list[Message]:
    """One step of a tool loop, each message with the agent's own id."""
    call = ToolCall(f"c{turn}", "bash", json.dumps({"cmd": f"step {turn}"}))
    line = f"turn {turn}: " + "abcdefghij " * 6
    output = "\n".join(line for _ in range(max(1, output_bytes // 80)))
    return [Message.assistant(f"running step {turn}", [call], meta={"agent_id": f"{turn}-a"}),
            Message.tool(call.id, output, name="bash", meta={"agent_id": f"{turn}-t"}),
            Message.assistant(f"step {turn} done", meta={"agent_id": f"{turn}-d"})]


@pytest.mark.parametrize(("sizes", "turns", "kill_every"), [((1_500, 4_000), 16, 5), ((2_000,), 20, 6)])
def test_a_session_killed_and_resumed_from_the_archive_restores_each_message_once(sizes: tuple[int, ...],
                                                                                  turns: int,
                                                                                  kill_every: int) -> None:
    # The way bench/soak.py resumes: a new manager gets the restored history plus what the agent added since. It
    # masks outputs its predecessor archived whole; the merge must see them as the same messages (before issue 21
    # these two runs restored 49 messages as 63 and 61 as 75).
    archive, store = Archive(MemoryArchiveStore()), MemoryBlobStore()

    def manager() -> ContextManager:
        return ContextManager("gpt-4o", max_context_tokens=8_000, store=store, archive=archive, session_id="s",
                              redact=False)

    def full_text(ref: str) -> str:
        return store.get(ref).decode()

    cm, log = manager(), [Message.user("run the steps", meta={"agent_id": "task"})]
    cm.add(log)
    for turn in range(turns):
        if turn and turn % kill_every == 0:  # killed without close(); a new manager resumes
            cm = manager()
            restored = archive.restore_history("s", resolve_ref=full_text, keep_meta=("agent_id",))
            known = {m.meta.get("agent_id") for m in restored}
            cm.add([*restored, *(m for m in log if m.meta.get("agent_id") not in known)])
        batch = _tool_turn(turn, sizes[turn % len(sizes)])
        log += batch
        cm.add(batch)
        cm.prepare("openai_chat")
    restored = archive.restore_history("s", cm.messages(), resolve_ref=full_text, keep_meta=("agent_id",))
    cm.close()
    assert [(m.meta.get("agent_id"), m.text) for m in restored] == [(m.meta["agent_id"], m.text) for m in log]
