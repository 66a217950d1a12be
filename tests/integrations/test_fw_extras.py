"""What the framework adapters share: feeding only new history to the manager (the manager's record), graceful
degradation, and naming the missing extra."""

from __future__ import annotations

import importlib
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.errors import InsufficientBudget, MissingExtra
from contextfold.integrations._degrade import DEGRADED_CODE, prepare_messages
from contextfold.manager import ContextManager
from contextfold.manager.reconcile import DIVERGED_CODE, content_key, reconcile
from contextfold.telemetry import RecordingTelemetry


def roomy_manager() -> ContextManager:
    # A window nothing here comes close to: the view is exactly what was added.
    return ContextManager(model="gpt-4o", store="memory", archive="memory", session_id="mirror")


def history(n: int, tag: str = "") -> list[dict[str, str]]:
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": f"{tag}message {i}"} for i in range(n)]


def chat_decode(items):  # type: ignore[no-untyped-def]
    from contextfold.formats import openai_chat

    return openai_chat.decode(items)


def feed(cm: ContextManager, items: list[dict[str, str]]) -> int:
    return reconcile(cm, "test", items, key=content_key, convert=chat_decode).fresh


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=30), max_size=6))
def test_growing_history_reaches_the_manager_once(cuts: list[int]) -> None:
    full = history(30)
    cm = roomy_manager()
    added = [feed(cm, full[:cut]) if cut >= 0 else 0 for cut in [*sorted(cuts), 30]]
    assert cm.framework_history.rebuilds == 0
    assert sum(added) == 30
    assert [m.text for m in cm.messages()] == [item["content"] for item in full]


@settings(max_examples=40, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=30), max_size=6))
def test_the_record_lives_with_the_manager_not_the_caller(cuts: list[int]) -> None:
    # Each call stands for a new adapter object: nothing but the manager carries what was seen.
    full = history(30)
    cm = roomy_manager()
    for cut in [*sorted(cuts), 30]:
        reconcile(cm, "test", list(full[:cut]), key=content_key, convert=chat_decode)
    assert [m.text for m in cm.messages()] == [item["content"] for item in full]


@settings(max_examples=30, deadline=None)
@given(first=st.integers(min_value=1, max_value=12), second=st.integers(min_value=1, max_value=12))
def test_a_diverging_history_rebuilds_the_view_from_it(first: int, second: int) -> None:
    telemetry = RecordingTelemetry()
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id="rebuild", telemetry=telemetry)
    feed(cm, history(first, "a "))
    feed(cm, history(second, "b "))
    assert cm.framework_history.rebuilds == 1
    assert [m.text for m in cm.messages()] == [f"b message {i}" for i in range(second)]
    warnings = [e for e in telemetry.events if getattr(e, "code", "") == DIVERGED_CODE]
    assert len(warnings) == 1 and "at item 0" in warnings[0].message


def test_an_edited_message_is_found_where_it_diverged() -> None:
    telemetry = RecordingTelemetry()
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id="edit", telemetry=telemetry)
    items = history(6)
    feed(cm, items)
    edited = [*items[:3], {"role": "assistant", "content": "edited"}, *items[4:]]
    assert feed(cm, edited) == 6
    assert [m.text for m in cm.messages()] == [i["content"] for i in edited]
    (warning,) = [e for e in telemetry.events if getattr(e, "code", "") == DIVERGED_CODE]
    assert "at item 3" in warning.message


class FailingSummarizer:
    def summarize(self, request):  # type: ignore[no-untyped-def]
        raise InsufficientBudget("nothing fits", needed=10, budget=1)


def test_a_compaction_error_degrades_to_the_smallest_valid_view_unless_strict() -> None:
    telemetry = RecordingTelemetry()
    cm = ContextManager(model="gpt-4o", max_context_tokens=2_000, store="memory", archive="memory",
                        session_id="degrade", telemetry=telemetry, summarizer=FailingSummarizer())
    for i in range(30):
        cm.add([{"role": "user", "content": f"question {i} " + "words " * 40},
                {"role": "assistant", "content": f"answer {i} " + "words " * 40}])
    with pytest.raises(Exception):
        prepare_messages(cm, strict=True, where="test")
    view = prepare_messages(cm, strict=False, where="test")
    assert view and view[-1].text.startswith("answer 29")
    assert cm.counter.count_messages(view) <= cm.budgets.hard
    assert any(getattr(e, "code", "") == DEGRADED_CODE for e in telemetry.events)


@pytest.mark.parametrize(("module", "blocked", "extra"), [
    ("contextfold.integrations.openai_agents", "agents", "openai-agents"),
    ("contextfold.integrations.langchain", "langchain_core", "langchain"),
    ("contextfold.integrations._langchain_convert", "langchain_core", "langchain"),
    ("contextfold.integrations.pydantic_ai", "pydantic_ai", "pydantic-ai"),
    ("contextfold.integrations._pydantic_ai_capability", "pydantic_ai", "pydantic-ai"),
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


def test_the_langchain_extra_installs_what_the_readme_example_needs() -> None:
    # The README builds its LangChain agent with create_agent("openai:gpt-4o", ...), which imports langchain_openai:
    # 'pip install contextfold[langchain]' must bring it (issue 21 §6).
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert 'create_agent("openai:gpt-4o"' in (root / "README.md").read_text()
    assert any(dep.split(">")[0].split("=")[0].strip() == "langchain-openai" for dep in extras["langchain"])
