"""The limits a manager learns of its provider: the token limit (thresholds) and the media limits (issue 21).

Overflow recovery tells the manager what each error teaches; :class:`LearnedLimits` keeps it (the limit in
:class:`~contextfold.manager._limits.ProviderLimit`, the media limits in
:class:`~contextfold.manager._media.MediaGuard`, both kept in the blob store per model) and applies it to the
manager: the thresholds of the learned limit (``budgets``, the compactor's, the provider context's, the events'
policy summary, the write-time cut of new outputs), and the oldest images and documents taken out of the view while
it is over a media limit. The manager's public methods (``learn_limit``, ``learned_limit``, ``forget_learned_limit``,
``learn_media_limit``, ``media_limits``, ``media``, ``keep_media_within_limits``) delegate here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ._limits import store_losses
from ._media import MediaGuard

if TYPE_CHECKING:
    from contextlib import AbstractContextManager
    from datetime import datetime

    from ..compaction import Budgets, Policy
    from ..media import MediaLimits, MediaTally
    from ..messages import Message
    from ..provider_context import ProviderContext
    from ..telemetry import Tracer
    from ..tokens import MessageCounter
    from ._compactor import Compactor
    from ._request_extras import RequestExtras
    from ._view import View

__all__ = ["LearnedLimits", "LimitsHost"]

_log = logging.getLogger("contextfold.manager._manager")  # (the manager's logger, as before the move)


class LimitsHost(Protocol):
    """What :class:`LearnedLimits` uses of its manager (``contextfold.manager._manager``, which imports this module)."""

    budgets: Budgets
    counter: MessageCounter
    _policy_summary: dict[str, object]
    _clock: Callable[[], datetime] | None

    @property
    def cache(self) -> Any: ...
    @property
    def policy(self) -> Policy: ...
    @property
    def tracer(self) -> Tracer: ...
    @property
    def session_id(self) -> str: ...
    @property
    def model(self) -> Any: ...
    @property
    def _lock(self) -> AbstractContextManager[Any]: ...
    @property
    def _view(self) -> View: ...
    @property
    def _extras(self) -> RequestExtras: ...
    @property
    def _compactor(self) -> Compactor: ...
    @property
    def provider_context(self) -> ProviderContext: ...
    def rewrite_view(self, rewrite: Callable[[list[Message]], list[Message]], *, reason: str,
                     shrinks: bool = False) -> int: ...
    def _count_exactly(self) -> None: ...


class LearnedLimits:
    """The provider's learned token limit and media limits of one manager, applied to its thresholds and view."""

    def __init__(self, manager: LimitsHost, window_budgets: Budgets) -> None:
        from ..cache.owners import owner_tag
        from ._limits import ProviderLimit
        self.manager = manager
        self.window_budgets = window_budgets  # the thresholds of the configured window (a learned limit lowers them)
        self.cache_budget: int | None = None  # the write-time budget a learned limit set, when it set one
        store = manager.cache.store if manager.cache is not None else None
        # The provider's real limit, learned from its overflow errors and kept in the store per model (issue 21).
        clock = manager._clock
        self.limit = ProviderLimit(manager.model.name, store, self.store_failed,
                                   session_tag=owner_tag(manager.session_id),
                                   **({"now": lambda: clock().timestamp()} if clock is not None else {}))
        # The images and documents a request may carry (published limits, lowered by the provider's errors).
        self.guard = MediaGuard(manager.model.provider, model=manager.model.name, store=store, warn=self.store_failed,
                                session_tag=self.limit.session_tag)

    def learned_limit(self) -> int | None:
        """What :meth:`ContextManager.learned_limit` does (taking the manager's lock)."""
        manager = self.manager
        with manager._lock:
            self.limit.load()
            self.expire_provisional()  # (read between calls: what the next one goes out under)
            return self.limit.tokens

    def learn_limit(self, tokens: int, *, provider_limit: int | None = None, shared: int | None = None,
                    provisional: bool = False) -> bool:
        """What :meth:`ContextManager.learn_limit` does (taking the manager's lock)."""
        manager = self.manager
        for name, value, least in (("tokens", tokens, 1), ("shared", shared, 0)):  # (shared=0: none of it is)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
                from ..errors import ConfigError

                raise ConfigError(f"must be a positive number of tokens, got {value!r}", field=f"learn_limit.{name}")
        with manager._lock:
            previous = self.limit.load()
            if not self.limit.learn(tokens, provider_limit, shared=shared, provisional=provisional):
                return False
            self._use_limit(previous, source="error")
            return True

    def expire_provisional(self) -> None:
        """A provisional limit whose time is up no longer holds: the thresholds go back up (under the manager's lock).

        Called by ``prepare()``: the next request goes out at the lasting limit's thresholds (or the window's), so
        the provider is asked again instead of the session keeping, for good, a limit it only inferred.
        """
        if not self.limit.expire():
            return
        if self.limit.tokens is None:
            self.set_budgets(self.window_budgets)
        else:
            self._use_limit(None, source="expired")

    def media_limits(self) -> MediaLimits:
        """What :meth:`ContextManager.media_limits` does (taking the manager's lock)."""
        manager = self.manager
        with manager._lock:
            self.guard.load()
            return self.guard.limits

    def media(self) -> MediaTally:
        """What :meth:`ContextManager.media` does (taking the manager's lock)."""
        manager = self.manager
        with manager._lock:
            return self.guard.tally(manager._view.raw, self._media_version())

    def _media_version(self) -> tuple[int, int]:
        manager = self.manager
        return manager._view.media_version, manager._view.settle_edits

    def learn_media_limit(self, *, max_bytes: int | None = None, max_items: int | None = None,
                          shared: bool = True) -> bool:
        """What :meth:`ContextManager.learn_media_limit` does (taking the manager's lock)."""
        from ..errors import ConfigError
        from ..media import MediaLimits

        manager = self.manager
        for name, value in (("max_bytes", max_bytes), ("max_items", max_items)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise ConfigError(f"must be a positive integer, got {value!r}", field=f"learn_media_limit.{name}")
        with manager._lock:
            return self.guard.learn(MediaLimits(max_bytes=max_bytes, max_items=max_items), shared=shared)

    def keep_media_within_limits(self) -> int:
        """What :meth:`ContextManager.keep_media_within_limits` does (taking the manager's lock)."""
        manager = self.manager
        with manager._lock:
            return self.keep_media_within_limits_locked()

    def keep_media_within_limits_locked(self) -> int:
        """:meth:`keep_media_within_limits` under the manager's lock, held by the caller (``prepare()``)."""
        manager = self.manager
        guard = self.guard
        if not guard.may_know:
            return 0  # (a text-only agent with a provider of no published limit and no store: nothing to count)
        before = guard.tally(manager._view.raw, self._media_version())
        if not before.items:
            return 0
        guard.load()  # (once, when the view first holds media: what earlier managers of the model learned)
        if not guard.limits.known:
            return 0
        tokens, _, _ = manager._view.totals()
        text_tokens = tokens + manager._extras.tokens
        if not guard.over(before, text_tokens):
            return 0
        if manager.counter.provisional:  # byte upper bounds said "evict": only exact counts may decide it
            manager._count_exactly()
            tokens, _, _ = manager._view.totals()
            text_tokens = tokens + manager._extras.tokens
            if not guard.over(before, text_tokens):
                return 0
        from ..media import evict_oldest_media
        from ..telemetry import MediaEvicted

        never = manager.policy.roles_never_prune
        evicted = 0

        def evict(view: list[Message]) -> list[Message]:
            nonlocal evicted
            last_user = max((i for i, m in enumerate(view) if m.role == "user"), default=-1)
            new, evicted = evict_oldest_media(
                view, guard.limits, text_tokens=text_tokens,
                keep=lambda i, m: i == last_user or m.protected or m.role in never)
            return new

        manager.rewrite_view(evict, reason="media_limit")
        if evicted:
            after = guard.tally(manager._view.raw, self._media_version())
            manager.tracer.emit(MediaEvicted(session_id=manager.session_id, count=evicted, bytes_before=before.bytes,
                                             bytes_after=after.bytes, items_before=before.items,
                                             items_after=after.items, max_bytes=guard.limits.max_bytes,
                                             max_items=guard.limits.max_items))
        return evicted

    def forget_learned_limit(self) -> None:
        """What :meth:`ContextManager.forget_learned_limit` does (taking the manager's lock)."""
        manager = self.manager
        with manager._lock:
            self.limit.forget()
            self.set_budgets(self.window_budgets)

    def restore_if_lost(self) -> None:
        """Write the learned token and media limits again if the store says it may have lost them (no round trip)."""
        losses = store_losses(self.limit.store)  # (read once: a Redis store polls a pooled connection for it)
        self.limit.restore_if_lost(losses)
        self.guard.restore_if_lost(losses)

    def apply_stored_limit(self) -> None:
        """A limit learned earlier for this model (another session, process or worker) applies from the start."""
        if self.limit.load() is not None:
            self._use_limit(None, source="store")

    def _use_limit(self, previous: int | None, *, source: str) -> None:
        from ..telemetry import RecoveryLimitLearned
        from ._limits import budgets_within

        manager = self.manager
        tokens = self.limit.tokens
        assert tokens is not None
        budgets = budgets_within(manager.policy, self.window_budgets.window, tokens)
        if budgets == manager.budgets and source == "store":
            return
        self.set_budgets(budgets)
        manager.tracer.emit(RecoveryLimitLearned(session_id=manager.session_id, tokens=tokens, hard=budgets.hard,
                                                 window=budgets.window, previous=previous,
                                                 provider_limit=self.limit.provider_limit, source=source))

    def set_budgets(self, budgets: Budgets) -> None:
        """Thresholds in force from now on: the manager's, its compactor's, the provider context's and the events'.

        The provider context's too: with ``compactor: both`` it judges contextfold's plans by the hard threshold and
        sizes the provider's own clearing and compaction triggers to the window.
        """
        import dataclasses

        from ._build import cache_budget

        manager = self.manager
        manager.budgets = budgets
        manager._compactor.budgets = budgets
        manager.provider_context.budgets = budgets
        manager._policy_summary.update(hard=budgets.hard, soft=budgets.soft)
        cache = manager.cache
        if cache is not None:
            # New outputs are cut for the window really there (unless the configuration sized the cut itself).
            window = self.window_budgets
            derived = cache_budget(window.window, window.tool_output_budget)
            if cache.config.context_budget_tokens in (derived, self.cache_budget):
                self.cache_budget = cache_budget(budgets.window, budgets.tool_output_budget)
                cache.config = dataclasses.replace(cache.config, context_budget_tokens=self.cache_budget)
            cache.context_window = budgets.window

    def store_failed(self, message: str) -> None:
        """A learned limit could not be read or kept in the store: logged and reported, the session goes on."""
        from ..telemetry import CompactWarning

        manager = self.manager
        _log.warning(message)
        manager.tracer.emit(CompactWarning(session_id=manager.session_id, message=message, code="limit_store"))
