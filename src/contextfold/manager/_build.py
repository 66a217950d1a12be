"""What a ContextManager is built from: resolving names to components, coercing input, the reports it returns.

Kept apart from :mod:`contextfold.manager` so that the runtime reads as the flow of a turn.
"""

from __future__ import annotations

import functools
import itertools
import logging
import operator
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..archive import Archive, MemoryArchiveStore, archive_key, event_line
from ..cache import CacheConfig, Retention, ToolOutputCache
from ..compaction import Policy
from ..errors import ConfigError, InvalidHistory
from ..messages import Message
from ..pairing import check_messages
from ..redact import Redactor, SecretMemory
from ..stores import MemoryBlobStore, open_blob_store
from ..stores.archive_fs import FilesystemArchiveStore
from ..stores.local import LocalBlobStore
from ..telemetry import BatchProcessor, FanoutTelemetry, Tracer
from ..telemetry.processor import DURABLE_FLUSH_TIMEOUT_S
from ..tokens import MessageCounter, ModelInfo, counter_for_model, get_model

# What a default manager is built from is imported with this module (with ``from contextfold import
# ContextManager``: the first manager of a process costs what every later one does, issue 22); other stores,
# summarizers and exporters are imported when named.
if TYPE_CHECKING:
    from ..compaction import Budgets
    from ..summarize import Summarizer, SummaryResult

__all__ = ["CompactionReport", "Components", "FanoutTelemetry", "Status", "build_components", "coerce_messages"]

_log = logging.getLogger(__name__)

# Where the embedded defaults keep their files, relative to the working directory.
DEFAULT_DIR = ".contextfold"


@dataclass(frozen=True, slots=True)
class CompactionReport:
    """What one compaction did: tokens and messages before and after, how many were compacted, and how long."""

    tokens_before: int
    tokens_after: int
    messages_before: int
    messages_after: int
    compacted: int
    duration_ms: float
    summary: SummaryResult | None = None
    kept: Mapping[str, int] = field(default_factory=dict)  # messages kept per layer (CompactionStats.kept)

    @classmethod
    def unchanged(cls, tokens: int, messages: int, duration_ms: float = 0.0) -> CompactionReport:
        """The report of a compaction that left the view as it was."""
        return cls(tokens, tokens, messages, messages, 0, duration_ms, None)

    def line(self) -> str:
        """A one-line report for an interactive ``/compact``."""
        change = self.tokens_after - self.tokens_before
        pct = 100 * abs(change) / self.tokens_before if self.tokens_before else 0.0
        sign = "+" if change > 0 else "-"  # a summary can cost more than the little it replaced
        return (f"compacted {self.compacted} messages: {self.tokens_before:,} → {self.tokens_after:,} tokens "
                f"({sign}{pct:.0f}%), {self.messages_before} → {self.messages_after} messages in "
                f"{self.duration_ms:.0f} ms")


@dataclass(frozen=True, slots=True)
class Status:
    """The layers of the view and how full the window is."""

    session_id: str
    model: str
    window: int
    tokens: int
    usage_pct: float
    messages: int
    pinned: int
    summary_version: int
    recent: int
    compactions: int
    maskings: int
    paused: bool

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return asdict(self)

    def line(self) -> str:
        """One line for a status bar."""
        summary = f"summary v{self.summary_version}" if self.summary_version else "no summary"
        return (f"{self.model}: {self.tokens:,}/{self.window:,} tokens ({self.usage_pct}%) · {self.messages} "
                f"messages (pinned {self.pinned}, {summary}, recent {self.recent}) · {self.compactions} "
                f"compactions, {self.maskings} maskings" + (" · compaction paused" if self.paused else ""))


@dataclass
class Components:
    """Everything a manager is built from, resolved."""

    model: ModelInfo
    policy: Policy
    budgets: Budgets
    counter: MessageCounter
    cache: Any
    summarizer: Summarizer | None  # None: the extractive summarizer, built when first used
    archive: Any
    tracer: Tracer
    session_id: str
    redactor: Any
    clock: Callable[[], datetime] | None
    warnings: list[str] = field(default_factory=list)


def _session_id(session_id: object) -> str:
    """The session's id (a random one when None), checked now: a bad id must not surface at the first compaction.

    Any non-empty string the archive can name is accepted, e-mail addresses and ``org:42`` included (the archive
    encodes them reversibly, see :func:`contextfold.archive.archive_key`).
    """
    if session_id is None:
        return uuid.uuid4().hex[:16]
    try:
        archive_key(session_id)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ConfigError(str(exc).removeprefix("session_id "), field="session_id") from None
    return session_id  # type: ignore[return-value]


