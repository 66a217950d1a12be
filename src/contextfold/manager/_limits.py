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
input) stays with the session that sent it: one caller asking for a reply of nearly the whole window must not
shrink every other caller of a shared store (the proxy's) to a few dozen tokens. That part is kept under the
session (``session-limit.<owner tag>:<model>``, read by no other session), so a restarted process or another
instance serving the session does not meet the same overflow again; retention drops it with the session's secret
memory (``ToolOutputCache.retain``). So does all of a limit of which nothing holds for other callers (an error that
names no limit): the proxy builds a manager per request, which would otherwise meet the refusal again every time
the session's view grows past it. A session's own record is read only where the model has a record (a manager
reads the model's record every time it starts, a fleet worker every turn: one round trip when no limit is known);
where none holds for every caller, that record is a marker naming no limit (:data:`_NO_SHARED_LIMIT`).

A limit inferred rather than stated (an error naming no limit: only "too long"; or a figure far below the configured
window, see :mod:`contextfold.recovery`) is *provisional*: this session's only, and for
:data:`PROVISIONAL_LIMIT_SECONDS`, after which the thresholds go back to what the provider stated (or the window)
and the provider is asked again. An upstream answering "too long" to everything for a while (a transient bug, a
misbehaving gateway) so shrank the session step by step to a few dozen tokens, and the manager (the proxy) then
refused every later request itself, for good, without asking the upstream again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..compaction import Budgets, Policy

__all__ = ["LIMIT_KEY_PREFIX", "PROVISIONAL_LIMIT_SECONDS", "SESSION_LIMIT_KEY_PREFIX", "ProviderLimit",
           "budgets_within", "limit_key", "limit_saved_at", "session_limit_key", "store_losses"]

# How long a provisional limit holds (an inference from an error naming no limit): long enough that a provider really
# below the window costs one refused request per period, short enough that a transient refusal is forgotten soon.
PROVISIONAL_LIMIT_SECONDS = 15 * 60
# Blob-store keys of learned limits: ``limit:<model>``. Not a ref id, an index or a claim, so the cache's
# garbage collection and retention never touch them.
LIMIT_KEY_PREFIX = "limit:"
# A stored record bigger than this is not one of ours (a record is a few dozen bytes).
_MAX_RECORD_BYTES = 4_096


# The model's record when no limit holds for every caller but some session keeps one of its own: it names no limit
# (a release before it reads no limit in it either), and tells a manager that its session's own record may exist.
_NO_SHARED_LIMIT: dict[str, object] = {"tokens": None, "provider_limit": None, "sessions": True}


# Keys of a session's own lower limits: ``session-limit.<owner tag>:<model>`` (the tag as the session's claims
# and secret memory carry it: retention ages the three together). Not a ref id either.
SESSION_LIMIT_KEY_PREFIX = "session-limit."


def limit_key(model: str) -> str:
    """The blob-store key of ``model``'s learned limit."""
    return LIMIT_KEY_PREFIX + model


def session_limit_key(model: str, tag: str) -> str:
    """The blob-store key of the session tagged ``tag``'s own limit for ``model``."""
    return f"{SESSION_LIMIT_KEY_PREFIX}{tag}:{model}"


def limit_saved_at(store: Any, key: str) -> float | None:
    """When the session limit under ``key`` was saved (seconds since the epoch), or None when not known."""
    try:
        raw = store.get(key)
        data = json.loads(raw) if len(raw) <= _MAX_RECORD_BYTES else None
    except Exception:  # (missing, unreadable: its age is unknown)
        return None
    saved = data.get("saved_at") if isinstance(data, dict) else None
    return float(saved) if isinstance(saved, int | float) and not isinstance(saved, bool) else None


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
    tokens: int | None  # None: the model's marker naming no limit (:data:`_NO_SHARED_LIMIT`)
    provider_limit: int | None
    # A session's record whose ``tokens`` is provisional: when it expires, and the lasting limit under it (if any).
    expires_at: float | None = None
    lasting: int | None = None


class ProviderLimit:
    """The learned limit of one manager's model: in memory, and in the blob store when there is one.

    A store that fails is reported through ``warn`` and skipped: the limit still holds for this manager. Not
    thread-safe: the manager holds its lock.
    """

    def __init__(self, model: str, store: Any, warn: Callable[[str], None], session_tag: str | None = None,
                 now: Callable[[], float] = time.time) -> None:
        self.model = model
        self.now = now  # seconds since the epoch: when a provisional limit expires
        self.store = store  # a BlobStore, or None (no cache: the limit lives as long as the manager)
        self.warn = warn
        self.session_tag = session_tag  # the session's owner tag: where its own lower limit is kept (None: nowhere)
        self.tokens: int | None = None  # the learned prompt limit by our count, None while none is known
        self._lasting: int | None = None  # the part of ``tokens`` that does not expire (stated, or set by the caller)
        self._provisional: int | None = None  # an inferred limit below it, until ``_expires_at``
        self._expires_at: float | None = None
        self.provider_limit: int | None = None  # the provider's own figure, when an error gave one
        self._shared: int | None = None  # the part of ``tokens`` that holds for every caller: what is stored
        self._model_recorded = False  # whether the store holds the model's record (a limit or the marker)
        self._loaded = store is None
        self._losses = store_losses(store)  # the store's count of possible losses when its records were last known

    def load(self) -> int | None:
        """Read the stored limit once (the first call); the learned limit after it. A failing store is skipped."""
        if self._loaded:
            return self.tokens
        self._loaded = True
        record = self._read()
        self._model_recorded = record is not None
        if record is not None and record.tokens is not None:
            if self._lasting is None or record.tokens < self._lasting:
                self._lasting, self.provider_limit = record.tokens, record.provider_limit
            if self._shared is None or record.tokens < self._shared:
                self._shared = record.tokens
        # (an own record exists only beside the model's: a session's own limit, or the marker)
        own = self._read(self._session_key()) if record is not None else None
        if own is not None:
            lasting = own.tokens if own.expires_at is None else own.lasting
            if lasting is not None and (self._lasting is None or lasting < self._lasting):
                self._lasting = lasting
            if own.expires_at is not None and own.tokens is not None and self.now() < own.expires_at:
                self._provisional, self._expires_at = own.tokens, own.expires_at
        self._settle()
        return self.tokens

    def expire(self) -> bool:
        """Drop a provisional limit whose time is up (the provider is asked again); True when the limit rose."""
        if self._provisional is None or self._expires_at is None or self.now() < self._expires_at:
            return False
        self._provisional = self._expires_at = None
        before = self.tokens
        self._settle()
        return self.tokens != before

    def _settle(self) -> None:
        """``tokens``: the lasting limit, or the provisional one below it while it holds."""
        lasting, provisional = self._lasting, self._provisional
        if provisional is not None and lasting is not None and provisional >= lasting:
            provisional = self._provisional = self._expires_at = None  # (a lasting limit came under it)
        self.tokens = provisional if provisional is not None else lasting

    def learn(self, tokens: int, provider_limit: int | None = None, *, shared: int | None = None,
              provisional: bool = False) -> bool:
        """Lower the limit to ``tokens`` (never raises it); True when it went down.

        ``shared``: the part that holds for every caller of the model (``tokens`` when not given), saved to the
        store; a lower ``tokens`` stays with this manager. ``0``: none of it does (an error that names no limit).
        ``provisional``: ``tokens`` is an inference, this session's for :data:`PROVISIONAL_LIMIT_SECONDS` (nothing
        of it is shared).
        """
        self.load()
        self.expire()
        if provisional:
            if self.tokens is not None and tokens >= self.tokens:
                return False
            self._provisional, self._expires_at = max(1, tokens), self.now() + PROVISIONAL_LIMIT_SECONDS
            if provider_limit is not None:
                self.provider_limit = provider_limit
            self._settle()
            self._keep_own()
            return True
        if shared != 0:
            shared = max(1, tokens if shared is None else max(tokens, shared))
            lower_shared = self._shared is None or shared < self._shared
            if lower_shared:
                self._shared = shared
                if provider_limit is not None:
                    self.provider_limit = provider_limit
                self._write()
        if self._lasting is not None and tokens >= self._lasting:
            self._settle()  # (the shared part may have come down under it)
            return False
        before = self.tokens
        self._lasting = max(1, tokens if self._shared is None else min(tokens, self._shared))
        if provider_limit is not None:
            self.provider_limit = provider_limit
        self._settle()
        self._keep_own()
        return self.tokens != before

    def restore_if_lost(self, losses: int | None = None) -> bool:
        """Write the limits again when the store says it may have lost them (a Redis restarted empty); True if so.

        Cheap when nothing was lost (the store's counter, no round trip): the manager asks before every call. The
        process still knows what it learned; without this, the next manager of the model (another worker, the
        proxy's next request) met the provider's error again.
        """
        losses = store_losses(self.store) if losses is None else losses  # (``losses``: the counter as just read)
        if losses == self._losses:
            return False
        self._losses = losses
        if self.tokens is None:
            return False
        self._model_recorded = False  # (the marker may be gone with the rest)
        self._write()
        self._keep_own()
        return True

    def forget(self) -> None:
        """Drop the learned limit, here and in the store (the provider's window was raised, say)."""
        self.tokens = self.provider_limit = self._shared = self._lasting = None
        self._provisional = self._expires_at = None
        self._model_recorded = False
        if self.store is not None:
            try:
                self.store.delete(limit_key(self.model))
                own = self._session_key()
                if own is not None:
                    self.store.delete(own)
            except Exception as exc:
                self.warn(f"could not forget the learned limit of {self.model!r} in the store: {exc}")
        self._loaded = True

    def _session_key(self) -> str | None:
        return session_limit_key(self.model, self.session_tag) if self.session_tag is not None else None

    def _keep_own(self) -> None:
        """Keep under the session what of its limit holds for no other caller, if any (below the shared, or all)."""
        if self.tokens is None or (self._shared is not None and self.tokens >= self._shared):
            return
        if self._shared is None:
            self._mark_model()
        self._write_own()

    def _mark_model(self) -> None:
        """Make sure the model has a record, so that the session's next manager reads its own (the marker)."""
        if self.store is None or self._model_recorded or self._session_key() is None:
            return
        record = dict(_NO_SHARED_LIMIT, model=self.model)
        try:
            # Never over a limit another worker stored meanwhile (any record makes a manager read its own).
            put_new = getattr(self.store, "put_new", None)  # (a store of the protocol's older shape: a plain put)
            (put_new or self.store.put)(limit_key(self.model), json.dumps(record).encode())
            self._model_recorded = True
        except Exception as exc:
            self.warn(f"could not save the learned limit of {self.model!r} to the store: {exc}")

    def _write_own(self) -> None:
        """Keep this session's own lower limit under the session (another session never reads it)."""
        key = self._session_key()
        if self.store is None or key is None or self.tokens is None:
            return
        record: dict[str, object] = {"model": self.model, "tokens": self.tokens,
                                     "provider_limit": self.provider_limit, "saved_at": time.time()}
        if self._provisional is not None and self.tokens == self._provisional:
            # (a release before reads ``tokens`` alone: it keeps the provisional limit for good, as it did)
            lasting = self._lasting if self._shared is None or (self._lasting or 0) < self._shared else None
            record.update(expires_at=self._expires_at, lasting=lasting)
        try:
            self.store.put(key, json.dumps(record).encode())
        except Exception as exc:
            self.warn(f"could not save this session's learned limit of {self.model!r} to the store: {exc}")

    def _read(self, key: str | None = None) -> _Record | None:
        """The record under ``key`` (the model's shared one by default)."""
        if self.store is None:
            return None
        from ..errors import RefNotFound

        try:
            # One round trip for the model's record (a fleet worker reads it every turn); a session's own record is
            # read only where the store holds one for the model (a limit, or the marker of sessions' own limits).
            raw = self.store.get(key if key is not None else limit_key(self.model))
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
        if not isinstance(data, dict):
            return None
        tokens, provider = data.get("tokens"), data.get("provider_limit")
        if tokens is None and data.get("sessions") is True:
            return _Record(None, None)
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens <= 0:
            return None
        provider = provider if isinstance(provider, int) and not isinstance(provider, bool) else None
        expires, lasting = data.get("expires_at"), data.get("lasting")
        if key is None or isinstance(expires, bool) or not isinstance(expires, int | float):
            return _Record(tokens, provider)
        lasting = lasting if isinstance(lasting, int) and not isinstance(lasting, bool) and lasting > 0 else None
        return _Record(tokens, provider, expires_at=float(expires), lasting=lasting)

    def _write(self) -> None:
        if self.store is None or self._shared is None:
            return
        # Another worker may have learned a lower limit meanwhile: the store keeps the lowest.
        stored = self._read()
        if stored is not None and stored.tokens is not None and stored.tokens <= self._shared:
            self._model_recorded = True
            self._shared = stored.tokens
            self._lasting = stored.tokens if self._lasting is None else min(self._lasting, stored.tokens)
            self._settle()
            self.provider_limit = stored.provider_limit or self.provider_limit
            return
        record = {"model": self.model, "tokens": self._shared, "provider_limit": self.provider_limit}
        try:
            self.store.put(limit_key(self.model), json.dumps(record).encode())
            self._model_recorded = True
        except Exception as exc:
            self.warn(f"could not save the learned limit of {self.model!r} to the store: {exc}")


def store_losses(store: Any) -> int:
    """The store's count of possible losses (0 for none, or a store that never forgets on its own)."""
    losses = getattr(store, "losses", None)
    try:
        return int(losses()) if callable(losses) else 0
    except Exception:  # (a store that cannot tell: nothing to do)
        return 0
