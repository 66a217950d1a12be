"""Red team (issue 21 §1): a Kubernetes Secret's value, decoded later in the session.

A k8s Secret's ``data:`` values are base64. The redactor takes ``password: S3hTN20...`` out of the manifest and
remembers that base64 string; the agent then runs ``kubectl get secret … | base64 -d`` and the password itself
comes back bare in a later output, where no rule sees it and the memory knows only its encoded form. It reached
the archived transcript (5894f4b). The same decoded form of ``Authorization: Basic …`` is remembered
(``Redactor.learn``), this one is not.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall

PASSWORD = "Kx7mWq2Lp9ZtRv"
MANIFEST = ("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\ndata:\n  username: "
            + base64.b64encode(b"app").decode() + "\n  password: " + base64.b64encode(PASSWORD.encode()).decode())


def test_a_k8s_secret_value_decoded_later_is_redacted(tmp_path: Path) -> None:
    cm = ContextManager("gpt-4o", max_context_tokens=8_000, store=f"local://{tmp_path / 'store'}",
                        archive=str(tmp_path / "archive"), session_id="k8s")
    calls = [ToolCall("c1", "bash", json.dumps({"cmd": "kubectl get secret db -o yaml"})),
             ToolCall("c2", "bash", json.dumps({"cmd": "kubectl get secret db -o jsonpath={.data.password} | "
                                                       "base64 -d"}))]
    cm.add([Message("user", "Why can the app not reach the database?"),
            Message("assistant", "Reading the secret.", tool_calls=calls[:1]),
            Message("tool", MANIFEST, tool_call_id="c1", name="bash"),
            Message("assistant", "Decoding it.", tool_calls=calls[1:]),
            Message("tool", PASSWORD, tool_call_id="c2", name="bash"),
            Message("assistant", "The password is set; the host is wrong.")])
    cm.prepare()
    cm.finish()
    cm.close()
    archived = b"".join(p.read_bytes() for p in (tmp_path / "archive").rglob("*") if p.is_file())
    assert b"kubectl get secret" in archived
    assert PASSWORD.encode() not in archived
