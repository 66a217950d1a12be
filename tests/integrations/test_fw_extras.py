"""What the framework adapters share: feeding only new history to the manager, and naming the missing extra."""

from __future__ import annotations

import importlib
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold import ContextManager
from contextfold.errors import MissingExtra
from contextfold.formats import openai_responses
from contextfold.integrations._mirror import HistoryMirror


def roomy_manager() -> ContextManager:
    # A window nothing here comes close to: the view is exactly what was added.
    return ContextManager(model="gpt-4o", store="memory", archive="memory", session_id="mirror")


def history(n: int, tag: str = "") -> list[dict[str, str]]:
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": f"{tag}message {i}"} for i in range(n)]


def chat_decode(items):  # type: ignore[no-untyped-def]
    from contextfold.formats import openai_chat

    return openai_chat.decode(items)


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=30), max_size=6))
def test_growing_history_reaches_the_manager_once(cuts: list[int]) -> None:
    full = history(30)
    cm = roomy_manager()
    mirror: HistoryMirror[dict[str, str]] = HistoryMirror(cm)
    added: list[int] = []
    for cut in [*sorted(cuts), 30]:
        added.append(mirror.sync(full[:cut], chat_decode))
    assert mirror.rebuilds == 0
    assert sum(added) == 30
    assert [m.text for m in cm.messages()] == [item["content"] for item in full]


@settings(max_examples=30, deadline=None)
@given(first=st.integers(min_value=1, max_value=12), second=st.integers(min_value=1, max_value=12))
def test_a_diverging_history_rebuilds_the_view_from_it(first: int, second: int) -> None:
    cm = roomy_manager()
    mirror: HistoryMirror[dict[str, str]] = HistoryMirror(cm)
    mirror.sync(history(first, "a "), chat_decode)
    mirror.sync(history(second, "b "), chat_decode)
    assert mirror.rebuilds == 1
    assert [m.text for m in cm.messages()] == [f"b message {i}" for i in range(second)]


def test_identity_short_circuits_the_comparison() -> None:
    compared: list[int] = []

    def same(a: object, b: object) -> bool:
        compared.append(1)
        return a == b

    items = openai_responses.decode([{"role": "user", "content": "x"}])
    mirror: HistoryMirror[object] = HistoryMirror(roomy_manager(), same)
    mirror.rebase(items)
    assert mirror.extends_known([*items, "new"]) and compared == []


@pytest.mark.parametrize(("module", "blocked", "extra"), [
    ("contextfold.integrations.openai_agents", "agents", "openai-agents"),
    ("contextfold.integrations.langchain", "langchain_core", "langchain"),
    ("contextfold.integrations._langchain_convert", "langchain_core", "langchain"),
    ("contextfold.integrations.pydantic_ai", "pydantic_ai", "pydantic-ai"),
])
def test_a_missing_framework_names_the_extra(monkeypatch: pytest.MonkeyPatch, module: str, blocked: str,
                                             extra: str) -> None:
    # None in sys.modules makes `import` fail as if the package (and each of its loaded submodules) were missing.
    for name in [n for n in sys.modules if n == blocked or n.startswith(f"{blocked}.")] or [blocked]:
        monkeypatch.setitem(sys.modules, name, None)
    for name in (module, "contextfold.integrations._langchain_convert"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(MissingExtra, match=rf"pip install 'contextfold\[{extra}\]'"):
        importlib.import_module(module)
