"""The read-ahead reads a tool output's digest material only once a masking can take it soon (issue 22: it read
every output as it arrived, ~1,500 ms of CPU per million tokens for the read-ahead, ten times its bar): once the
output has left the results masking keeps (the newest ``keep_tool_io_pairs``, released one early). An output no
longer than its placeholder is never masked, and never read. A read-ahead that releases outputs releases the next
held one with them (``BUILT_TOGETHER``: built together, a placeholder costs about half on the second): the turn that
would have released that one alone releases nothing.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from contextfold import _background
from contextfold._memo import text_key
from contextfold.cache import _digest
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall


def _manager(session_id: str) -> ContextManager:
    # (The full digest: its ranked material is what is read ahead or not; the light one reads none.)
    return ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory",
                          session_id=session_id, message_id_prefix="r", policy={"mask_digest": "full"})


def _turn(nonce: str, i: int, lines: int = 12) -> list[Message]:
    call = ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"grep -rn load_{i} src/"}))
    body = "\n".join(f"/srv/{nonce}/pkg_{i}/module_{n}.py:{n * 13}: KeyError in load_{nonce}_{i}_{n}() "
                     f"took {n * 7} ms" for n in range(lines))
    return [Message.assistant(f"Looking at load_{nonce}_{i}.", [call]), Message.tool(f"c{i}", body, name="bash")]


def _material_read(m: Message) -> bool:
    return text_key(m.text) in _digest._materials


def test_the_outputs_masking_keeps_or_never_takes_are_not_read_for_their_digest() -> None:
    nonce = datetime.now(UTC).strftime("%H%M%S%f")  # texts no other test read (readings are remembered by text)
    cm = _manager("held-outputs")
    history = [Message.system("You fix bugs."), Message.user(f"Fix load_{nonce} in src/.")]
    for i in range(14):
        history += _turn(nonce, i)
    # (a text no other test reads: readings are remembered by text for the whole process, and "ok" is common)
    small = Message.tool("c-small", f"ok {nonce}", name="bash")
    history += [Message.assistant("Checking.", [ToolCall("c-small", "bash", "{}")]), small]
    cm.add(history)
    assert cm.budgets.soft // 2 < cm.tokens() < cm.budgets.soft  # read ahead, and nothing masked yet
    cm.prepare()
    _background.wait_idle()
    outputs = [m for m in cm.messages() if m.role == "tool"]
    # Masking keeps the newest 4 results ("ok" among them): the newest 3 (keep - 1) are held, and "ok" never read;
    # the next held output to be released goes with the 12 released.
    assert [_material_read(m) for m in outputs] == [True] * 13 + [False] + [False]

    cm.add(_turn(nonce, 14))  # the next turn pushes the output released with them out: nothing new is released
    cm.prepare()
    _background.wait_idle()
    outputs = [m for m in cm.messages() if m.role == "tool" and m.text != small.text]
    assert [_material_read(m) for m in outputs] == [True] * 13 + [False] * 2

    cm.add(_turn(nonce, 15))  # the one after pushes the 14th out: it is released, and the next held one with it
    cm.prepare()
    _background.wait_idle()
    outputs = [m for m in cm.messages() if m.role == "tool" and m.text != small.text]
    assert [_material_read(m) for m in outputs] == [True] * 15 + [False]
    cm.close()
