"""``View._settle`` returning at once when nothing changed never changes an answer (left open at the fifteenth stop).

``_settled_at`` remembers (version, appends, length) of the last settle that went as far as it could; a settle
finding the same triple returns at once (issue 22: prepare() asks ~5 times a call). It is not cleared by
``replace()``: the question was whether a replacement of equal length could leave a stale triple that matches. It
cannot: every change to the stored list but an append or a same-role ``replace_at`` in the tail goes through
``_reset()`` or ``rewrite()``, which bump ``version`` (never lowered), and appends bump ``_appends``. This checks it
against a view that never takes the shortcut, through appends, equal-length replacements, rewrites and tail
replacements, read at every step.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.manager._view import View
from contextfold.messages import Message, ToolCall
from contextfold.tokens import EstimatingCounter, MessageCounter

NONCE = "r16settle"
IDS = ("a", "b", "c")  # few ids: reuse, duplicates and late results happen often


class _NeverShortcut(View):
    """A view whose settle always looks again (the shortcut's reference)."""

    def _settle(self) -> None:
        self._settled_at = None
        super()._settle()


_MESSAGE = st.one_of(
    st.builds(lambda ids, text: Message("assistant", text, tuple(ToolCall(i, "bash", json.dumps({"cmd": i}))
                                                                  for i in ids)),
              st.lists(st.sampled_from(IDS), min_size=1, max_size=2), st.sampled_from(("", f"run {NONCE}"))),
    st.builds(lambda i, text: Message("tool", text, tool_call_id=i, name="bash"), st.sampled_from(IDS),
              st.sampled_from(("ok", f"fail {NONCE}"))),
    st.builds(Message, st.sampled_from(("user", "assistant", "system")), st.sampled_from(("go", f"done {NONCE}", ""))),
)

# (operation, messages, indices): append a batch; replace the whole view by as many messages (some of the view's
# own, some new); rewrite some of the normalized view's messages; put a message in place of a tail message of the
# same call (a tool result: what widening, narrowing and lost-ref notes do); or only read.
_STEP = st.tuples(st.sampled_from(("append", "append", "replace", "rewrite", "replace_at", "read")),
                  st.lists(_MESSAGE, min_size=1, max_size=4), st.lists(st.integers(0, 50), min_size=1, max_size=3))


def _answers(view: View) -> tuple[Any, ...]:
    start, tail = view.tail()
    return (view.normalized(), view.totals(), view.pinned_tokens(), view.pairs(), view.prefix_pairs(),
            view.answered(), view.counts(), start, tail, view.raw, view.dropped)


@settings(max_examples=150, deadline=None)
@given(st.lists(_STEP, min_size=1, max_size=20))
def test_the_settle_shortcut_gives_the_answers_of_a_full_settle(steps: list[tuple[str, list[Message], list[int]]],
                                                                ) -> None:
    counter = MessageCounter(EstimatingCounter())
    views = (View(counter), _NeverShortcut(counter))
    for kind, messages, picks in steps:
        for view in views:
            if kind == "append":
                keep, _ = view.split_orphans(messages)
                view.append(keep)
            elif kind == "replace":
                # Equal length: the triple the last settle saw would match but for the version.
                old = list(view.raw)
                if old:
                    new = [messages[k % len(messages)] if k % 2 else old[k] for k in range(len(old))]
                    view.replace(new)
            elif kind == "rewrite":
                whole = view.normalized()
                if whole:
                    view.rewrite({p % len(whole): messages[k % len(messages)] for k, p in enumerate(picks)
                                  if messages[k % len(messages)].role == whole[p % len(whole)].role})
            elif kind == "replace_at":
                start, raw = view.tail_start(), view.raw
                for p in picks:
                    if start < len(raw):
                        index = start + p % (len(raw) - start)
                        same = [m for m in messages if m.role == raw[index].role == "tool"
                                and m.tool_call_id == raw[index].tool_call_id]
                        if same:
                            view.replace_at(index, same[0])
        assert _answers(views[0]) == _answers(views[1])
