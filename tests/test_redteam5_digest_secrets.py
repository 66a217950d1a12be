"""Red team (issue 21 §1): a masked output's digest, read from the stored whole output, with the memory off.

An output cut at write time is stored whole; when it is masked later, its digest is read from the stored text and
each item is shown only if ``Redactor.mentions_secret`` says it holds no secret. Without the session's memory
(``Redactor(remember=False)``) that check sees one word alone: a piece of a PEM body (the entity reader splits it
at ``+`` and ``/``) matches no rule, so the placeholder lists it, and the archive keeps it. Found on 5894f4b.
"""

from __future__ import annotations

import base64
import json
import random
import re
from pathlib import Path

from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor

BODY = base64.b64encode(random.Random(3).randbytes(1190)).decode()
PEM = ("-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(BODY[i:i + 64] for i in range(0, len(BODY), 64))
       + "\n-----END RSA PRIVATE KEY-----")


def _fragments(text: str) -> list[str]:
    """Runs of 12 letters and digits of the key body found in ``text``."""
    runs = re.findall(r"[A-Za-z0-9]{12,}", text)
    return sorted({run for run in runs if any(run[i:i + 12] in BODY for i in range(len(run) - 11))})


def test_a_digest_never_lists_a_piece_of_a_key_even_without_the_memory(tmp_path: Path) -> None:
    output = "\n".join(["all good here"] * 200 + [PEM] + ["done and dusted"] * 400)
    cm = ContextManager("gpt-4o", max_context_tokens=20_000, store="memory", archive=str(tmp_path / "archive"),
                        session_id="pem", redact=Redactor(remember=False))
    cm.add(Message("user", "Check the key files."))
    for t in range(12):
        call = ToolCall(f"c{t}", "bash", json.dumps({"cmd": f"cat key{t}.pem"}))
        cm.add(Message("assistant", f"step {t}", tool_calls=(call,)))
        body = output if t == 0 else "\n".join(f"r{t} {i} fine value {i * 3}" for i in range(150))
        cm.add(Message("tool", body, tool_call_id=f"c{t}", name="bash"))
        cm.prepare()
    view = cm.prepare()
    cm.finish()
    cm.close()
    first = next(m for m in view if m.get("tool_call_id") == "c0")
    assert cm.maskings and first["content"].startswith("[tool output trimmed; ref=")  # masked, with a digest
    archived = "".join(p.read_text() for p in (tmp_path / "archive").rglob("*.jsonl"))
    assert (_fragments(first["content"]), _fragments(archived)) == ([], [])
