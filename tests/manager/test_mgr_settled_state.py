"""The outputs no masking will ever take, read from what the view keeps, are those read from the whole view (issue 22).

The Anthropic request's second cache mark goes past the tool results masking passes over for good
(``Masking.settled``). It used to pair and count the whole view on every request; it now reads the pairs and counts
the view keeps. After any sequence of adds, requests, maskings and compactions, it must answer exactly what the
from-scratch derivation over the view's messages answers.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold import ContextManager
from contextfold.errors import InsufficientBudget
from contextfold.messages import Message, ToolCall

# Outputs masking may take (long), never takes (shorter than a placeholder) and one tool it is told to leave alone.
OUTPUTS = {
    "long": "\n".join(f"{n:4d}  value_{n} = compute({n}) + offset_{n * 3}" for n in range(1, 60)),
    "short": "ok",
}
TOOLS = ("bash", "bash", "edit", "keep_me")


@st.composite
def turns(draw: Any) -> tuple[str, Any]:
    """A tool-calling turn (then a request, as an agent sends one, or not), a user message, or a compaction."""
    kind = draw(st.sampled_from(("turn",) * 8 + ("user", "compact")))
    if kind == "turn":
        return kind, (draw(st.sampled_from(TOOLS)), draw(st.sampled_from(("long", "long", "long", "short"))),
                      draw(st.sampled_from((False, False, False, False, True))),
                      draw(st.sampled_from(("openai_chat", "anthropic", "anthropic", None))))
    return kind, None


@settings(max_examples=10, deadline=None)
@given(st.lists(turns(), min_size=6, max_size=30))
def test_the_settled_outputs_read_from_the_view_are_those_read_from_its_messages(ops: list[tuple[str, Any]]) -> None:
    cm = ContextManager("gpt-4o", max_context_tokens=3_000, store="memory", archive=False, session_id="settled",
                        message_id_prefix="s",
                        policy={"clear_at_least": 300, "exclude_tools": ["keep_me"], "mask_digest_tokens": 20})
    try:
        cm.add([Message.system("You are a coding agent."), Message.user("measure every module")])
        for n, (kind, arg) in enumerate(ops):
            if kind == "turn":
                tool, output, protected, request = arg
                call = ToolCall(f"c{n}", tool, json.dumps({"module": n}))
                result = Message.tool(f"c{n}", OUTPUTS[output].replace("compute", f"compute{n}"), name=tool)
                if protected:
                    result = result.with_meta(protected=True)
                cm.add([Message.assistant(f"step {n}", [call]), result])
                if request is not None:
                    # (protected outputs may fill the window: the view is still there to read)
                    with contextlib.suppress(InsufficientBudget):
                        cm.prepare(request, cache_breakpoints=request == "anthropic")
            elif kind == "user":
                cm.add(Message.user(f"go on with step {n}"))
            else:
                with contextlib.suppress(InsufficientBudget):  # (as above: protected outputs may fill the window)
                    cm.compact()
            assert cm._masking.settled() == cm._masking.settled(cm._view.normalized())
    finally:
        cm.close()
