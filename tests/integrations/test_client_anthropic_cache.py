"""The Anthropic client places contextfold's prompt-cache breakpoints, the ones the replay bills (issue 25).

Through the real anthropic SDK against the scripted server: the request carries ``cache_control`` after the pinned
head, after the latest summary (with its receipt, and on up to the first output not masked yet) and on the last
history message, never on the budget line; a
caller's own ``cache_control`` anywhere leaves the request as it is; ``cache_breakpoints=False`` turns it off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic

from contextfold.billing import blocks_of
from contextfold.billing.breakpoints import breakpoint_indices
from contextfold.integrations.anthropic_client import AnthropicClient
from contextfold.manager import ContextManager
from contextfold.messages import Message
from contextfold.testing.server import ScriptedLLMServer

EPHEMERAL = {"type": "ephemeral"}
TOOLS = [{"name": "bash", "description": "run a command",
          "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}}}]


def lines(name: str, n: int) -> str:
    """An output of ``n`` distinct lines (write-time truncation keeps it whole in a 60K window)."""
    return "\n".join(f"{name}{i} = {i * 37}" for i in range(n))


def compacted_session(tmp_path: Path, **policy: Any) -> ContextManager:
    """System prompt, a summary of 6 tool turns with its receipt, then 2 tool turns after it."""
    cm = ContextManager("gpt-4o", max_context_tokens=60_000, store="memory", archive=str(tmp_path / "a"),
                        session_id="s", policy=policy or None)
    cm.add([Message.system("You are a coding agent."), Message.user("fix the parser")])
    for i in range(8):
        if i == 6:
            cm.compact(force=True)
        cm.add([{"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": "bash",
                                                   "input": {"cmd": f"cat f{i}.py"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}",
                                              "content": lines(f"f{i}.line", 12)}]}], format="anthropic")
    return cm


def marks_of(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """(where, the marked block's text or id) of every cache_control in a request body."""
    found: list[tuple[str, Any]] = []
    for block in body.get("system") if isinstance(body.get("system"), list) else ():
        if "cache_control" in block:
            found.append(("system", block["text"]))
    for message in body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else ():
            if "cache_control" in block:
                assert block["cache_control"] == EPHEMERAL
                found.append((block["type"], block.get("text") or block.get("tool_use_id") or block.get("id")))
    return found


def send(cm: ContextManager, **options: Any) -> dict[str, Any]:
    kwargs = options.pop("kwargs", {})
    with ScriptedLLMServer(["ok"], validator="formats") as server:
        AnthropicClient(anthropic.Anthropic(base_url=server.url, api_key="t", max_retries=0), **options).messages(
            cm, model="claude-test", max_tokens=50, **{"tools": TOOLS, **kwargs})
    assert not server.invalid_requests
    body: dict[str, Any] = server.requests[0].body
    return body


def test_the_request_marks_the_head_the_summary_and_the_last_history_message(tmp_path: Path) -> None:
    cm = compacted_session(tmp_path, context_status="always")
    view = cm.messages()
    request = next(i for i, m in enumerate(view) if m.text == "fix the parser")
    assert view[request - 1].kind == "receipt"  # the summary, its receipt, then the request the summary kept
    body = send(cm)
    # the second mark covers the summary and its receipt and goes on as far as a masking batch cannot change: up to
    # the turn of the first output not masked yet (here the request right after them)
    assert marks_of(body) == [("system", "You are a coding agent."), ("text", "fix the parser"),
                              ("tool_result", "toolu_7")]
    # the budget line, sent last, carries no mark: the next request reads everything before it
    assert body["messages"][-1]["content"].startswith("[context: ")
    # the replay bills the same three marks
    blocks = blocks_of(view, lambda m: 1, marks=breakpoint_indices(view))
    assert [i for i, b in enumerate(blocks) if b.breakpoint] == [0, request, len(view) - 1]
    after = cm.messages()  # the history keeps its messages unmarked (and gains the reply)
    parts = [p for m in after if isinstance(m.content, tuple) for p in m.content]
    assert after[:-1] == view and not any(getattr(p, "cache_control", None) for p in parts)


def test_a_callers_own_cache_control_is_left_alone(tmp_path: Path) -> None:
    cm = compacted_session(tmp_path)
    top = send(cm, kwargs={"cache_control": EPHEMERAL})
    assert top["cache_control"] == EPHEMERAL and marks_of(top) == []
    tools = [{**TOOLS[0], "cache_control": EPHEMERAL}]
    assert marks_of(send(cm, kwargs={"tools": tools})) == []
    assert marks_of(send(cm, cache_breakpoints=False)) == []


def test_without_a_system_message_the_callers_system_prompt_is_the_head(tmp_path: Path) -> None:
    cm = ContextManager("gpt-4o", max_context_tokens=60_000, store="memory", archive=str(tmp_path / "a"),
                        session_id="s")
    cm.add(Message.user("hi"))
    body = send(cm, kwargs={"system": "rules"})
    assert marks_of(body) == [("system", "rules"), ("text", "hi")]


def test_marks_the_caller_put_in_the_history_switch_contextfold_s_off_and_no_request_carries_five(
        tmp_path: Path) -> None:
    # A review found 5 marks on the wire (Anthropic refuses more than 4): four caller marks in the messages, and
    # contextfold still marked the caller's system prompt. And marks on blocks contextfold keeps verbatim
    # (documents with a text source, search results) went unseen, so contextfold added its own: 6.
    marked = {"cache_control": EPHEMERAL}
    cm = ContextManager("gpt-4o", max_context_tokens=60_000, store="memory", archive=str(tmp_path / "a"),
                        session_id="s")
    cm.add([{"role": "user", "content": [{"type": "text", "text": "part 1", **marked},
                                         {"type": "text", "text": "part 2", **marked}]},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": [{"type": "text", "text": "part 3", **marked},
                                         {"type": "text", "text": "part 4", **marked}]}], format="anthropic")
    body = send(cm, kwargs={"system": "You are terse."})
    assert body["system"] == "You are terse." and len(marks_of(body)) == 4
    documents = ContextManager("gpt-4o", max_context_tokens=60_000, store="memory", archive=str(tmp_path / "b"),
                               session_id="s")
    document = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "doc"}, **marked}
    history: list[dict[str, Any]] = [{"role": "user", "content": [document, {"type": "text", "text": "read it"}]},
                                     {"role": "assistant", "content": "ok"}]
    for i in range(12):
        history += [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]
    documents.add([*history, {"role": "user", "content": "last"}], format="anthropic")
    request = documents.prepare("anthropic", cache_breakpoints=True)
    assert str(request).count("cache_control") == 1  # the caller's, and none of ours


