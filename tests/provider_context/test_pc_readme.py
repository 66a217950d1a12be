"""The README's "With the provider's own compaction" blocks run as written against the scripted server."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("anthropic")
pytest.importorskip("openai")

from contextfold.testing.server import ScriptedLLMServer

README = Path(__file__).resolve().parents[2] / "README.md"
HEADING = "## With the provider's own compaction"


def blocks() -> list[str]:
    text = README.read_text(encoding="utf-8")
    start = text.index(HEADING)
    section = text[start:text.index("\n## ", start + 1)]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[ScriptedLLMServer]:
    monkeypatch.chdir(tmp_path)  # the blocks use the default local store and archive
    with ScriptedLLMServer(default="The build fails in module_49.", validator="formats") as s:
        monkeypatch.setenv("OPENAI_BASE_URL", s.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", s.base_url.removesuffix("/v1"))
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        yield s


def test_one_block_per_provider() -> None:
    found = blocks()
    assert len(found) == 2
    assert "wrap_anthropic" in found[0] and 'compactor="provider"' in found[0]
    assert "wrap_openai" in found[1] and 'compactor="both"' in found[1]


@pytest.mark.parametrize("index", range(2), ids=["anthropic", "openai"])
def test_block_runs_as_written(server: ScriptedLLMServer, index: int) -> None:
    namespace: dict[str, Any] = {"tools": [], "__name__": "readme"}
    exec(compile(blocks()[index], "README.md", "exec"), namespace)
    assert not server.invalid_requests
    assert len(server.requests) == 1 and server.requests[0].status == 200
    body = server.requests[0].body
    # The provider's context management went with the request, sized from the policy.
    assert "context_management" in body
    cm = namespace["cm"]
    assert "module_49" in str([m.text for m in cm.messages()])
    cm.close()
