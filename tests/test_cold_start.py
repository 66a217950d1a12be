"""Cold start: what importing the public API and a default manager load (time itself is measured in bench/)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contextfold.compaction import Policy

SRC = Path(__file__).resolve().parents[1] / "src"

_CHILD = r"""
import json, sys, threading

class _Recorder:  # every module an import looks for, and whether the main thread looked
    looked_for = []

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        cls.looked_for.append((name, threading.current_thread() is threading.main_thread()))
        return None

sys.meta_path.insert(0, _Recorder)
import contextfold
after_package = sorted(sys.modules)
from contextfold import ContextManager
after_import = sorted(sys.modules)
seen = len(_Recorder.looked_for)
# "default": the stores a plain ContextManager(model=...) opens (local, in the working directory); "memory": none.
stores = {} if sys.argv[1] == "default" else {"store": "memory", "archive": "memory"}
cm = ContextManager(model="gpt-4o", session_id="cold", **stores)
by_construction = [name for name, main in _Recorder.looked_for[seen:] if main]
cm.add([{"role": "user", "content": "hi"}])
cm.prepare()
print(json.dumps({"after_package": after_package, "after_import": after_import, "by_construction": by_construction,
                  "after_prepare": sorted(sys.modules)}))
"""

# Heavy modules the import of the public API must not pay for: each is tens of milliseconds or more. pydantic is
# not imported by a default manager at all (issue 22): its Policy is a dataclass, validated by pydantic only when it
# is given values (compaction._policy_schema), like a settings file.
NOT_AT_IMPORT = ("pydantic", "asyncio", "concurrent.futures", "tiktoken", "genai_prices", "yaml", "redis", "boto3")
# contextfold's own: the import loads what building a default manager needs, its local stores included (sqlite3,
# shutil: ~5 ms), and no more (issue 15: ≤ 150 ms in a bare interpreter; issue 22: a process's first manager as
# cheap as the next).
OWN_AT_IMPORT = (
    "contextfold", "contextfold._background", "contextfold._exact", "contextfold._files", "contextfold._lazy",
    "contextfold._memo",
    "contextfold.answered", "contextfold.archive", "contextfold.archive._archive", "contextfold.cache",
    "contextfold.cache._cache", "contextfold.cache._line_index", "contextfold.cache._view", "contextfold.cache.blobs",
    "contextfold.cache.owners", "contextfold.cache.refs", "contextfold.cache.retrieval", "contextfold.compaction",
    "contextfold.compaction.policy", "contextfold.errors", "contextfold.formats", "contextfold.formats._common",
    "contextfold.formats.tool_schemas", "contextfold.manager", "contextfold.manager._answered_view",
    "contextfold.manager._archiver", "contextfold.manager._build", "contextfold.manager._cache_economics",
    "contextfold.manager._collector", "contextfold.manager._compaction_runner", "contextfold.manager._compactor",
    "contextfold.manager._decisions", "contextfold.manager._handed", "contextfold.manager._idle",
    "contextfold.manager._intake", "contextfold.manager._learned_limits", "contextfold.manager._limits",
    "contextfold.manager._lost_refs", "contextfold.manager._manager", "contextfold.manager._masking",
    "contextfold.manager._media", "contextfold.manager._provider_items", "contextfold.manager._read_ahead",
    "contextfold.manager._request_extras", "contextfold.manager._secrets", "contextfold.manager._spans",
    "contextfold.manager._view", "contextfold.manager.reconcile", "contextfold.media", "contextfold.media.budget",
    "contextfold.media.limits", "contextfold.messages", "contextfold.pairing", "contextfold.provider_context",
    "contextfold.provider_context.orchestration", "contextfold.provider_context.report",
    "contextfold.provider_context.settings", "contextfold.recovery", "contextfold.recovery._quoted",
    "contextfold.recovery.overflow", "contextfold.redact", "contextfold.redact._anchors",
    "contextfold.redact._callback", "contextfold.redact._gate", "contextfold.redact._joins",
    "contextfold.redact._key_rule",
    "contextfold.redact._key_words", "contextfold.redact._ledger", "contextfold.redact._memory_records",
    "contextfold.redact._messages", "contextfold.redact._provider_state", "contextfold.redact._redactor",
    "contextfold.redact._runs", "contextfold.redact._scanner", "contextfold.redact._scans",
    "contextfold.redact._triggers", "contextfold.redact.memory", "contextfold.serialize", "contextfold.steering",
    "contextfold.steering._checks", "contextfold.steering._state", "contextfold.steering.notes",
    "contextfold.steering.order", "contextfold.steering.resource_rule", "contextfold.steering.resources",
    "contextfold.steering.tool_policy", "contextfold.stores", "contextfold.stores._records",
    "contextfold.stores._sqlite",
    "contextfold.stores.archive_fs", "contextfold.stores.local", "contextfold.stores.memory", "contextfold.telemetry",
    "contextfold.telemetry._clock", "contextfold.telemetry._pace", "contextfold.telemetry._session_redaction",
    "contextfold.telemetry.events", "contextfold.telemetry.exporter", "contextfold.telemetry.processor",
    "contextfold.telemetry.sinks", "contextfold.telemetry.tracer", "contextfold.tokens", "contextfold.tokens.counting",
    "contextfold.tokens.models", "contextfold.tokens.usage", "contextfold.truncate", "contextfold.truncate._text",
    "contextfold.truncate.shape", "contextfold.untrusted", "contextfold.untrusted.arguments",
    "contextfold.untrusted.regex",
)
# Still not loaded once a first turn is prepared (nothing compacted, no tool called by the model): compaction, the
# extractive summarizer and its entity patterns, the policy's validating model, the untrusted-regex engine, the wire
# formats not used.
NOT_AT_FIRST_PREPARE = ("contextfold.compaction._compact", "contextfold.compaction._policy_schema",
                        "contextfold.summarize", "contextfold.summarize.entities", "regex", "contextfold.config",
                        "contextfold.formats.anthropic", "contextfold.formats.gemini",
                        "contextfold.formats.openai_responses", "pydantic", "genai_prices",
                        "asyncio")


def _modules(stores: str, workdir: Path) -> dict[str, list[str]]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CONTEXTFOLD_")}, "PYTHONPATH": str(SRC),
           "HOME": str(workdir)}
    done = subprocess.run([sys.executable, "-c", _CHILD, stores], capture_output=True, text=True, env=env,
                          cwd=workdir, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded: dict[str, list[str]] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


@pytest.fixture(scope="module", params=["default", "memory"])
def loaded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """The modules a fresh interpreter holds at each step, its manager with the default stores or in memory."""
    stores: str = request.param
    workdir = tmp_path_factory.mktemp(f"cold_{stores}")  # (the default stores write under the working directory)
    return _modules(stores, workdir)


def test_importing_the_package_loads_nothing_but_its_lazy_facade(loaded: dict[str, list[str]]) -> None:
    own = [m for m in loaded["after_package"] if m.startswith("contextfold")]
    assert own == ["contextfold", "contextfold._lazy"]
    assert not set(NOT_AT_IMPORT) & set(loaded["after_package"])


def test_importing_the_manager_loads_what_building_one_needs_and_no_heavy_module(
        loaded: dict[str, list[str]]) -> None:
    for name in NOT_AT_IMPORT:
        assert name not in loaded["after_import"], f"from contextfold import ContextManager imports {name}"
    own = [m for m in loaded["after_import"] if m.startswith("contextfold")]
    assert own == sorted(OWN_AT_IMPORT)


def test_a_first_construction_imports_nothing(loaded: dict[str, list[str]]) -> None:
    # (Looked for by the main thread: the telemetry worker imports the redaction patterns for the first events it
    # redacts, on its own thread, 50 ms after them.)
    assert loaded["by_construction"] == []


def test_a_default_first_turn_loads_no_compaction_pydantic_or_price_table(loaded: dict[str, list[str]]) -> None:
    for name in NOT_AT_FIRST_PREPARE:
        assert name not in loaded["after_prepare"], f"a first prepare() of one message imports {name}"
    # (tiktoken may be loading by then: prepare() starts its load in the background, see test_tokens_lazy.py; and
    # tiktoken.core imports concurrent.futures itself, so that one is ours to avoid only while tiktoken is not in.)
    if "tiktoken.core" not in loaded["after_prepare"]:
        assert "concurrent.futures" not in loaded["after_prepare"]


def test_the_unvalidated_default_policy_equals_the_validated_one() -> None:
    constructed = Policy.model_construct()
    assert constructed == Policy()
    assert constructed.model_dump() == Policy.model_validate({}).model_dump()
