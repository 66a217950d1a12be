"""Every code block of the README's "Integrations" section runs as written, against the scripted server."""

from __future__ import annotations

import ast
import asyncio
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")
pytest.importorskip("langchain_openai")
pytest.importorskip("pydantic_ai")
pytest.importorskip("anthropic")

from contextfold.manager import ContextManager
from contextfold.testing.server import ScriptedLLMServer

README = Path(__file__).resolve().parents[2] / "README.md"


def integration_blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Integrations"):text.index("\n## ", text.index("## Integrations") + 1)]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedLLMServer]:
    with ScriptedLLMServer(default="The build fails in module_49.", validator="formats") as s:
        # The SDKs read these, exactly as they would read a real deployment's settings.
        monkeypatch.setenv("OPENAI_BASE_URL", s.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", s.base_url.removesuffix("/v1"))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        monkeypatch.setenv("OPENAI_AGENTS_DISABLE_TRACING", "1")
        yield s


def run_block(code: str, namespace: dict[str, Any]) -> None:
    compiled = compile(code, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(compiled, namespace)
    if asyncio.iscoroutine(result):
        asyncio.run(result)


def test_the_section_has_a_block_per_integration() -> None:
    blocks = integration_blocks()
    assert len(blocks) == 5
    for name in ("wrap_openai", "contextfold_run", "ContextfoldMiddleware", "ContextfoldHistoryProcessor",
                 "handle_command"):
        assert any(name in block for block in blocks), name


@pytest.mark.parametrize("index", range(5))
def test_block_runs_as_written(server: ScriptedLLMServer, index: int) -> None:
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id=f"readme-{index}")
    namespace: dict[str, Any] = {"cm": cm, "tools": [], "user_input": "/context", "__name__": "readme"}
    run_block(integration_blocks()[index], namespace)
    assert not server.invalid_requests
    if index < 4:  # the slash command block makes no model call
        assert server.requests and all(r.status == 200 for r in server.requests)
    if index in (0, 1):
        # The wrappers and the Session add the reply to the conversation at once (a processor or middleware sees
        # it with the next request).
        assert "module_49" in str([m.text for m in cm.messages()])