def build_components(
    *, model: str, max_context_tokens: int | None, policy: Policy | Mapping[str, Any] | None, summarizer: Any,
    store: Any, archive: Any, telemetry: Any, session_id: str | None, redact: Any, clock: Any,
    tool_output: Any = None,
    counter: MessageCounter | None = None, archive_events: bool = True,
) -> Components:
    """Resolve names (``"local"``, ``"extractive"``, ``"openai:gpt-4o-mini"``, …) into components."""
    info = get_model(model, context_window=max_context_tokens, with_prices=False)
    resolved_policy = _policy(policy)
    budgets = resolved_policy.budgets(info.context_window)
    # lazy: the exact tokenizer loads on a background thread; the first turns count byte upper bounds meanwhile.
    if counter is None:
        counter = counter_for_model(info.name if info.tokenizer.endswith("_base") else model, lazy=True)
    session = _session_id(session_id)
    warnings: list[str] = []
    redactor = None
    if redact is True:
        redactor = Redactor()
    elif redact is not False and redact is not None:
        redactor = redact  # a configured Redactor
        if not getattr(redactor, "enabled", True):
            warnings.append("redaction is disabled: archived transcripts and events may contain secrets")
    else:
        warnings.append("redaction is disabled: archived transcripts and events may contain secrets")
    cache = _cache(store, counter, info.context_window, budgets.tool_output_budget, tool_output, session)
    redactor = _session_redactor(redactor, cache, session)
    if redactor is not None and cache is not None and hasattr(redactor, "safe_cut"):
        cache.secrets = redactor  # write-time views never cut a secret in two, digests never quote one
    resolved_archive = _archive(archive, redactor)
    sink = _telemetry(telemetry, redactor, resolved_archive if archive_events else None, session)
    resolved_summarizer = _summarizer(summarizer)
    if _custom_strategy(resolved_policy) and resolved_summarizer is None:
        message = ("policy.strategy is 'custom' but the summarizer is the extractive one, which has no prompt to "
                   "follow: summaries keep the task_state layout (set summarizer to an LLM, e.g. "
                   "'openai:gpt-4o-mini', for a custom prompt)")
        _log.warning(message)
        warnings.append(message)
    return Components(
        model=info, policy=resolved_policy, budgets=budgets, counter=counter,
        cache=cache,
        summarizer=resolved_summarizer,
        archive=resolved_archive, tracer=Tracer(session, sink, clock=clock), session_id=session,
        redactor=redactor, clock=clock, warnings=warnings,
    )


def _session_redactor(redactor: Any, cache: Any, session_id: str) -> Any:
    """The redactor as this session uses it: remembering into the session's memory, kept in its blob store.

    A configured redactor handed to many managers stays one per session this way (its patterns and scans are
    shared); without a cache the memory lives in this process only.
    """
    if redactor is None or not hasattr(redactor, "for_session"):
        return redactor
    store = getattr(cache, "store", None)
    memory = SecretMemory(store, session_id) if store is not None else SecretMemory()
    return redactor.for_session(memory)


def _custom_strategy(policy: Policy) -> bool:
    """Whether the policy asks for a custom prompt (which only an LLM summarizer can follow)."""
    return str(policy.strategy) == "custom" or bool(getattr(policy, "custom_prompt", None))


class ArchiveEventsExporter:
    """Exports event batches into the session's ``events.jsonl`` in the archive."""

    def __init__(self, archive: Any, session_id: str) -> None:
        self.archive = archive
        self.session_id = session_id

    def export(self, batch: Any) -> None:
        """Append the batch (already redacted by the processor: not again, it is most of the exporter's time)."""
        from ..telemetry._pace import GilPacer

        pacer = GilPacer()
        lines: list[str] = []
        for event in batch:
            pacer.tick()
            lines.append(event_line(event))
        self.archive.append_event_lines(self.session_id, lines)

    def shutdown(self) -> None:
        """Nothing to release: the archive outlives the exporter."""


def _telemetry(telemetry: Any, redactor: Any, archive: Any, session_id: str) -> FanoutTelemetry:
    """The manager's sink: the caller's telemetry (a sink, or exporter names) plus the archive's events file."""
    redact = redactor.redact_obj if redactor is not None else None
    # What exporters send out of the process also drops personal data (unless redaction says otherwise); the
    # archive's own events file is local, and keeps what the archive keeps.
    outgoing = redactor.for_telemetry().redact_obj if hasattr(redactor, "for_telemetry") else redact
    sinks: list[Any] = []
    items = [telemetry] if isinstance(telemetry, str) or not isinstance(telemetry, list | tuple) else telemetry
    for item in items:
        if item is None:
            continue
        if isinstance(item, str):
            from ..exporters import telemetry_sink

            sinks.append(telemetry_sink(item, redact=outgoing))
        elif callable(getattr(item, "emit", None)):
            # A sink of contextfold's own built by the caller (an OtelTelemetry on the agent's provider, a
            # BatchProcessor) without a redaction hook sends events out of the process too: it gets the session's.
            if outgoing is not None and callable(getattr(item, "redact_with", None)):
                item.redact_with(outgoing, session_id)
            sinks.append(item)
        else:
            raise ConfigError(f"expected a Telemetry sink or exporter names, got {type(item).__name__}",
                              field="telemetry")
    if archive is not None:
        # On the process's one shared telemetry thread: 1,000 idle managers hold no thread of their own (issue 22).
        sinks.append(BatchProcessor(ArchiveEventsExporter(archive, session_id), redact=redact,
                                    flush_timeout_s=DURABLE_FLUSH_TIMEOUT_S, shared_worker=True))
    return FanoutTelemetry(sinks)


