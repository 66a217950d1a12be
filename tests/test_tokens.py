"""Token counting: exact counts equal tiktoken, offline loading, overheads, and the incremental per-message cache."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import tiktoken
from conftest import TRAJECTORIES, require
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.messages import DocumentPart, ImagePart, Message, TextPart, ThinkingPart, ToolCall
from contextfold.tokens import (
    EstimatingCounter,
    MessageCounter,
    TiktokenCounter,
    TokenCounter,
    counter_for_model,
    encoding_for_model,
)
from contextfold.tokens import counting as tokens
from contextfold.tokens.counting import IMAGE_TOKENS_HIGH, IMAGE_TOKENS_LOW

SRC = Path(__file__).resolve().parents[1] / "src"


def swe_agent_tool_outputs() -> Iterator[str]:
    """Every tool output of the shared SWE-agent sessions (OBSERVATION user turns and role=tool messages)."""
    for path in sorted(TRAJECTORIES.glob("sweagent-*/*.traj")):
        for item in json.loads(path.read_text(encoding="utf-8"))["history"]:
            content = item.get("content")
            if isinstance(content, list):
                content = "\n".join(b.get("text", "") for b in content if isinstance(b, dict))
            if not isinstance(content, str):
                continue
            if item.get("role") == "tool" or (item.get("role") == "user" and content.startswith("OBSERVATION:")):
                yield content


@pytest.fixture(scope="module")
def outputs() -> list[str]:
    require(TRAJECTORIES.is_dir(), f"shared data not found at {TRAJECTORIES}")
    found = list(swe_agent_tool_outputs())
    assert len(found) > 1000
    return found


# ---- exactness ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_exact_counts_equal_encode_ordinary_on_every_swe_agent_tool_output(outputs: list[str], encoding: str) -> None:
    counter = TiktokenCounter(encoding)
    enc = counter.encoding
    mismatches = [i for i, text in enumerate(outputs) if counter.count(text) != len(enc.encode_ordinary(text))]
    assert mismatches == []


def test_patterns_match_tiktokens_published_definitions() -> None:
    # The published constructors download the BPE file; their pattern and special tokens are read without
    # calling them, by intercepting the loader.
    from tiktoken_ext import openai_public

    from contextfold.tokens.counting import _ENCODING_SPECS

    def fake_load(path: str, expected_hash: str | None = None) -> dict[bytes, int]:
        return {}

    original = openai_public.load_tiktoken_bpe
    openai_public.load_tiktoken_bpe = fake_load
    try:
        for name, spec in _ENCODING_SPECS.items():
            published = getattr(openai_public, name)()
            assert published["pat_str"] == spec.pat_str, name
            assert published["special_tokens"] == dict(spec.special_tokens), name
    finally:
        openai_public.load_tiktoken_bpe = original


def test_known_token_counts() -> None:
    # Fixed points: "hello world" is 2 tokens in both encodings; the cl100k/o200k split of a long word differs.
    assert TiktokenCounter("o200k_base").count("hello world") == 2
    assert TiktokenCounter("cl100k_base").count("hello world") == 2
    assert TiktokenCounter().count("") == 0


@pytest.mark.parametrize("special", ["<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "<|im_start|>"])
def test_special_token_text_is_counted_as_text_and_never_raises(special: str) -> None:
    for name in ("o200k_base", "cl100k_base"):
        counter = TiktokenCounter(name)
        text = f"before {special} after"
        assert counter.count(text) == len(counter.encoding.encode_ordinary(text))
        assert counter.count(text) > 3  # the special text is split into ordinary pieces, not one special token


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=300))
def test_exact_count_equals_encode_ordinary_for_any_text(text: str) -> None:
    counter = TiktokenCounter("o200k_base")
    assert counter.count(text) == len(counter.encoding.encode_ordinary(text))


def test_unknown_encoding_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="encoding_name: unknown tiktoken encoding 'p50k_base'"):
        TiktokenCounter("p50k_base")


# ---- loading: offline, lazy, shared -------------------------------------------------------------------------------


def test_counts_with_network_disabled_and_an_empty_tiktoken_cache(tmp_path: Path) -> None:
    code = (
        "import socket\n"
        "def refuse(*a, **k):\n"
        "    raise OSError('network disabled by the test')\n"
        "socket.socket = refuse\n"
        "socket.create_connection = refuse\n"
        "from contextfold.tokens import TiktokenCounter\n"
        "print(TiktokenCounter('o200k_base').count('hello world'), TiktokenCounter('cl100k_base').count('hi'))\n"
    )
    env = {"TIKTOKEN_CACHE_DIR": str(tmp_path / "empty-cache"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == ["2", "1"]


def test_importing_tokens_does_not_import_tiktoken() -> None:
    code = "import sys, contextfold.tokens, contextfold.truncate; print('tiktoken' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_encoding_is_loaded_once_and_shared_across_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(tokens._ENCODINGS, "cl100k_base", raising=False)
    built: list[object] = []
    real = tiktoken.Encoding

    class Recording(real):  # type: ignore[misc,valid-type]
        def __init__(self, *args: object, **kwargs: object) -> None:
            built.append(self)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(tiktoken, "Encoding", Recording)
    start = threading.Barrier(6)
    seen: list[object] = []

    def load() -> None:
        start.wait()
        seen.append(TiktokenCounter("cl100k_base").encoding)

    threads = [threading.Thread(target=load) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1
    assert len(seen) == 6 and all(e is built[0] for e in seen)


# ---- message overheads ----------------------------------------------------------------------------------------------


def cookbook_count(enc: tiktoken.Encoding, messages: list[dict[str, str]]) -> int:
    """The openai-cookbook formula for gpt-4o-class chat models: 3 per message, +1 per name, 3 reply priming."""
    n = 0
    for message in messages:
        n += 3
        for key, value in message.items():
            n += len(enc.encode_ordinary(value))
            if key == "name":
                n += 1
    return n + 3


def test_openai_chat_overhead_matches_the_cookbook_formula() -> None:
    counter = counter_for_model("gpt-4o")
    enc = TiktokenCounter("o200k_base").encoding
    wire = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "name": "alice", "content": "What is 2 + 2? <|endoftext|>"},
        {"role": "assistant", "content": "4"},
    ]
    messages = [
        Message.system(wire[0]["content"]),
        Message.user(wire[1]["content"], name="alice"),
        Message.assistant(wire[2]["content"]),
    ]
    assert counter.count_messages(messages) == cookbook_count(enc, wire)
    assert counter.count_messages([]) == 0


def test_tool_calls_parts_and_thinking_are_counted() -> None:
    counter = MessageCounter(TiktokenCounter())
    text = TiktokenCounter().count
    call = ToolCall("call_1", "bash", json.dumps({"command": "ls -la /tmp"}))
    bare = counter.count_message(Message.assistant(""))
    with_call = counter.count_message(Message.assistant("", [call]))
    assert with_call == bare + counter.overhead.per_tool_call + text("bash") + text(call.arguments)

    parts = (
        TextPart("look at this"),
        ImagePart(url="https://example.invalid/a.png", detail="low"),
        ImagePart(url="https://example.invalid/b.png"),
        ThinkingPart("I should read the file first", signature="sig"),
        DocumentPart(data="plain text document", media_type="text/plain"),
    )
    expected = (
        bare
        - text("assistant")
        + text("user")
        + text("look at this")
        + IMAGE_TOKENS_LOW
        + IMAGE_TOKENS_HIGH
        + text("I should read the file first")
        + text("plain text document")
    )
    assert counter.count_message(Message("user", parts)) == expected


def test_count_tools_grows_with_the_schemas() -> None:
    counter = counter_for_model("gpt-4o")
    schema = {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
    assert counter.count_tools([]) == 0
    one = counter.count_tools([schema])
    two = counter.count_tools([schema, {**schema, "function": {**schema["function"], "name": "python"}}])
    assert one > TiktokenCounter().count(json.dumps(schema["function"]["description"]))
    assert two > one


def test_unknown_format_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="format: unknown wire format 'soap'"):
        MessageCounter(EstimatingCounter(), format="soap")


# ---- the incremental cache ----------------------------------------------------------------------------------------


def history(n: int) -> list[Message]:
    out: list[Message] = [Message.system("You are a coding agent.")]
    for i in range(n - 1):
        if i % 2 == 0:
            out.append(Message.assistant(f"step {i}", [ToolCall(f"c{i}", "bash", json.dumps({"cmd": f"ls {i}"}))]))
        else:
            out.append(Message.tool(f"c{i - 1}", f"output of step {i} " * 20))
    return out


def test_recounting_after_appending_one_message_encodes_only_that_message(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = MessageCounter(TiktokenCounter("o200k_base"))
    enc = counter.counter.encoding  # type: ignore[attr-defined]
    encoded: list[str] = []
    real = enc.encode_ordinary

    def spy(text: str) -> list[int]:
        encoded.append(text)
        return real(text)

    monkeypatch.setattr(enc, "encode_ordinary", spy)
    messages = history(1000)
    first = counter.count_messages(messages)
    assert len(encoded) >= 1000  # every message was encoded once

    encoded.clear()
    assert counter.count_messages(messages) == first
    assert encoded == []  # a warm recount encodes nothing

    new = Message.tool("c998", "a brand new tool output that nobody has counted yet")
    grown = counter.count_messages([*messages, new])
    assert encoded == [new.content]  # only the appended message's text
    assert grown == first + counter.count_message(new)


class Spy:
    """A counter that counts its calls."""

    def __init__(self) -> None:
        self.inner = TiktokenCounter()
        self.calls = 0

    def count(self, text: str) -> int:
        self.calls += 1
        return self.inner.count(text)


def test_spy_counter_sees_only_new_messages() -> None:
    spy = Spy()
    assert isinstance(spy, TokenCounter)
    counter = MessageCounter(spy)
    messages = history(1000)
    counter.count_messages(messages)
    before = spy.calls
    counter.count_messages([*messages, Message.tool("c998", "one more")])
    assert spy.calls - before == 1


def test_cache_is_bounded_lru() -> None:
    counter = MessageCounter(EstimatingCounter(), cache_size=10)
    messages = [Message.user(f"message {i}") for i in range(25)]
    counter.count_messages(messages)
    assert counter.cache_info() == (10, 10)
    # The most recently used survive: recounting the last ten touches no new entry.
    size_before = counter.cache_info()[0]
    counter.count_messages(messages[-10:])
    assert counter.cache_info()[0] == size_before


def test_a_manager_grows_the_cache_to_hold_its_view() -> None:
    # Issue 12: a 100,000-message view in a 32k cache recounted every message on every pass (least recently used
    # first is exactly what the next pass reads first). The manager asks the counter to hold its whole view.
    from contextfold.manager import ContextManager

    spy = Spy()
    cm = ContextManager("gpt-4o", store="memory", archive="memory", counter=MessageCounter(spy, cache_size=100))
    cm.add([Message.user(f"message {i}") for i in range(400)])
    assert cm.counter.cache_info() == (400, 500)
    before = spy.calls
    cm.counter.count_messages(cm.messages())
    assert spy.calls == before  # every message of the view still counted from the cache
    cm.counter.ensure_capacity(10)
    assert cm.counter.cache_info()[1] == 500  # it never shrinks


def test_meta_changes_do_not_invalidate_the_cache() -> None:
    counter = MessageCounter(TiktokenCounter())
    m = Message.user("same text")
    n = counter.count_message(m)
    assert counter.count_message(m.with_meta(label="x", protected=True)) == n
    assert counter.cache_info()[0] == 1


# ---- estimating counter and model choice ---------------------------------------------------------------------------


def test_estimating_counter_by_provider_and_calibration() -> None:
    claude = EstimatingCounter.for_provider("anthropic")
    other = EstimatingCounter.for_provider("somebody")
    text = "x" * 700
    assert claude.count(text) == 200  # 3.5 chars per token
    assert other.count(text) == 175  # 4 chars per token
    assert other.count("") == 0 and other.count("a") == 1
    revision = other.revision
    other.set_calibration(1.2)
    assert other.count(text) == 210 and other.revision == revision + 1
    other.set_calibration(100.0)
    assert other.calibration == tokens._MAX_CALIBRATION
    with pytest.raises(ValueError, match="calibration"):
        other.set_calibration(0)
    with pytest.raises(ValueError, match="chars_per_token"):
        EstimatingCounter(0)


def test_message_counter_drops_its_cache_when_calibration_changes() -> None:
    inner = EstimatingCounter()
    counter = MessageCounter(inner, format="anthropic")
    m = Message.user("y" * 400)
    before = counter.count_message(m)
    inner.set_calibration(2.0)
    assert counter.count_message(m) == before + 100


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("openai/gpt-4.1", "o200k_base"),
        ("gpt-5-mini", "o200k_base"),
        ("o3", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo-2024-04-09", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
    ],
)
def test_counter_for_openai_models_is_exact(model: str, expected: str) -> None:
    counter = counter_for_model(model)
    assert isinstance(counter.counter, TiktokenCounter)
    assert counter.counter.encoding_name == expected
    assert counter.format == "openai_chat"


@pytest.mark.parametrize(
    ("model", "chars", "format"),
    [
        ("claude-sonnet-4-5", 3.5, "anthropic"),
        ("gemini-2.5-pro", 4.0, "gemini"),
        ("llama-3.3-70b", 4.0, "openai_chat"),
        ("never-heard-of-it", 4.0, "openai_chat"),
    ],
)
def test_counter_for_other_models_estimates(model: str, chars: float, format: str) -> None:
    counter = counter_for_model(model)
    assert isinstance(counter.counter, EstimatingCounter)
    assert counter.counter.chars_per_token == chars
    assert counter.format == format


def test_encoding_for_model_leaves_other_providers_alone() -> None:
    assert encoding_for_model("claude-3-5-sonnet") is None
    assert encoding_for_model("gpt-4o") == "o200k_base"


def test_short_texts_are_counted_once_and_the_same_as_the_encoder_counts_them() -> None:
    # TiktokenCounter remembers the counts of short texts (issue 15: an extractive summary weighs every entity).
    from contextfold.tokens import TiktokenCounter
    from contextfold.tokens.counting import _SHORT_COUNTS

    counter = TiktokenCounter("o200k_base")
    texts = ["/testbed/django/db/models/query.py", "ValueError", "x" * 256, "y" * 257, "héllo wörld"]
    counts = [counter.count(t) for t in texts]
    assert counts == [len(counter.encoding.encode_ordinary(t)) for t in texts]
    assert [counter.count(t) for t in texts] == counts
    memo = _SHORT_COUNTS["o200k_base"]
    assert "x" * 256 in memo and "y" * 257 not in memo


def test_a_remembered_count_is_only_reused_for_what_counts_the_same() -> None:
    # Counts are remembered by role, name, the text's hash and length and the calls' names and arguments (not by
    # the fingerprint's canonical JSON, issue 22): ids and meta share a count, everything counted does not.
    counter = MessageCounter(TiktokenCounter())
    call = Message.assistant("x", [ToolCall("c1", "bash", '{"cmd": "ls"}')], meta={"id": "a"})
    same = Message.assistant("x", [ToolCall("c2", "bash", '{"cmd": "ls"}')], meta={"id": "b"})
    longer = Message.assistant("x", [ToolCall("c1", "bash", '{"cmd": "ls -la /tmp/some/where"}')])
    assert counter.count_message(same) == counter.count_message(call)
    assert counter.count_message(longer) > counter.count_message(call)
    named = Message.tool("c1", "the same output", name="bash")
    assert counter.count_message(named) > counter.count_message(Message.tool("c1", "the same output"))
    assert counter.count_message(Message.user("a b c")) < counter.count_message(Message.user("a b c d"))
