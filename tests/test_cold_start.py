"""Cold start: what importing the public API and a default manager load (time itself is measured in bench/)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from contextfold.compaction import Policy

SRC = Path(__file__).resolve().parents[1] / "src"

_CHILD = r"""
import json, sys
from contextfold import ContextManager
after_import = sorted(sys.modules)
cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id="cold")
cm.add([{"role": "user", "content": "hi"}])
cm.prepare()
print(json.dumps({"after_import": after_import, "after_prepare": sorted(sys.modules)}))
"""

# Heavy modules the import of the public API must not pay for: each is tens of milliseconds or more.
NOT_AT_IMPORT = ("pydantic", "asyncio", "concurrent.futures", "tiktoken", "genai_prices", "yaml", "sqlite3")
# contextfold's own: the import loads the manager and its parts only (issue 15: ≤ 150 ms in a bare interpreter);
# a manager loads the rest when it is built or first needs it.
OWN_NOT_AT_IMPORT = ("contextfold.telemetry.events", "contextfold.formats", "contextfold.compaction",
                     "contextfold.compaction._compact", "contextfold.compaction.policy", "contextfold.summarize",
                     "contextfold.redact", "contextfold.redact.rules", "contextfold.archive", "contextfold.cache",
                     "contextfold.tokens", "contextfold.tokens.models", "contextfold.manager._view", "regex")
# Still not loaded once a first turn is prepared (nothing compacted, no tool called by the model): compaction, the
# extractive summarizer and its entity patterns, the untrusted-regex engine, the wire formats not used.
NOT_AT_FIRST_PREPARE = ("contextfold.compaction._compact", "contextfold.summarize", "contextfold.summarize.entities",
                        "regex", "contextfold.formats.anthropic", "contextfold.formats.gemini",
                        "contextfold.formats.openai_responses")


def _modules() -> dict[str, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded: dict[str, list[str]] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_importing_the_manager_loads_no_heavy_module_and_a_default_first_turn_no_price_table() -> None:
    loaded = _modules()
    for name in NOT_AT_IMPORT + OWN_NOT_AT_IMPORT:
        assert name not in loaded["after_import"], f"from contextfold import ContextManager imports {name}"
    own = [m for m in loaded["after_import"] if m.startswith("contextfold")]
    # (_cache_economics, _decisions, _lost_refs, _masking, _request_extras and _secrets import their collaborators
    # only for type checking or inside functions: nothing heavy comes along.)
    assert own == ["contextfold", "contextfold._lazy", "contextfold.manager", "contextfold.manager._archiver",
                   "contextfold.manager._cache_economics", "contextfold.manager._collector",
                   "contextfold.manager._compactor", "contextfold.manager._decisions",
                   "contextfold.manager._idle", "contextfold.manager._lost_refs", "contextfold.manager._manager",
                   "contextfold.manager._masking",
                   "contextfold.manager._request_extras",
                   "contextfold.manager._secrets", "contextfold.manager._spans", "contextfold.telemetry",
                   "contextfold.telemetry._pace"]
    for name in NOT_AT_FIRST_PREPARE:
        assert name not in loaded["after_prepare"], f"a first prepare() of one message imports {name}"
    # (tiktoken may be loading by then: prepare() starts its load in the background, see test_tokens_lazy.py; and
    # tiktoken.core imports concurrent.futures itself, so that one is ours to avoid only while tiktoken is not in.)
    tokenizer_loaded = "tiktoken.core" in loaded["after_prepare"]
    for name in ("genai_prices", "asyncio", *(() if tokenizer_loaded else ("concurrent.futures",))):
        assert name not in loaded["after_prepare"], f"a first prepare() of one message imports {name}"


def test_the_unvalidated_default_policy_equals_the_validated_one() -> None:
    constructed = Policy.model_construct()
    assert constructed == Policy()
    assert constructed.model_dump() == Policy.model_validate({}).model_dump()