def settings_arguments(settings: Any) -> dict[str, Any]:
    """ContextManager keyword arguments from a :class:`~contextfold.config.Settings`."""
    t = settings.telemetry
    specs: list[str] = []
    for name in t.exporters:
        if name == "jsonl":
            specs.append(f"jsonl:{t.jsonl_path or DEFAULT_DIR + '/events.jsonl'}")
        elif name == "ariadne":
            specs.append(f"ariadne:{t.ariadne_url}")
        elif name == "otel":
            specs.append(f"otel:{t.otel_endpoint}" if t.otel_endpoint else "otel")
        else:
            specs.append(str(name))
    if t.console and "console" not in specs:
        specs.append("console")
    args: dict[str, Any] = {
        "policy": settings.policy_object(),
        "store": settings.storage.store,
        "archive": settings.storage.archive,
        "telemetry": specs or None,
        "redact": settings.redaction.redactor(),
    }
    if settings.tool_output.cache_options():
        args["tool_output"] = settings.tool_output.cache_options()
    if settings.model:
        args["model"] = settings.model
    if settings.summarizer:
        args["summarizer"] = settings.summarizer
    if settings.max_context_tokens:
        args["max_context_tokens"] = settings.max_context_tokens
    return args


def _policy(policy: Policy | Mapping[str, Any] | None) -> Policy:
    if policy is None:
        # Built once: a Policy is frozen, so every default manager shares the one instance (issue 22).
        return _default_policy()
    if isinstance(policy, Policy):
        return policy
    if isinstance(policy, Mapping):
        from pydantic import ValidationError

        try:
            return Policy.model_validate(dict(policy))
        except ValidationError as exc:
            first = exc.errors()[0]
            path = ".".join(str(p) for p in first["loc"])
            raise ConfigError(first["msg"], field=f"policy.{path}" if path else "policy") from None
    raise ConfigError(f"expected a Policy or a mapping, got {type(policy).__name__}", field="policy")


@functools.cache
def _default_policy() -> Policy:
    return Policy()


def cache_budget(window: int, tool_budget: int) -> int:
    """The write-time tool-output budget of a window, when the configuration does not set one."""
    # Write-time views are sized from the tool-output budget, which the policy keeps under the soft threshold:
    # the spec's clamp(window × 0.25, 20K, 60K) alone would let one output overflow a small window.
    return min(CacheConfig().budget_tokens(window), tool_budget)


def _cache(store: Any, counter: MessageCounter, window: int, tool_budget: int, tool_output: Any = None,
           session_id: str | None = None) -> Any:
    if store is None or store is False:
        return None
    # The default (local) and in-process stores are imported with the manager; every other when named.
    if store == "memory":
        store = MemoryBlobStore()
    elif store == "local":
        store = LocalBlobStore()
    elif isinstance(store, str):
        store = open_blob_store(store)
    options: dict[str, Any] = {}
    if isinstance(tool_output, CacheConfig):
        options = {f: getattr(tool_output, f) for f in CacheConfig.__dataclass_fields__}
    elif isinstance(tool_output, Mapping):
        unknown = set(tool_output) - set(CacheConfig.__dataclass_fields__)
        if unknown:
            raise ConfigError(f"unknown setting {sorted(unknown)[0]!r} (expected one of "
                              f"{', '.join(CacheConfig.__dataclass_fields__)})", field="tool_output")
        options = dict(tool_output)
    elif tool_output is not None:
        raise ConfigError(f"expected a CacheConfig or a mapping, got {type(tool_output).__name__}",
                          field="tool_output")
    if options.get("context_budget_tokens") is None:
        options["context_budget_tokens"] = cache_budget(window, tool_budget)
    # Outputs are owned by the session (grep and GC stay within it); the store is kept bounded by age and size.
    return ToolOutputCache(store, CacheConfig(**options), counter=counter.counter, context_window=window,
                           session_id=session_id, retention=Retention())


