"""``contextfold cache read|grep`` over a real SQLite store on disk."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextfold.cache import ToolOutputCache
from contextfold.cli import main
from contextfold.stores import open_blob_store


@pytest.fixture()
def store(tmp_path: Path) -> tuple[str, str, str]:
    url = f"local://{tmp_path / 'store'}"
    cache = ToolOutputCache(open_blob_store(url))
    first = cache.put("\n".join(f"line {i}: {'ERROR disk full' if i == 37 else 'ok'}" for i in range(1, 101)))
    second = cache.put("alpha\nbeta ERROR here\ngamma\n")
    close = getattr(cache.store, "close", None)
    if callable(close):
        close()
    return url, first.id, second.id


def test_read_prints_numbered_lines_and_where_to_continue(store: tuple[str, str, str],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    url, ref, _ = store
    assert main(["cache", "read", ref, "--offset", "36", "--limit", "2", "--store", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"[{ref}: lines 36-37 of 100]"
    assert lines[1] == " 36\tline 36: ok" and lines[2] == " 37\tline 37: ERROR disk full"  # numbers right-aligned
    assert "offset=38" in lines[3]


def test_grep_searches_every_output_or_one(store: tuple[str, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    url, first, second = store
    assert main(["cache", "grep", "ERROR", "--store", url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "2 match(es) for /ERROR/ in 2 cached output(s)"
    assert sorted(out[1:]) == sorted([f"{first}:37:line 37: ERROR disk full", f"{second}:2:beta ERROR here"])
    assert main(["cache", "grep", "ERROR", "--ref", second, "-C", "1", "--store", url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == [f"{second}-1-alpha", f"{second}:2:beta ERROR here", f"{second}-3-gamma"]
    assert main(["cache", "grep", "nowhere", "--store", url]) == 0
    assert capsys.readouterr().out == "no match for /nowhere/ in 2 cached output(s)\n"


@pytest.mark.parametrize(
    ("argv", "code", "expected"),
    [
        (["cache", "read", "tout_0123456789abcdef"], 4,
         "contextfold: no cached tool output with ref 'tout_0123456789abcdef'\n"),
        (["cache", "read", "../etc/passwd"], 4, "contextfold: no cached tool output with ref '../etc/passwd'\n"),
        (["cache", "grep", "(unclosed"], 2, "contextfold: PATTERN: invalid regular expression '(unclosed': missing ), "
         "unterminated subpattern at position 0\n"),
        (["cache"], 2, "contextfold: cache: missing: 'read' or 'grep' (see contextfold cache --help)\n"),
    ],
)
def test_bad_input_is_one_line_and_its_exit_code(store: tuple[str, str, str], capsys: pytest.CaptureFixture[str],
                                                 argv: list[str], code: int, expected: str) -> None:
    url = store[0]
    assert main([*argv, "--store", url] if len(argv) > 1 else argv) == code
    assert capsys.readouterr().err == expected


def test_an_unknown_store_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cache", "grep", "x", "--store", "ftp://nowhere"]) == 3
    assert capsys.readouterr().err.startswith("contextfold: store: unknown blob store 'ftp://nowhere'")


def test_read_and_grep_print_what_a_session_of_the_store_remembered_redacted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The session learned the token in context; the output holds it bare, where no rule would see it.
    from contextfold.redact import Redactor, SecretMemory

    token = "Zq8vN2kLp4Rt7Wx1"
    url = f"local://{tmp_path / 'store'}"
    blobs = open_blob_store(url)
    memory = SecretMemory(blobs, "s1")
    Redactor(memory=memory).redact_text(f"password: {token}")
    memory.save()
    ref = ToolOutputCache(blobs).put(f"deploy done\nused {token} for the db\n").id
    blobs.close()
    for argv in (["cache", "read", ref], ["cache", "grep", "used"]):
        assert main([*argv, "--store", url]) == 0
        out = capsys.readouterr().out
        assert token not in out and "[REDACTED:password]" in out
        assert main([*argv, "--store", url, "--no-redact"]) == 0
        assert token in capsys.readouterr().out
