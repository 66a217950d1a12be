"""The provider's real limit, learned from its context-length errors and kept for the model (issue 21 §2).

The manager's window comes from the model registry or ``max_context_tokens``; the provider may accept less (a
proxy, a deployment with a smaller window, a limit that counts what the manager does not see). Overflow recovery
tells the manager each limit it learns (:meth:`ProviderLimit.learn`): from then on the thresholds are those of
the learned limit, so later turns stay under it without another error, and the answered output is never widened
past it.

A learned limit is the most prompt tokens, by the manager's own count of the view and what the request carries
beside it (tool schemas, instructions, a response-format schema), that the provider is taken to accept. It only
ever goes down. It is kept in the session's blob store under a key per model (``limit:<model>``), so another
session on the same store, a restarted process or another worker of a fleet (a Redis store) starts with it.

What is stored is what holds for every caller of the model: the limit the provider's window leaves beside the
policy's reply reserve. A part that comes from one request (its own ``max_tokens``, which left less room for the
input) stays with the manager that sent it: one caller asking for a reply of nearly the whole window must not
shrink every other caller of a shared store (the proxy's) to a few dozen tokens.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..compaction import Budgets, Policy

__all__ = ["LIMIT_KEY_PREFIX", "ProviderLimit", "budgets_within", "limit_key"]

# Blob-store keys of learned limits: ``limit:<model>``. Not a ref id, an index or a claim, so the cache's
# garbage collection and retention never touch them.
LIMIT_KEY_PREFIX = "limit:"
# A stored record bigger than this is not one of ours (a record is a few dozen bytes).
_MAX_RECORD_BYTES = 4_096


def limit_key(model: str) -> str:
    """The blob-store key of ``model``'s learned limit."""
    return LIMIT_KEY_PREFIX + model


def budgets_within(policy: Policy, window: int, prompt_limit: int) -> Budgets:
    """The thresholds of the largest window up to ``window`` whose hard threshold is at most ``prompt_limit``.

    Every figure the policy derives from the window (soft threshold, tool-output budget, reply reserve) then
    follows the limit the provider really enforces, as if the model had been registered with that window.
    """
    from ..errors import ConfigError

    budgets = policy.budgets(window)
    if budgets.hard <= prompt_limit:
        return budgets
    low, high = 1, window  # hard(w) is non-decreasing in w: the largest w with hard(w) <= prompt_limit
    best: Budgets | None = None
    while low <= high:
        middle = (low + high) // 2
        try:
            candidate = policy.budgets(middle)
        except ConfigError:  # a window no larger than the reply reserve
            low = middle + 1
            continue
        if candidate.hard <= prompt_limit:
            best, low = candidate, middle + 1
        else:
            high = middle - 1
    if best is None:
        # Not even the smallest workable window fits: keep the reply reserve, give the view what is left.
        smallest = policy.budgets(window)
        hard = max(1, prompt_limit)
        return type(smallest)(window=hard + smallest.reply_reserve, hard=hard, soft=int(hard * policy.soft_pct),
                              reply_reserve=smallest.reply_reserve,
                              tool_output_budget=min(smallest.tool_output_budget, int(hard * policy.soft_pct)))
    return best


@dataclass(frozen=True, slots=True)
class _Record:
    tokens: int
    provider_limit: int | None


class ProviderLimit:
    """The learned limit of one manager's model: in memory, and in the blob store when there is one.

    A store that fails is reported through ``warn`` and skipped: the limit still holds for this manager. Not
    thread-safe: the manager holds its lock.
    """

    def __init__(self, model: str, store: Any, warn: Callable[[str], None]) -> None:
        self.model = model
        self.store = store  # a BlobStore, or None (no cache: the limit lives as long as the manager)
        self.warn = warn
        self.tokens: int | None = None  # the learned prompt limit by our count, None while none is known
        self.provider_limit: int | None = None  # the provider's own figure, when an error gave one
        self._shared: int | None = None  # the part of ``tokens`` that holds for every caller: what is stored
        self._loaded = store is None

    def load(self) -> int | None:
        """Read the stored limit once (the first call); the learned limit after it. A failing store is skipped."""
        if self._loaded:
            return self.tokens
        self._loaded = True
        record = self._read()
        if record is not None and (self.tokens is None or record.tokens < self.tokens):
            self.tokens, self.provider_limit = record.tokens, record.provider_limit
        if record is not None and (self._shared is None or record.tokens < self._shared):
            self._shared = record.tokens
        return self.tokens

    def learn(self, tokens: int, provider_limit: int | None = None, *, shared: int | None = None) -> bool:
        """Lower the limit to ``tokens`` (never raises it); True when it went down.

        ``shared``: the part that holds for every caller of the model (``tokens`` when not given), saved to the
        store; a lower ``tokens`` stays with this manager.
        """
        self.load()
        shared = max(1, tokens if shared is None else max(tokens, shared))
        lower_shared = self._shared is None or shared < self._shared
        if lower_shared:
            self._shared = shared
            if provider_limit is not None:
                self.provider_limit = provider_limit
            self._write()
        if self.tokens is not None and tokens >= self.tokens:
            return False
        self.tokens = max(1, min(tokens, shared if self._shared is None else self._shared))
        if provider_limit is not None:
            self.provider_limit = provider_limit
        return True

    def forget(self) -> None:
        """Drop the learned limit, here and in the store (the provider's window was raised, say)."""
        self.tokens = self.provider_limit = self._shared = None
        if self.store is not None:
            try:
                self.store.delete(limit_key(self.model))
            except Exception as exc:
                self.warn(f"could not forget the learned limit of {self.model!r} in the store: {exc}")
        self._loaded = True

    def _read(self) -> _Record | None:
        if self.store is None:
            return None
        from ..errors import RefNotFound

        try:
            raw = self.store.get(limit_key(self.model))  # one round trip: a fleet worker reads it every turn
            if len(raw) > _MAX_RECORD_BYTES:
                return None
            data = json.loads(raw)
        except RefNotFound:
            return None
        except ValueError:
            return None  # not a record of ours: the next error teaches the limit again
        except Exception as exc:
            self.warn(f"could not read the learned limit of {self.model!r} from the store: {exc}")
            return None
        tokens = data.get("tokens") if isinstance(data, dict) else None
        provider = data.get("provider_limit") if isinstance(data, dict) else None
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens <= 0:
            return None
        return _Record(tokens, provider if isinstance(provider, int) and not isinstance(provider, bool) else None)

    def _write(self) -> None:
        if self.store is None or self._shared is None:
            return
        # Another worker may have learned a lower limit meanwhile: the store keeps the lowest.
        stored = self._read()
        if stored is not None and stored.tokens <= self._shared:
            self._shared = stored.tokens
            self.tokens = stored.tokens if self.tokens is None else min(self.tokens, stored.tokens)
            self.provider_limit = stored.provider_limit or self.provider_limit
            return
        record = {"model": self.model, "tokens": self._shared, "provider_limit": self.provider_limit}
        try:
            self.store.put(limit_key(self.model), json.dumps(record).encode())
        except Exception as exc:
            self.warn(f"could not save the learned limit of {self.model!r} to the store: {exc}")