def _summarizer(summarizer: Any) -> Summarizer | None:
    if summarizer is None or summarizer == "extractive":
        return None  # the default: built by the first compaction (its modules are a tenth of a cold start)
    if isinstance(summarizer, str):
        from ..providers import get_provider
        from ..summarize.llm import LLMSummarizer

        return LLMSummarizer(get_provider(summarizer))
    if not callable(getattr(summarizer, "summarize", None)):
        raise ConfigError(f"expected a Summarizer or a name, got {type(summarizer).__name__}", field="summarizer")
    resolved: Summarizer = summarizer
    return resolved


def _archive(archive: Any, redactor: Any) -> Any:
    if archive is False:
        return None
    if redactor is None:
        # Archive(redactor=None) means "the built-in patterns"; redact=False must reach the archive as "off".
        redactor = Redactor(enabled=False)
    if archive is None:  # (the default: a directory, its store imported with the manager)
        return Archive(FilesystemArchiveStore(f"{DEFAULT_DIR}/archive"), redactor=redactor)
    if isinstance(archive, Archive):
        return archive
    if archive == "memory":
        return Archive(MemoryArchiveStore(), redactor=redactor)
    if isinstance(archive, str):
        from ..stores.archive_open import open_archive_store

        archive = open_archive_store(archive)
    return Archive(archive, redactor=redactor)


def coerce_messages(
    messages: Iterable[Message | Mapping[str, Any]] | Message | Mapping[str, Any], *, format: str | None, start: int,
    protected_flag: str = "protected",
) -> list[Message]:
    """Turn Message objects or provider dicts into checked Messages; errors name the index in the history.

    A provider dict's ``"meta"`` mapping becomes the message's ``meta`` (never sent to the provider), and a true
    ``protected_flag`` key in it marks the message protected, as ``Message(meta={"protected": True})`` does.
    """
    coerced = _coerce(messages, format=format, start=start)
    if protected_flag != "protected":
        return [_lift_meta(m, protected_flag) for m in coerced]
    # Only a caller's ``extra["meta"]`` is lifted then: the messages holding one are found by C loops (a resumed
    # history of 100,000 messages, issue 22: ~50 ms as a call per message), each object given again lifted once.
    holding = list(itertools.compress(itertools.count(), map(operator.contains, map(_EXTRA, coerced),
                                                               itertools.repeat("meta"))))
    if not holding:
        return coerced
    out = list(coerced)
    lifted: dict[int, Message] = {}
    for i in holding:
        m = out[i]
        done = lifted.get(id(m))
        if done is None:
            done = lifted[id(m)] = _lift_meta(m, protected_flag)
        out[i] = done
    return out


# (What coerce_messages reads of each message, at C speed.)
_EXTRA = operator.attrgetter("extra")


def _lift_meta(message: Message, flag: str) -> Message:
    caller_meta = message.extra.get("meta")
    if isinstance(caller_meta, Mapping):
        extra = {k: v for k, v in message.extra.items() if k != "meta"}
        message = replace(message, meta={**caller_meta, **message.meta}, extra=extra)
    if flag != "protected" and message.meta.get(flag) and not message.protected:
        message = message.with_meta(protected=True)
    return message


def _coerce(
    messages: Iterable[Message | Mapping[str, Any]] | Message | Mapping[str, Any], *, format: str | None, start: int
) -> list[Message]:
    if isinstance(messages, Message | Mapping) or hasattr(messages, "model_dump"):
        messages = [messages]  # type: ignore[list-item]
    if not isinstance(messages, Iterable) or isinstance(messages, str | bytes):
        raise InvalidHistory(f"expected a Message, a dict or a list of them, got {type(messages).__name__}",
                             index=start)
    # SDK objects (openai's ChatCompletionMessage, anthropic's Message, …) are pydantic models: take their dicts.
    items = [m.model_dump(exclude_none=True) if hasattr(m, "model_dump") else m for m in messages]
    if not items:
        return []
    if all(isinstance(m, Message) for m in items):
        return check_messages(items, start=start)
    if any(isinstance(m, Message) for m in items):
        return [m for i, item in enumerate(items) for m in _coerce([item], format=format, start=start + i)]
    from ..formats import detect_format, get_format
    from ..formats._common import check_nesting
    from ..formats.intake import check_intake

    dicts: list[Mapping[str, Any]] = []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidHistory(f"expected a Message or a dict, got {type(item).__name__}", index=start + i)
        check_nesting(item, index=start + i)
        dicts.append(item)
    name = format or detect_format(dicts)
    wire = get_format(name)
    dicts = check_intake(name, dicts, start=start)  # what no request could carry is refused here, by field
    try:
        decoded = wire.decode(dicts)
    except InvalidHistory as exc:
        raise InvalidHistory(exc.problem, index=None if exc.index is None else start + exc.index,
                             field=exc.field) from None
    return check_messages(decoded, start=start)
