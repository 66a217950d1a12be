"""The public surface is exactly ``__all__``, sorted, and every name in it resolves."""

from __future__ import annotations

import subprocess
import sys

import pytest

import contextfold


def test_all_is_sorted() -> None:
    assert contextfold.__all__ == sorted(contextfold.__all__)


def test_every_exported_name_resolves() -> None:
    for name in contextfold.__all__:
        assert getattr(contextfold, name) is not None, name


def test_no_private_leak_in_dir() -> None:
    public = {name for name in dir(contextfold) if not name.startswith("_")}
    assert public <= set(contextfold.__all__)


def test_exported_classes_claim_the_package() -> None:
    for name in contextfold.__all__:
        value = getattr(contextfold, name)
        module = getattr(value, "__module__", "contextfold")
        assert module.startswith("contextfold"), (name, module)


def test_import_pulls_no_optional_dependency() -> None:
    code = (
        "import sys, contextfold; "
        "bad = [m for m in ('openai', 'anthropic', 'litellm', 'redis', 'boto3', 'langchain', 'agents', "
        "'pydantic_ai', 'opentelemetry', 'tiktoken', 'pydantic') if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_all_matches_the_lazy_map() -> None:
    assert set(contextfold.__all__) == set(contextfold._EXPORTS) | {"__version__"}


def test_public_functions_are_functions_even_after_their_modules_load() -> None:
    # A module sharing its name with a public function would shadow it once imported (contextfold.normalize was the
    # pairing module, so `from contextfold import normalize` gave a module after the first prepare()).
    import importlib

    import contextfold.pairing
    from contextfold import ContextManager

    ContextManager("gpt-4o", store="memory", archive="memory").close()
    for name in ("normalize", "classify", "compact", "history_search", "decide", "truncate_text"):
        value = getattr(importlib.import_module("contextfold"), name)
        assert callable(value) and not isinstance(value, type(contextfold.pairing)), name


# The public API as it stood before the package was reorganised into subpackages (issue 16): it must not change.
PUBLIC_API = frozenset({
    "Action", "Archive", "ArchiveStore", "BatchProcessor", "BlobStore", "Budgets", "CacheConfig", "Category",
    "ChatProvider", "CompactionReport", "CompactionResult", "Completion", "ConfigError", "ContextManager",
    "ContextOverflowError", "ContextfoldError", "DocumentPart", "EstimatingCounter", "Event", "Exporter",
    "ExtractiveSummarizer", "HistorySearchTool", "ImagePart", "InsufficientBudget", "InvalidHistory",
    "LLMSummarizer", "LocalBlobStore", "MaskResult", "MemoryBlobStore", "MemorySessionStore", "Message",
    "MessageCounter", "MissingExtra", "ModelInfo", "NullTelemetry", "OverflowInfo", "Plan", "Policy",
    "RecordedSession", "RecordingTelemetry", "RecoveryFailed", "Redactor", "RefNotFound", "ReplayOptions",
    "SessionConflict", "SessionStore", "Settings", "Status", "StoreError", "Summarizer", "SummarizerError",
    "SummaryRequest", "SummaryResult", "Telemetry", "TextPart", "ThinkingPart", "TiktokenCounter", "TokenCounter",
    "TokenUsage", "ToolCall", "ToolOutputCache", "ToolOutputRef", "Tracer", "TruncatedText", "UnknownModel",
    "UnknownPart", "UsageTracker", "__version__", "acall_with_recovery", "call_with_recovery", "classify", "compact",
    "convert", "counter_for_model", "decide", "detect_format", "extract_entities", "get_exporter", "get_format",
    "get_model", "get_provider", "history_search", "load_session", "load_sessions", "load_settings",
    "mask_tool_outputs", "message_from_dict", "message_to_dict", "normalize", "open_blob_store", "parse_overflow",
    "plan_compaction", "register_model", "replay_session", "retrieval_tool_schemas", "run_replay", "truncate_text",
})
# Import paths the README and the examples document for integrations, stores, exporters and the other edges.
DOCUMENTED_PATHS = (
    "contextfold.integrations.openai_client:wrap_openai",
    "contextfold.integrations.anthropic_client:wrap_anthropic",
    "contextfold.integrations.openai_agents:contextfold_run",
    "contextfold.integrations.openai_agents:ContextfoldSession",
    "contextfold.integrations.langchain:ContextfoldMiddleware",
    "contextfold.integrations.pydantic_ai:ContextfoldHistoryProcessor",
    "contextfold.integrations.slash:handle_command",
    "contextfold.stores:open_blob_store",
    "contextfold.stores:BlobStore",
    "contextfold.stores.memory:MemoryBlobStore",
    "contextfold.stores.local:LocalBlobStore",
    "contextfold.stores.redis_blob:RedisBlobStore",
    "contextfold.stores.redis_session:RedisSessionStore",
    "contextfold.stores.session:MemorySessionStore",
    "contextfold.stores.archive_fs:FilesystemArchiveStore",
    "contextfold.stores.archive_s3:S3ArchiveStore",
    "contextfold.exporters:get_exporter",
    "contextfold.exporters:telemetry_sink",
    "contextfold.exporters:Exporter",
    "contextfold.exporters:AriadneExporter",
    "contextfold.exporters:JsonlExporter",
    "contextfold.exporters:ConsoleExporter",
    "contextfold.exporters:OtelTelemetry",
    "contextfold.exporters.base:BaseExporter",
    "contextfold.fleet:FleetWorker",
    "contextfold.testing:ScriptedLLMServer",
    "contextfold.cache:Retention",
)


def test_the_public_api_is_unchanged() -> None:
    assert set(contextfold.__all__) == PUBLIC_API


@pytest.mark.parametrize("path", DOCUMENTED_PATHS)
def test_documented_import_paths_resolve(path: str) -> None:
    import importlib

    module_name, _, name = path.partition(":")
    module = importlib.import_module(module_name)
    assert getattr(module, name) is not None


def test_the_litellm_wrapper_keeps_its_path() -> None:
    # litellm cannot share this environment (openai<3); its module must still be where the README says.
    from importlib.util import find_spec

    assert find_spec("contextfold.integrations.litellm_client") is not None
