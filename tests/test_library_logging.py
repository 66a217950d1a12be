"""contextfold's warnings go to logging, never straight to stderr (issue 21 §6)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# An emergency (hard) compaction at the first prepare(): the manager logs a warning on "contextfold.manager".
SCRIPT = textwrap.dedent("""
    import logging, sys
    from contextfold import ContextManager
    cm = ContextManager("gpt-4o", max_context_tokens=8_000, store="memory", archive="memory", session_id="log")
    cm.add([{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "word " * 300}
            for i in range(30)])
    if sys.argv[1] == "configured":
        logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    cm.prepare()
    assert cm.compactions == 1
    cm.close()
""")


def run(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=120,
                          check=True)


def test_nothing_reaches_stderr_when_the_application_configured_no_logging() -> None:
    assert run("silent").stderr == ""


def test_a_configured_handler_still_gets_the_warning() -> None:
    assert "contextfold.manager._manager: hard compaction before the model call" in run("configured").stderr
