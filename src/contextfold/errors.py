"""Every error contextfold raises on purpose derives from :class:`ContextfoldError`.

Messages name the field and the problem so that a user can fix the input without reading our source.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "ContextOverflowError",
    "ContextfoldError",
    "CorruptRecord",
    "IncompleteStream",
    "InsufficientBudget",
    "InvalidHistory",
    "MissingExtra",
    "RecoveryFailed",
    "RefNotFound",
    "StoreError",
    "SummarizerError",
    "UnknownModel",
    "shown",
]


# A value echoed in a message (a model name, a field's value) is shown up to this many characters: the input may
# be hostile or a mistake (a whole file passed as a name), and one line of error must stay one readable line.
SHOWN_CHARS = 120


def shown(value: str) -> str:
    """``repr(value)``, clipped to :data:`SHOWN_CHARS` with its length said when it is longer."""
    if len(value) <= SHOWN_CHARS:
        return repr(value)
    return f"{value[:SHOWN_CHARS]!r}… ({len(value):,} characters)"


class ContextfoldError(Exception):
    """Base class of every error contextfold raises on purpose."""


class InvalidHistory(ContextfoldError, ValueError):
    """A message list that cannot be used: the message index, the field and the problem are named.

    >>> raise InvalidHistory("tool result 'call_7' has no matching tool call", index=12, field="tool_call_id")
    Traceback (most recent call last):
    contextfold.errors.InvalidHistory: message 12: tool_call_id: tool result 'call_7' has no matching tool call
    """

    def __init__(self, problem: str, *, index: int | None = None, field: str | None = None) -> None:
        self.problem = problem
        self.index = index
        self.field = field
        where = []
        if index is not None:
            where.append(f"message {index}")
        if field:
            where.append(field)
        super().__init__(": ".join([*where, problem]))


class UnknownModel(ContextfoldError, KeyError):
    """A model name the registry does not know, with no context window given."""

    def __init__(self, model: str) -> None:
        self.model = model
        super().__init__(model)

    def __str__(self) -> str:
        if len(self.model) > SHOWN_CHARS:
            return (f"unknown model {shown(self.model)}: pass its window explicitly (max_context_tokens=...) or "
                    "register it with contextfold.tokens.register_model(name, context_window=...)")
        return (
            f"unknown model {self.model!r}: pass its window explicitly, e.g. "
            f"ContextManager(model={self.model!r}, max_context_tokens=128000), "
            f"or register it with contextfold.tokens.register_model({self.model!r}, context_window=...)"
        )


class InsufficientBudget(ContextfoldError):
    """Even after compacting everything that may be compacted, the view does not fit the budget."""

    def __init__(self, message: str, *, needed: int, budget: int) -> None:
        self.needed = needed
        self.budget = budget
        super().__init__(message)


class ConfigError(ContextfoldError, ValueError):
    """A configuration value (file, environment or keyword) is invalid; the field path is named."""

    def __init__(self, problem: str, *, field: str | None = None, source: str | None = None) -> None:
        self.problem = problem
        self.field = field
        self.source = source
        parts = [p for p in (source, field) if p]
        super().__init__(": ".join([*parts, problem]))


class MissingExtra(ContextfoldError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, feature: str, extra: str, module: str | None = None) -> None:
        self.feature = feature
        self.extra = extra
        missing = f" (module {module!r} not found)" if module else ""
        super().__init__(f"{feature} needs an optional dependency{missing}: pip install 'contextfold[{extra}]'")


class RefNotFound(ContextfoldError, KeyError):
    """A tool-output reference that the cache does not hold."""

    def __init__(self, ref_id: str) -> None:
        self.ref_id = ref_id
        super().__init__(ref_id)

    def __str__(self) -> str:
        ref = self.ref_id
        if isinstance(ref, str) and len(ref) > _MAX_REF_SHOWN:  # a model's made-up "ref": not echoed into its context
            return f"no cached tool output with ref {ref[:_MAX_REF_SHOWN]!r}… ({len(ref):,} characters)"
        return f"no cached tool output with ref {ref!r}"


# A ref id is 21 characters; more of what a caller or a model passed as one is not repeated in the error.
_MAX_REF_SHOWN = 64


class StoreError(ContextfoldError):
    """A storage backend failed (connection, corruption, conflicting write)."""


class CorruptRecord(StoreError):
    """A stored record contextfold did not write (another program, an older release, a hand edit).

    A store that is down comes back; a record like this stays as it is: callers that retry a ``StoreError`` (the fleet,
    the proxy) give up on this one at once.
    """


class SummarizerError(ContextfoldError):
    """A summarizer could not produce a usable summary (error, refusal, empty or over-long reply)."""


class ContextOverflowError(ContextfoldError):
    """A provider rejected a request for exceeding the model's context window.

    ``prompt_tokens`` and ``limit`` hold the counts parsed from the provider's message when it gives them.
    """

    def __init__(
        self, message: str, *, prompt_tokens: int | None = None, limit: int | None = None, provider: str | None = None
    ) -> None:
        self.prompt_tokens = prompt_tokens
        self.limit = limit
        self.provider = provider
        super().__init__(message)


class IncompleteStream(ContextfoldError):
    """A streamed reply ended before its final event (a dropped connection, a proxy's timeout).

    What arrived was passed through to the caller but is not the model's whole reply, so it was not added to the
    history; ``api`` names the stream's API (``chat``, ``responses``, ``anthropic``). Calling again is safe.
    """

    def __init__(self, api: str, final_event: str, *, unreadable: str | None = None) -> None:
        self.api = api
        if unreadable is not None:  # (a chunk the reply could not be assembled from; every chunk was passed through)
            super().__init__(f"the {api} stream held a chunk its reply could not be assembled from ({unreadable}): "
                             "every chunk was passed through, but the reply was not added to the history")
            return
        super().__init__(f"the {api} stream ended before its final event ({final_event}): the reply is incomplete "
                         f"(a dropped connection or a proxy's timeout) and was not added to the history; call again")


class RecoveryFailed(ContextfoldError):
    """Overflow recovery gave up (retries exhausted, stall guard, or compaction disabled)."""
