"""Lazy exact counting: byte upper bounds until the tokenizer is loaded, exact counts after, never a mix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.manager._view import View
from contextfold.messages import Message, ToolCall
from contextfold.tokens import MessageCounter, TiktokenCounter

SRC = Path(__file__).resolve().parents[1] / "src"


class SlowTokenizer:
    """A text counter that loads slowly, like TiktokenCounter: one token per word once ``wait_ready`` ran."""

    def __init__(self) -> None:
        self.ready = False
        self.preloads = 0
        self.waits = 0

    def preload(self) -> None:
        self.preloads += 1

    def wait_ready(self) -> None:
        self.waits += 1
        self.ready = True

    def count(self, text: str) -> int:
        assert self.ready, "an exact count was asked for before the tokenizer was loaded"
        return len(text.split())


HISTORY = [
    Message("system", "You are terse."),
    Message("user", "Read the config file, please."),
    Message("assistant", "", (ToolCall("c1", "read", json.dumps({"path": "conf.yaml"})),)),
    Message("tool", "debug: true\nlevel: 3", tool_call_id="c1", name="read"),
    Message("assistant", "Debug is on, level 3."),
]


def test_counts_are_utf8_bytes_until_the_tokenizer_is_ready_then_exact() -> None:
    slow = SlowTokenizer()
    counter = MessageCounter(slow, lazy=True)
    assert counter.provisional
    m = Message("user", "naïve café")  # 10 characters, 12 bytes, 2 words
    assert counter.count_text(m.text) == 12
    provisional = counter.count_message(m)
    counter.preload()
    assert slow.preloads == 1 and not slow.ready
    revision = counter.revision
    counter.wait_exact()
    assert not counter.provisional and counter.revision > revision
    assert counter.count_text(m.text) == 2
    exact = counter.count_message(m)  # not the cached provisional figure
    assert exact == MessageCounter(slow).count_message(m) == 3 + 1 + 2  # framing, "user", two words
    assert provisional == 3 + 4 + 12


def test_a_counter_that_is_not_lazy_never_counts_bytes() -> None:
    slow = SlowTokenizer()
    slow.ready = True
    counter = MessageCounter(slow, lazy=True)
    assert not counter.provisional
    assert MessageCounter(TiktokenCounter(), lazy=False).provisional is False


def test_view_totals_are_counted_again_when_exact_counts_arrive() -> None:
    slow = SlowTokenizer()
    counter = MessageCounter(slow, lazy=True)
    view = View(counter)
    view.append(HISTORY)
    provisional_tokens, provisional_tool, count = view.totals()
    slow.wait_ready()  # e.g. the background thread finished
    exact_tokens, exact_tool, exact_count = view.totals()
    fresh = MessageCounter(slow)
    assert exact_count == count == len(HISTORY)
    assert exact_tokens == fresh.count_messages(view.normalized(), reply_priming=False)
    assert exact_tool == fresh.count_message(HISTORY[3])
    assert provisional_tokens > exact_tokens and provisional_tool > exact_tool


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_utf8_bytes_bound_the_exact_o200k_and_cl100k_counts(text: str) -> None:
    for name in ("o200k_base", "cl100k_base"):
        assert TiktokenCounter(name).count(text) <= len(text.encode("utf-8", "surrogatepass"))


_CHILD = r"""
import json
from contextfold import ContextManager
from contextfold.tokens import counting as tokens
cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id="lazy",
                    policy={"tool_output_budget_tokens": 1_000_000})
cm.add([{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi, what shall I do?"}])
view = cm.prepare()
loaded_small = "o200k_base" in tokens._ENCODINGS
tokens._PRELOADING.discard("o200k_base")  # see whether acting loads it by itself, without the background thread
big = ("lorem ipsum dolor sit amet " * 4000).strip()
for i in range(12):
    cm.add([{"role": "user", "content": f"{i}: {big}"}, {"role": "assistant", "content": f"noted {i}"}])
cm.prepare()
print(json.dumps({"view": view, "loaded_small": loaded_small, "provisional_after": cm.counter.provisional,
                  "compactions": cm.compactions, "tokens": cm.tokens(),
                  "exact": cm.counter.count_messages(cm.messages(), reply_priming=False)}))
"""


def test_a_fresh_process_prepares_a_small_history_without_the_tokenizer_and_acts_on_exact_counts() -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["view"] == [{"role": "user", "content": "hello"},
                           {"role": "assistant", "content": "hi, what shall I do?"}]
    assert out["loaded_small"] is False  # decided on byte bounds, far below every threshold
    assert out["provisional_after"] is False and out["compactions"] >= 1  # compacting waited for exact counts
    assert out["tokens"] == out["exact"]
