"""Every sync call of the ContextManager has an async twin with the same parameters and the same result."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from contextfold.manager import ContextManager
from contextfold.messages import Message

SYNC_API = ("add", "prepare", "prepare_messages", "compact", "record_usage")


@pytest.mark.parametrize("name", SYNC_API)
def test_each_sync_call_has_an_async_twin_with_the_same_parameters(name: str) -> None:
    sync, twin = getattr(ContextManager, name), getattr(ContextManager, f"a{name}")
    assert inspect.iscoroutinefunction(twin) and not inspect.iscoroutinefunction(sync)
    sync_params = [(p.name, p.kind, p.default) for p in inspect.signature(sync).parameters.values()]
    async_params = [(p.name, p.kind, p.default) for p in inspect.signature(twin).parameters.values()]
    assert async_params == sync_params


def _session(cm: ContextManager) -> list[Message]:
    return [Message.system("You are terse."),
            *(Message.user(f"request {i} " + "words " * 120) for i in range(30))]


def _timeless(messages: list[Message]) -> list[Message]:
    """The messages without the summary's wall-clock stamp (two runs compact at two moments)."""
    return [m.with_meta(compacted_at=None) for m in messages]


def test_async_calls_give_what_the_sync_calls_give() -> None:
    def run_sync() -> list[Any]:
        with ContextManager("gpt-4o", max_context_tokens=4_000, store="memory", archive="memory",
                            message_id_prefix="parity", session_id="parity") as cm:
            cm.add(_session(cm))
            view = cm.prepare("anthropic")
            messages = cm.prepare_messages()
            usage = cm.record_usage({"prompt_tokens": 1_000, "completion_tokens": 20})
            report = cm.compact(instructions="keep the request numbers")
            return [view, [m.fingerprint() for m in messages], usage, report.tokens_after, _timeless(cm.messages())]

    async def run_async() -> list[Any]:
        with ContextManager("gpt-4o", max_context_tokens=4_000, store="memory", archive="memory",
                            message_id_prefix="parity", session_id="parity") as cm:
            await cm.aadd(_session(cm))
            view = await cm.aprepare("anthropic")
            messages = await cm.aprepare_messages()
            usage = await cm.arecord_usage({"prompt_tokens": 1_000, "completion_tokens": 20})
            report = await cm.acompact(instructions="keep the request numbers")
            return [view, [m.fingerprint() for m in messages], usage, report.tokens_after, _timeless(cm.messages())]

    assert asyncio.run(run_async()) == run_sync()
