"""Inputs that used to hang or exhaust memory (issue 21 §5): a FIFO nobody writes to, ``/dev/zero``, a pipe.

Before: a FIFO as input hung every command; ``/dev/zero`` ended in ``internal error: MemoryError``. Now a command
reads what a pipe already carries (``<(command)`` works), says so when a FIFO has no writer, and refuses devices
and inputs over the read limit, in one line with exit code 2.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from planting import plant_unix_socket

from contextfold._files import InputTooLarge, read_input
from contextfold.cli import main

SESSION = json.dumps([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "session.json"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("command", [["count"], ["convert", "--to", "anthropic"], ["replay"], ["report"]])
def test_a_fifo_nobody_writes_to_is_one_line_not_a_hang(fifo: Path, capsys: pytest.CaptureFixture[str],
                                                        command: list[str]) -> None:
    assert main([*command, str(fifo)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"contextfold: {fifo}: a FIFO nothing was written to (contextfold reads what a writer already " \
                  "sends; it does not wait for one)\n"


@pytest.mark.parametrize("command", [["count"], ["convert", "--to", "anthropic"], ["replay"], ["report"]])
def test_a_device_is_refused_not_read_until_memory_runs_out(capsys: pytest.CaptureFixture[str],
                                                            command: list[str]) -> None:
    assert main([*command, "/dev/zero"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == "contextfold: /dev/zero: a device, not a regular file: give a file (or a pipe) to read\n"


def test_a_pipe_with_a_writer_is_read_like_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    # What <(cat session.json) hands a command: /dev/fd/N, the read end of a pipe.
    read_end, write_end = os.pipe()
    os.write(write_end, SESSION.encode())
    os.close(write_end)
    try:
        assert main(["count", f"/dev/fd/{read_end}"]) == 0
    finally:
        os.close(read_end)
    out, _ = capsys.readouterr()
    assert out.splitlines()[1].split()[1:] == ["2", "13"]


def test_reads_stop_at_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 2_000)
    with pytest.raises(InputTooLarge, match="2,000 bytes, over the 1,000 a command reads"):
        read_input(path, limit=1_000)
    read_end, write_end = os.pipe()
    os.write(write_end, b" " * 2_000)
    os.close(write_end)
    try:
        with pytest.raises(InputTooLarge, match="more than the 1,000 bytes"):
            read_input(f"/dev/fd/{read_end}", limit=1_000)
    finally:
        os.close(read_end)
    assert read_input(path, limit=2_000) == b" " * 2_000


def test_a_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    plant_unix_socket(path)
    with pytest.raises(OSError):  # a socket cannot even be opened as a file; never a hang
        read_input(path)


@pytest.mark.parametrize("command", [["count"], ["replay", "--window", "8000"], ["replay"]])
def test_a_huge_model_name_is_named_not_echoed_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    command: list[str]) -> None:
    session = tmp_path / "session.json"
    session.write_text(SESSION, encoding="utf-8")
    model = "gpt-" + "x" * 100_000
    main([*command, "--model", model, str(session)])
    _, err = capsys.readouterr()
    assert "unknown model 'gpt-xxxx" in err and "(100,004 characters)" in err
    assert max(len(line) for line in err.splitlines()) < 400


def test_unknown_model_errors_clip_the_name() -> None:
    from contextfold.errors import UnknownModel

    text = str(UnknownModel("m" * 50_000))
    assert len(text) < 800 and "(50,000 characters)" in text
    assert str(UnknownModel("my-model")).startswith("unknown model 'my-model': pass its window explicitly")
