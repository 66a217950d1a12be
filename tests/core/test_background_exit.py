"""The background thread's running job ends before the interpreter finalizes (issue 22).

A daemon thread still running at finalization is ended where it next takes the GIL; inside a native call that
released it (the secret scan's automaton) that aborted the whole process ("FATAL: exception not rethrown"). At exit
the jobs not started are dropped and the running one is waited for, a bounded time.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

_SCRIPT = textwrap.dedent("""
    import hashlib, sys, threading
    from contextfold import _background

    started = threading.Event()

    def job(path):
        started.set()
        block = bytes(4_000_000)
        for _ in range(30):  # (native work that gives the GIL away, as the secret scan's automaton does)
            hashlib.sha256(block).digest()
        open(path, "w").write("finished")

    def never(path):
        open(path, "w").write("a queued job ran at exit")

    _background.submit(job, sys.argv[1])
    for _ in range(3):
        _background.submit(never, sys.argv[2])
    started.wait()
""")


def test_the_running_job_ends_before_the_interpreter_exits_and_queued_ones_are_dropped(tmp_path: Path) -> None:
    finished, queued = tmp_path / "finished", tmp_path / "queued"
    src = Path(__file__).resolve().parents[2] / "src"
    done = subprocess.run([sys.executable, "-c", _SCRIPT, str(finished), str(queued)], capture_output=True,
                          text=True, timeout=60, env={"PYTHONPATH": str(src), "PATH": ""})
    assert done.returncode == 0, done.stderr
    assert finished.read_text() == "finished"
    assert not queued.exists()
    assert "FATAL" not in done.stderr


_ANY_THREAD_SCRIPT = textwrap.dedent("""
    import sys, threading
    from contextfold.redact._triggers import TriggerFinder

    finder = TriggerFinder(["password", "secret", "ghp_"])
    assert finder.one_pass
    text = "x" * 30_000_000
    started = threading.Event()

    def scan():  # (a thread of the application's, or the telemetry thread redacting an event)
        started.set()
        while True:
            finder.present(text)

    threading.Thread(target=scan, daemon=True).start()
    started.wait()
""")


def test_no_thread_is_inside_the_trigger_automaton_when_the_interpreter_finalizes(tmp_path: Path) -> None:
    """Any thread, not only the background one: a daemon thread inside the automaton at finalization aborted the
    process (SIGABRT, "FATAL: exception not rethrown"); at exit the automaton is closed to other threads and the
    calls in it are waited for, and a thread scanning after that falls back to looking for each trigger in turn."""
    src = Path(__file__).resolve().parents[2] / "src"
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", _ANY_THREAD_SCRIPT], capture_output=True, text=True,
                              timeout=60, env={"PYTHONPATH": str(src), "PATH": ""})
        assert done.returncode == 0, done.stderr
        assert "FATAL" not in done.stderr