def test_a_message_ending_in_a_block_kept_verbatim_is_marked_where_the_mark_reaches_the_wire() -> None:
    from contextfold.billing.breakpoints import mark_breakpoints
    from contextfold.messages import TextPart, UnknownPart

    result = {"type": "search_result", "source": "s", "title": "t", "content": [{"type": "text", "text": "x"}]}
    message = Message("user", (TextPart("see"), UnknownPart(result, format="anthropic")))
    (marked,) = mark_breakpoints([message])
    assert isinstance(marked.content, tuple)
    assert marked.content[0] == TextPart("see", cache_control=EPHEMERAL) and marked.content[1] == message.content[1]


def test_the_second_mark_goes_past_outputs_masking_will_never_take(tmp_path: Path) -> None:
    """Issue 25: the mark stopped at the first output not masked yet, even one no masking batch would ever change.

    Output 0 is masked; output 1 is smaller than its placeholder, output 2 comes from an excluded tool and output
    3 from a tool whose policy says never mask: a masking batch changes none of them, so the mark goes on to the
    turn of output 4, the first one a batch can take (it used to sit on output 0's placeholder). The request the
    batch rewrote also marks where the previous request's mark was, so that it reads that entry.
    """
    cm = ContextManager("gpt-4o", max_context_tokens=60_000, store="memory", archive=str(tmp_path / "a"),
                        session_id="s", policy={"tool_output_budget_tokens": 520, "mask_digest_tokens": 0,
                                                "clear_at_least": 0, "keep_tool_io_pairs": 1, "cache_aware": False,
                                                "exclude_tools": ["read_config"],
                                                "tools": {"lint": {"never_mask": True}}})
    cm.add([Message.system("You are a coding agent."), Message.user("fix the parser")])
    outputs = [("bash", "cat f0.py", lines("x", 25)), ("bash", "true", "ok"),
               ("read_config", "cfg", lines("key", 25)), ("lint", "f.py", lines("f.py:W291 line", 25)),
               ("bash", "cat f4.py", lines("y", 25)), ("bash", "cat f5.py", lines("z", 25))]
    for i, (tool, arg, text) in enumerate(outputs):
        cm.add([{"role": "assistant", "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": tool,
                                                   "input": {"cmd": arg}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}",
                                              "content": text}]}], format="anthropic")
    body = send(cm)  # the request's prepare masks output 0 (one batch, nothing else)
    view = cm.messages()  # and the reply
    assert [m.tool_call_id for m in view if m.kind == "masked"] == ["toolu_0"]
    # the head; the last message before the batch's turn (the previous request's second mark was there: this
    # request reads it); the last message before output 4's turn (output 3's result); the last history message
    assert marks_of(body) == [("system", "You are a coding agent."), ("text", "fix the parser"),
                              ("tool_result", "toolu_3"), ("tool_result", "toolu_5")]
    # the replay bills the marks the request carried (the reply has joined the view since: it is the last now)
    assert [view[i].tool_call_id or view[i].text for i in cm.breakpoint_indices()[:-1]] == [
        "You are a coding agent.", "fix the parser", "toolu_3"]
    # the next request masks nothing: no bridge, the anchor's place is free again
    assert marks_of(send(cm)) == [("system", "You are a coding agent."), ("tool_result", "toolu_3"),
                                  ("text", "ok")]
