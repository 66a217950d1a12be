"""A redaction callback changed mid-session redacts the placeholders the read-ahead built before the change.

Suspected by the fifteenth session's red team (lane E): ``Redactor.digest_state()`` does not cover a callback's
answers, so a placeholder built ahead could outlive a change in them. Not a leak, checked by the nineteenth: a
placeholder (and its state) comes from ``blank()``, ``mentions_secret()`` and ``safe_cut()``, which read the
patterns and the memory only; the callback is a last pass over what leaves the process, and with a callback no
redacted message is kept (``redact_message``: every time), so the view sent (``apply_to_model``) and the archive are
passed through the callback of the moment, placeholders built ahead included. (A callback is documented as a function
of its input only: the same callback answering otherwise for the same string is not asked again, ``CallbackMemo``.)
This pins it: the placeholders list the codename, the wire and the archive never do once the callback takes it.
(With the full digest: the light one lists nothing of these long outputs.)
"""

from __future__ import annotations

import json

from contextfold import _background
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor

NONCE = "rt19cb4f"
CODENAME = f"orchid{NONCE}"
SWITCH_AT = 8  # (the read-ahead has built the placeholders of the outputs a masking takes next by then)


def _run_tests(i: int) -> list[Message]:
    call = ToolCall(f"c{i}", "bash", json.dumps({"command": f"pytest tests/test_{i}.py"}))
    body = "".join(f"tests/test_{i}.py::test_{n} FAILED {CODENAME} in {n * i} ms: KeyError('k{n}')\n"
                   for n in range(90))
    return [Message.assistant(f"run batch {i}", (call,)), Message.tool(call.id, body)]


def test_placeholders_built_before_a_callback_changed_leave_redacted_by_the_new_one() -> None:
    redactor = Redactor(apply_to_model=True, callback=lambda text: text)
    cm = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory", session_id=NONCE,
                        policy={"clear_at_least": 3_000, "keep_tool_io_pairs": 1, "cache_aware": False,
                                "tool_output_budget_tokens": 5_800, "mask_digest": "full"}, redact=redactor)
    cm.counter.wait_exact()
    cm.add([Message.system("agent"), Message.user("make the tests pass")])
    maskings_after_switch = 0
    try:
        for i in range(10):
            if i == SWITCH_AT:
                assert cm.redactor is not None
                cm.redactor.callback = lambda text: text.replace(CODENAME, "[REDACTED:codename]")
            cm.add(_run_tests(i))
            maskings = cm.maskings
            sent = json.dumps(cm.prepare())
            if i >= SWITCH_AT:
                maskings_after_switch += cm.maskings - maskings
                assert CODENAME not in sent
            _background.wait_idle()
        masked = [m for m in cm.messages() if m.kind == "masked"]
        assert maskings_after_switch and masked and all(CODENAME in str(m.content) for m in masked)
    finally:
        cm.close()
    assert cm.archive is not None
    assert CODENAME not in repr([m for _, messages in cm.archive.transcripts(cm.session_id) for m in messages])
