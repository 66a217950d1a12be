"""The superseded reads a masking turn orders by are kept over the view's settled prefix (issue 22).

Every masking turn used to read every call of the view again (``superseded_reads``: ~0.15 ms of the heaviest turns
of the lm32b loop at 16K). The fold over the prefix is kept for the view's version, read ahead after a rewrite, and
taken on over the pairs added since; what it finds must be what reading the whole view finds, turn after turn.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from contextfold import _background
from contextfold.manager import ContextManager
from contextfold.messages import Message, ToolCall
from contextfold.steering import _state
from contextfold.steering.resources import SupersededFold, superseded_reads
from contextfold.telemetry import RecordingTelemetry

NONCE = "kept-fold-5c1a90"


def view_file(i: int, path: str, lines: tuple[int, int] | None = None) -> list[Message]:
    arguments: dict[str, object] = {"command": "view", "path": path}
    if lines is not None:
        arguments["view_range"] = list(lines)
    call = ToolCall(f"c{i}", "str_replace_editor", json.dumps(arguments))
    body = "".join(f"{n:6}\tdef f_{n}_{NONCE}_{i}(): return {n * i}\n" for n in range(1, 120))
    return [Message.assistant(f"look at {path}", (call,)), Message.tool(call.id, body)]


def test_the_kept_superseded_reads_are_the_whole_views_and_the_prefix_is_not_read_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cm = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory", session_id=NONCE,
                        policy={"clear_at_least": 3_000, "keep_tool_io_pairs": 1, "cache_aware": False,
                                "tool_output_budget_tokens": 5_800},
                        tool_output={"max_message_tokens": 4_000}, telemetry=RecordingTelemetry())
    orders: list[bool] = []
    read: list[int] = []
    checking: list[bool] = []
    original_order, original_read = _state.mask_order, SupersededFold.read

    def checked_order(view: Any, policies: Any, **kwargs: Any) -> Any:
        stale = kwargs.get("stale")
        orders.append(stale is not None)
        if stale is not None:
            checking.append(True)
            assert stale == superseded_reads(view, policies.resource_rule)
            checking.pop()
        return original_order(view, policies, **kwargs)

    def counted_read(self: SupersededFold, messages: Any, rule_for: Any, pairs: Any) -> None:
        if threading.current_thread() is threading.main_thread() and not checking:  # (the turn's own reads)
            read.append(len(pairs))
        original_read(self, messages, rule_for, pairs)

    monkeypatch.setattr(_state, "mask_order", checked_order)
    monkeypatch.setattr(SupersededFold, "read", counted_read)
    cm.add([Message.system("agent"), Message.user(f"fix the bug {NONCE}")])
    paths = ["/repo/a.py", "/repo/b.py", "/repo/a.py", "/repo/c.py", "/repo/b.py", "/repo/d.py"]
    fewer = 0
    for i in range(24):
        cm.add(view_file(i, paths[i % len(paths)], (1, 40) if i % 4 else None))
        maskings, orders_before = cm.maskings, len(orders)
        read.clear()
        cm.prepare()
        if cm.maskings > maskings and len(orders) > orders_before:
            pairs = len(cm._view.pairs())
            # (in the turn: the fold's pairs since the prefix it kept, then the copy's; never more than the view's)
            assert sum(read) <= pairs
            fewer += sum(read) < pairs
        _background.wait_idle()
    cm.close()
    assert any(orders)  # masking ordered by the kept reads
    assert fewer  # and at least one masking turn read only what was added since the read-ahead


def test_the_read_ahead_folds_in_the_turns_that_release_outputs_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # (issue 22: a turn that releases no output to a masking had the fold as a part of its own, for a pair or two)
    from contextfold.manager._masking import Masking
    from contextfold.manager._read_ahead import HeldOutputs

    cm = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory",
                        session_id=f"{NONCE}-turns", policy={"keep_tool_io_pairs": 3, "cache_aware": False},
                        tool_output={"max_message_tokens": 4_000})
    released: list[int] = []
    folded: list[int] = []
    release, fold_ahead = HeldOutputs.release, Masking._fold_ahead

    def noted_release(self: HeldOutputs, *args: Any) -> Any:
        ready = release(self, *args)
        released.append(len(ready))
        return ready

    def noted_fold(self: Masking, *args: Any) -> None:
        folded.append(len(released))  # (the turn whose read-ahead this is)
        fold_ahead(self, *args)

    monkeypatch.setattr(HeldOutputs, "release", noted_release)
    monkeypatch.setattr(Masking, "_fold_ahead", noted_fold)
    cm.add([Message.system("agent"), Message.user(f"fix the bug {NONCE}")])
    paths = ["/repo/a.py", "/repo/b.py", "/repo/c.py"]
    for i in range(14):
        cm.add(view_file(100 + i, paths[i % len(paths)], (1, 20)))
        cm.prepare()
        _background.wait_idle()
    cm.close()
    releasing = {turn for turn, n in enumerate(released, 1) if n}
    assert folded and set(folded) <= releasing
    assert len(released) - len(releasing) >= 3  # (turns that released nothing, and folded nothing)
