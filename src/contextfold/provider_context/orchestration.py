"""Who compacts: contextfold, the provider, or both (``Policy.compactor``). One per manager: ``cm.provider_context``.

- ``contextfold`` (the default): nothing is asked of the provider; contextfold masks and compacts as always.
- ``provider``: a caller that talks to the provider (a client wrapper, an adapter) asks :meth:`settings` for the
  request settings and sends them; the provider clears and compacts, and contextfold neither masks nor compacts
  on its own while it does (overflow recovery still acts: a rejected request is never the end of a session).
- ``both``: the provider's editing first, contextfold's compaction as the fallback: contextfold does not mask nor
  summarize at the soft threshold, and compacts at the hard threshold only when the provider cannot (it was not
  asked to compact: a Chat Completions call, an Anthropic window under the 50,000-token compaction floor), when its
  last reply says the context it read was still over the hard threshold, or when the view would not fit the window.

A provider that is not asked (no caller sent the settings with the coming request) or that refused them
(:meth:`unavailable`) leaves contextfold in charge, as in ``contextfold`` mode. :meth:`observe` reads each reply
(what was cleared, what was compacted, the context the model read) and emits a ``provider.context`` event.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from .report import ProviderReport, ProviderTotals, read_anthropic, read_openai
from .settings import RequestSettings, anthropic_settings, openai_settings

if TYPE_CHECKING:
    from ..compaction import Budgets, Plan, Policy
    from ..telemetry import Tracer

__all__ = ["API", "Compactor", "ProviderContext"]

Compactor: TypeAlias = Literal["contextfold", "provider", "both"]
API: TypeAlias = Literal["anthropic", "openai_responses"]
_APIS: frozenset[str] = frozenset({"anthropic", "openai_responses"})


class ProviderContext:
    """The orchestration of one session's two compactors (see the module).

    Args:
        policy, budgets: The session's policy (``compactor`` and the sizes) and thresholds.
        tracer: Where ``provider.context`` and warnings go.
        session_id: Names the session in the events.
    """

    def __init__(self, policy: Policy, budgets: Budgets, tracer: Tracer, session_id: str) -> None:
        self.policy = policy
        self.budgets = budgets
        self.tracer = tracer
        self.session_id = session_id
        self.engaged: RequestSettings | None = None  # the settings going with the coming request, if any
        self.refused: dict[str, str] = {}  # api -> why the provider refused its settings
        self.totals = ProviderTotals()
        self.last: ProviderReport | None = None
        self._warned: set[str] = set()

    @property
    def mode(self) -> Compactor:
        """``Policy.compactor``."""
        mode: Compactor = self.policy.compactor
        return mode

    # -- the request ----------------------------------------------------------------------------------------------
    def settings(self, api: str, *, thinking: bool = False) -> RequestSettings | None:
        """The settings to send with the coming request to ``api``, or None (then contextfold is in charge).

        ``api``: ``"anthropic"``, ``"openai_responses"``, or any other (``"openai_chat"``, ``"litellm"``, …: no
        provider context management there). ``thinking``: the Anthropic request turns thinking on.
        """
        self.engaged = None
        if self.mode == "contextfold":
            return None
        if api not in _APIS or api in self.refused:
            why = self.refused.get(api, f"{api} has no context management of its own")
            self._warn_once(api, f"compactor {self.mode!r}: {why}; contextfold manages the context of these calls")
            return None
        if api == "anthropic":
            self.engaged = anthropic_settings(self.policy, self.budgets, thinking=thinking)
        else:
            self.engaged = openai_settings(self.policy, self.budgets)
        return self.engaged

    def unavailable(self, api: str, reason: str) -> None:
        """The provider refused the settings (an old API version, a model without the feature): stop sending them."""
        self.refused[api] = reason
        self.engaged = None
        self._warn_once(api, f"the provider refused context management ({reason}); contextfold manages the "
                             "context from now on")

    # -- the reply ------------------------------------------------------------------------------------------------
    def observe(self, api: str, reply: Any) -> ProviderReport:
        """Read what the provider cleared or compacted for ``reply`` and count it (a ``provider.context`` event)."""
        from ..telemetry import ProviderContextReport

        report = read_anthropic(reply) if api == "anthropic" else read_openai(reply)
        self.last = report
        self.totals.add(report)
        self.tracer.emit(ProviderContextReport(
            session_id=self.session_id, api=api, mode=self.mode, cleared_tool_uses=report.cleared_tool_uses,
            cleared_thinking_turns=report.cleared_thinking_turns, cleared_input_tokens=report.cleared_input_tokens,
            compactions=report.compactions, compaction_input_tokens=report.compaction_input_tokens,
            compaction_output_tokens=report.compaction_output_tokens, context_tokens=report.context_tokens,
            paused=report.paused))
        return report

    # -- the decision ---------------------------------------------------------------------------------------------
    def gate(self, plan: Plan, total: int) -> Plan:
        """``plan`` as the mode allows it: what the provider does instead of contextfold becomes ``none``.

        ``total``: the view's tokens as the manager counts them (grounded in the provider's last report).
        """
        settings = self.engaged
        if settings is None:
            return plan  # (most managers: before the import, as this runs on every prepare())
        from ..compaction import Action

        if plan.action is Action.NONE:
            return plan
        if self.mode == "provider":
            return self._none(plan, "the provider manages the context (compactor: provider)")
        if plan.action is Action.EMERGENCY:
            return plan  # the message cap is contextfold's alone
        if total <= self.budgets.hard:
            return self._none(plan, "the provider clears old tool results first (compactor: both)")
        if self.fallback_due(settings, total):
            return plan  # contextfold's ladder as the fallback: masking (when that is enough), then compaction
        return self._none(plan, "the provider compacts at this threshold (compactor: both)")

    def fallback_due(self, settings: RequestSettings, total: int) -> bool:
        """Whether contextfold's hard compaction must act although the provider was asked (``both``)."""
        if not settings.compacts:
            return True  # the provider only clears: compacting stays contextfold's
        if total > self.budgets.window - self.budgets.reply_reserve:
            return True  # the provider would refuse the request before it could compact it
        last = self.last
        return last is not None and last.context_tokens is not None and last.context_tokens > self.budgets.hard

    @staticmethod
    def _none(plan: Plan, why: str) -> Plan:
        from ..compaction import Action

        return replace(plan, action=Action.NONE, reason=f"{plan.reason}; {why}")

    def _warn_once(self, key: str, message: str) -> None:
        if key in self._warned:
            return
        self._warned.add(key)
        from ..telemetry import CompactWarning

        self.tracer.emit(CompactWarning(session_id=self.session_id, code="provider_context", message=message))
