"""What the built-in chat clients share: SDK loading, overflow errors, the provider base class.

The interface they implement, :class:`~contextfold.summarize.ChatProvider` (and the :class:`Completion` it returns),
lives with its consumer, the LLM summarizer.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import import_module
from importlib.util import find_spec
from typing import Any, ClassVar

from ..errors import ContextOverflowError, MissingExtra
from ..recovery import overflow
from ..summarize.provider import ChatMessage, ChatProvider, Completion

__all__ = [
    "SDK",
    "ChatMessage",
    "ChatProvider",
    "Completion",
    "SDKProvider",
    "overflow_as_error",
    "overflow_error",
    "overflow_from_message",
]

def overflow_from_message(message: str, provider: str | None = None) -> ContextOverflowError | None:
    """A :class:`ContextOverflowError` when ``message`` is a context-window error, with the counts it names.

    The reading is :func:`contextfold.recovery.parse_overflow`'s, so providers and recovery agree on what an
    overflow is.
    """
    info = overflow.parse_overflow(message, provider=provider)
    return None if info is None else info.to_error()


# Providers refuse an over-long prompt with a 400; any other status (429, 5xx) passes through as the SDK raised it.
_OVERFLOW_STATUS = 400


def overflow_error(exc: BaseException, provider: str) -> ContextOverflowError | None:
    """The :class:`ContextOverflowError` an SDK's error stands for, or None when it is some other error.

    The whole exception is read (its body and error code too, not only the message), but only when it is a 400 or
    carries no status at all.
    """
    if getattr(exc, "status_code", _OVERFLOW_STATUS) != _OVERFLOW_STATUS:
        return None
    info = overflow.parse_overflow(exc, provider=provider)
    return None if info is None else info.to_error()


@contextmanager
def overflow_as_error(provider: str) -> Iterator[None]:
    """Raise context-window errors from the block as :class:`ContextOverflowError`; let every other error pass."""
    try:
        yield
    except Exception as exc:
        error = overflow_error(exc, provider)
        if error is None:
            raise
        raise error from exc


@dataclass(frozen=True, slots=True)
class SDK:
    """A vendor SDK, imported only when a client is built, and the names of its two client classes."""

    module: str
    feature: str
    extra: str
    sync_client: str
    async_client: str

    def require(self) -> None:
        """Fail now when the SDK is missing, without importing it, so a missing extra fails at configuration."""
        if find_spec(self.module) is None:
            raise MissingExtra(self.feature, self.extra, module=self.module)

    def load(self) -> Any:
        """The SDK module."""
        try:
            return import_module(self.module)
        except ImportError as exc:
            raise MissingExtra(self.feature, self.extra, module=self.module) from exc


class SDKProvider:
    """What the providers built on an official SDK share: options, clients built on first use, a name.

    Args:
        model: the model name sent with each request.
        base_url: the API root (default: the vendor's).
        api_key: the key (default: the SDK reads it from the environment).
        max_retries: the SDK's own retries on 429 and 5xx.
        timeout: seconds per request.
        client: an SDK client to use instead of building one; ``async_client`` likewise.
    """

    sdk: ClassVar[SDK]

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None, max_retries: int = 2,
                 timeout: float = 120.0, client: Any = None, async_client: Any = None) -> None:
        if client is None or async_client is None:
            self.sdk.require()
        self.model = model
        self.name = f"{self.sdk.extra}:{model}"
        self._options: dict[str, Any] = {"base_url": base_url, "api_key": api_key, "max_retries": max_retries,
                                         "timeout": timeout}
        self._client = client
        self._async_client = async_client

    @property
    def client(self) -> Any:
        """The sync SDK client (built on first use)."""
        if self._client is None:
            self._client = getattr(self.sdk.load(), self.sdk.sync_client)(**self._options)
        return self._client

    @property
    def async_client(self) -> Any:
        """The async SDK client (built on first use)."""
        if self._async_client is None:
            self._async_client = getattr(self.sdk.load(), self.sdk.async_client)(**self._options)
        return self._async_client
