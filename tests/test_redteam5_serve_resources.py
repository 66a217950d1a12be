"""Red team (issue 21 §4/§5): what a long-lived proxy keeps per model name a client sends.

The model name is the client's: the registry takes any suffix of a known name (``gpt-4o-mini-<anything>``), and
with ``--default-window`` any name at all. The proxy kept one message counter per name for the life of the
instance, each with a count cache of up to 32,768 entries (~2.2 MB after 5,000 messages, measured): a client
cycling names grew the instance without bound. Found on 5894f4b.
"""

from __future__ import annotations

import gc
import weakref

import pytest

pytest.importorskip("starlette", reason="contextfold[serve] is not installed")

from contextfold.messages import Message
from contextfold.serve import Backend, ServeConfig


def _backend() -> Backend:
    return Backend(ServeConfig(sessions="memory", store="memory", archive="memory", default_window=8_000))


def test_names_of_one_registry_model_share_its_counter() -> None:
    backend = _backend()
    try:
        first = backend.counter("gpt-4o-mini-2099-01-01")
        first.count_message(Message("user", "hello"))
        assert backend.counter("gpt-4o-mini-client-7f3a") is first
        assert backend.counter("claude-haiku-4-5") is not first  # another tokenizer, another counter
    finally:
        backend.close()


def test_a_client_cycling_model_names_does_not_grow_the_instance() -> None:
    backend = _backend()
    try:
        alive = []
        for i in range(300):
            counter = backend.counter(f"in-house-model-{i}")  # unknown names: the default window applies
            counter.count_message(Message("user", f"hello {i}"))
            alive.append(weakref.ref(counter))
        del counter
        gc.collect()
        kept = sum(ref() is not None for ref in alive)
        assert kept <= 64, f"{kept} counters kept for 300 names"
        assert backend.counter("in-house-model-299") is alive[-1]()  # the recent ones are still reused
    finally:
        backend.close()
