"""Recorded sessions whose ids differ only in characters the archive cannot name kept apart.

Found on a9a74c5: ``replay`` and ``compact`` named a recorded session's manager by its id with every character
outside ``[A-Za-z0-9._-]`` replaced by ``_``: tau-bench's ``f/1-0`` and a JSONL session ``f_1-0`` were one session,
one archive folder (``f_1-0``: the second's transcripts restored into the first's history) and one owner of blobs.
An id the archive can name is now kept as it is (the archive's own reversible encoding of unsafe ids can never be a
plain id's name); a plain id stays where earlier runs archived it.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from contextfold.archive import Archive, archive_key
from contextfold.cli import main
from contextfold.replay import manager_session_id
from contextfold.stores.archive_fs import FilesystemArchiveStore

NONCE = "rt23-ids-Kf2q"


def _tau_file(path: Path, words: str) -> Path:
    traj = [{"role": "system", "content": "You are an airline agent."},
            {"role": "user", "content": f"{words} {NONCE} " + "padding " * 400},
            {"role": "assistant", "content": "Looking into it."},
            {"role": "user", "content": "Thanks, anything else?"}]
    path.write_text(json.dumps([{"task_id": 1, "trial": 0, "traj": traj}]))
    return path


def _jsonl_file(path: Path, words: str) -> Path:
    lines = [{"role": "system", "content": "You are a coding agent."},
             {"role": "user", "content": f"{words} {NONCE} " + "padding " * 400},
             {"role": "assistant", "content": "On it."},
             {"role": "user", "content": "And then?"}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_compact_keeps_two_sessions_of_colliding_ids_apart(tmp_path: Path) -> None:
    archive_dir, store = tmp_path / "archive", f"local:{tmp_path / 'blobs'}"
    tau = _tau_file(tmp_path / "f.json", "slash session")
    plain = _jsonl_file(tmp_path / "f_1-0.jsonl", "underscore session")
    for source, extra in ((tau, ["--session", "f/1-0"]), (plain, [])):
        code = main(["compact", str(source), *extra, "-o", str(tmp_path / f"{source.stem}.out.jsonl"),
                     "--window", "4000", "--store", store, "--archive", str(archive_dir)])
        assert code == 0
    archive = Archive(FilesystemArchiveStore(archive_dir))
    assert archive.sessions() == ["f/1-0", "f_1-0"]  # (a9a74c5: ["f_1-0"], both in it)
    slash = [m.text for _, ms in archive.transcripts("f/1-0") for m in ms]
    underscore = [m.text for _, ms in archive.transcripts("f_1-0") for m in ms]
    assert any("slash session" in t for t in slash) and not any("underscore session" in t for t in slash)
    assert any("underscore session" in t for t in underscore) and not any("slash session" in t for t in underscore)
    folders = sorted(p.name for p in archive_dir.iterdir() if not p.name.startswith("."))
    assert folders == ["_f_2f1-0", "f_1-0"]  # (the plain id where it was)


@given(st.text(min_size=1, max_size=300), st.text(min_size=1, max_size=300))
def test_distinct_recorded_ids_get_distinct_archive_names(a: str, b: str) -> None:
    name_a, name_b = manager_session_id(a), manager_session_id(b)
    key_a, key_b = archive_key(name_a), archive_key(name_b)  # (always nameable: the manager accepts them)
    assert (key_a == key_b) == (a == b)


@given(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._\-]{0,199}", fullmatch=True))
def test_a_plain_id_keeps_its_archive_folder(session_id: str) -> None:
    assert manager_session_id(session_id) == session_id == archive_key(session_id)


def test_an_id_too_long_to_encode_is_named_by_its_hash() -> None:
    long_a, long_b = "t/" + "x" * 300 + "/a", "t/" + "x" * 300 + "/b"
    assert manager_session_id(long_a) != manager_session_id(long_b)
    assert manager_session_id(long_a).startswith("t-" + "x" * 100)
    assert len(archive_key(manager_session_id(long_a))) <= 200
