"""The part of a ContextManager that steers what the agent sees of its context (held as ``manager.steering``).

It keeps what the notes need between calls (what changed since the model's last turn, which of contextfold's tools
the agent has, messages since the last compaction) and answers the manager's questions: the masking order, the
write-time rule of a tool, the receipt of a compaction, the budget line of a call. No I/O; the manager holds the lock.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..messages import Message
from ..pairing import ToolPair
from .notes import (
    HISTORY_SEARCH,
    READ_OUTPUT,
    RECEIPT_KIND,
    SinceLastTurn,
    receipt_message,
    receipt_text,
    status_message,
    status_text,
)
from .order import MaskOrder, mask_order
from .resources import _access_of_call
from .tool_policy import ResolvedToolPolicy, ToolPolicies

if TYPE_CHECKING:
    from ..compaction import Policy
    from ..tokens import MessageCounter

__all__ = ["Steering", "schema_tool_names", "tool_name_of"]

# A budget line with every clause and wide figures: what the manager reserves for it before deciding.
_WIDEST_SINCE = SinceLastTurn(masked=99_999, masked_tokens=0, summarized=99_999, compactions=1)
_WIDEST_TOOLS = frozenset({"tool_output_cache", "history_search"})
_WIDEST_TOKENS = 9_999_999
# What a receipt does not count as a message summarized: contextfold's own summaries, retain blocks and receipts
# (a tuple: compared by equality, so a kind of any value, even one that cannot be hashed, is tested as Message.kind).
_NOT_ORIGINAL = ("summary", "retain", RECEIPT_KIND)
# Rounds to settle the budget line's figure, which counts the line itself (two suffice: a digit more or less).
_STATUS_ROUNDS = 3
# A tool result's call is looked for among this many latest messages of the view (it is almost always the one before).
_CALL_LOOKBACK = 64


def tool_name_of(result: Message, batch: Sequence[Message], view: Sequence[Message]) -> str | None:
    """The name of the tool that produced ``result``: its own, or its call's (in ``batch`` or the end of ``view``)."""
    if result.name:
        return result.name
    # Results follow their calls closely: the batch and the last messages of the view are enough to look at.
    for m in [*reversed(batch), *(view[i] for i in range(len(view) - 1, max(-1, len(view) - _CALL_LOOKBACK), -1))]:
        for call in m.tool_calls:
            if call.id == result.tool_call_id:
                return call.name
    return None


def schema_tool_names(schemas: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """Tool names in declarations of any shape (Chat's ``function.name``, Responses' and Anthropic's ``name``)."""
    names: set[str] = set()
    for schema in schemas:
        function = schema.get("function") if isinstance(schema, Mapping) else None
        name = function.get("name") if isinstance(function, Mapping) else schema.get("name")
        if isinstance(name, str):
            names.add(name)
    return frozenset(names)


class Steering:
    """Per-session state and rules of agent-facing context (see the module docstring)."""

    def __init__(self, policy: Policy, counter: MessageCounter, declared_tools: Collection[str] = ()) -> None:
        self.policies = ToolPolicies(policy.tools)
        self.superseded = policy.superseded_reads
        self.status_mode: str = policy.context_status
        self.receipts = policy.compaction_receipt
        self.counter = counter
        self.declared_tools = frozenset(declared_tools)
        self.offered_tools: frozenset[str] = frozenset()
        self.since = SinceLastTurn()
        self.messages_since_compaction: int | None = None
        self._told = False  # a line with the current changes went out in a request
        self._tools_seen: set[str] = set()  # tool names called so far (per-tool rules resolved once per name)
        self.turns_summarized = 0  # model turns the rolling summary covers (this manager's compactions)
        self._reserve: tuple[int, int] | None = None  # (counter revision, tokens of the longest budget line)

    # -- what the agent has -------------------------------------------------------------------------------------
    @property
    def agent_tools(self) -> frozenset[str]:
        """The contextfold tools the agent can call: declared to the manager (``tools=``) or offered by an adapter."""
        return self.declared_tools | self.offered_tools

    def offer(self, names: Collection[str]) -> None:
        """An adapter tells which tools the agent has for the coming call."""
        self.offered_tools = frozenset(names)

    # -- per-tool rules -----------------------------------------------------------------------------------------
    def rules(self, tool_name: str | None) -> ResolvedToolPolicy:
        """The per-tool policy of ``tool_name``."""
        return self.policies.for_tool(tool_name)

    def write_rule(self, result: Message, batch: Sequence[Message], view: Sequence[Message]) -> tuple[bool, int | None]:
        """(keep whole, write-time cap or None) for a tool result arriving in ``batch`` after ``view``."""
        if not self.policies.configured:
            return False, None
        rules = self.rules(tool_name_of(result, batch, view))
        return rules.keep_whole, rules.max_tokens

    def mask_order(self, view: Sequence[Message], pairs: Sequence[ToolPair] | None = None,
                   stale: Mapping[int, int] | None = None) -> MaskOrder:
        """What masking takes first and what it leaves in ``view``.

        ``pairs``: its ``pair_list``, ``stale``: its superseded reads, when known.
        """
        if not self.superseded and not self.policies.configured:
            return MaskOrder()
        return mask_order(view, self.policies, superseded=self.superseded, pairs=pairs, stale=stale)

    def read_calls_ahead(self, messages: Sequence[Message]) -> None:
        """Read what each tool call of ``messages`` accesses, as :meth:`mask_order` will (the read-ahead, ``add()``).

        The order of a masking turn reads every call's access (its arguments parsed, its resource and lines); the
        calls made since the last turn were parsed there, ~45 µs each (issue 22, masking turns). Parsed ahead (the
        model's call as it is added: it comes after the read-ahead), they are found remembered
        (``resources._access_of_call``).
        """
        if not self.superseded:
            return
        for m in messages:
            for call in m.tool_calls:
                rule = self.policies.resource_rule(call.name)
                if rule is not None:
                    _access_of_call(rule, call.arguments)

    def unsummarized_tools(self, names: Iterable[str]) -> tuple[str, ...]:
        """Those of ``names`` whose outputs must not be summarized (``summarize: false`` or ``protected``)."""
        if not self.policies.configured:
            return ()
        return tuple(sorted({n for n in names if not self.policies.for_tool(n).summarize}))

    # -- what happened since the model's last turn ----------------------------------------------------------------
    def note_added(self, messages: Sequence[Message], protected_tools: Sequence[str]) -> tuple[str, ...] | None:
        """New messages: a model turn after a line that told the changes starts a new "since your last turn".

        Changes no line has told yet stay: an adapter adds the model's message that asked for a compaction only
        after the compaction ran (``compact_context``), and the next request must still say it happened. Returns
        the compactor's new ``protected_tools`` when a tool whose outputs must not be summarized first appears
        (``protected_tools``: the policy's), else None.
        """
        if self._told and any(m.role == "assistant" for m in messages):
            self.since = SinceLastTurn()
            self._told = False
        if self.messages_since_compaction is not None:
            self.messages_since_compaction += len(messages)
        if not self.policies.configured:
            return None
        names = {c.name for m in messages for c in m.tool_calls} - self._tools_seen
        if not names:
            return None
        self._tools_seen |= names
        keep = self.unsummarized_tools(self._tools_seen)
        if not keep or not set(keep) & names:
            return None
        return tuple(dict.fromkeys((*protected_tools, *keep)))

    def added_mark(self) -> tuple[Any, ...]:
        """What :meth:`note_added` changes, as it is now: given to :meth:`take_back_added` when that add is undone."""
        return self.since, self._told, self.messages_since_compaction, frozenset(self._tools_seen)

    def take_back_added(self, mark: tuple[Any, ...]) -> None:
        """Undo the :meth:`note_added` calls since ``mark`` (:meth:`added_mark`): an add() that raised."""
        self.since, self._told, self.messages_since_compaction, tools_seen = mark
        self._tools_seen = set(tools_seen)

    def note_masked(self, count: int, tokens: int) -> None:
        """A masking pass replaced ``count`` outputs, freeing ``tokens``."""
        self.since.masked += count
        self.since.masked_tokens += tokens

    def note_compacted(self, summarized: int) -> None:
        """A compaction summarized ``summarized`` messages."""
        self.since.summarized += summarized
        self.since.compactions += 1
        self.messages_since_compaction = 0

    # -- the notes ------------------------------------------------------------------------------------------------
    def receipt(self, summarized: Sequence[Message], total: int | None = None) -> Message | None:
        """The receipt of a compaction that summarized ``summarized`` (None when receipts are off).

        ``total``: messages the summary now covers over all compactions (its ``compacted_count``); the turns are
        counted over the compactions this session's manager made.
        """
        if not self.receipts:
            return None
        # (meta read directly, roles counted in C: ``summarized`` is most of a long view; a kind that is not a str
        # is no kind, as Message.kind says, and so not one of these)
        originals = [m for m in summarized if m.meta.get("kind") not in _NOT_ORIGINAL]
        self.turns_summarized += [m.role for m in originals].count("assistant")
        count = max(total or 0, len(originals))
        return receipt_message(receipt_text(summarized=count, turns=self.turns_summarized, tools=self.agent_tools))

    @property
    def status_on(self) -> bool:
        """Whether a budget line may be sent (``policy.context_status`` is not ``off``)."""
        return self.status_mode != "off"

    @property
    def status_reserve(self) -> int:
        """Tokens of the longest budget line this session can send (0 while the line is off)."""
        if not self.status_on:
            return 0
        revision = self.counter.revision
        if self._reserve is None or self._reserve[0] != revision:
            self._reserve = (revision, self.counter.count_message(self.widest_status()))
        return self._reserve[1]

    @property
    def compaction_reserve(self) -> int:
        """Tokens a compaction leaves for what follows it: its receipt at its longest, and a budget line."""
        line = self.status_reserve if self.status_on and not self.decision_reserve else 0
        if not self.receipts:
            return line
        widest = receipt_text(summarized=10**6, turns=10**6, tools=(HISTORY_SEARCH, READ_OUTPUT))
        return line + self.counter.count_message(receipt_message(widest))

    @property
    def decision_reserve(self) -> int:
        """What decisions count for the line: its longest when it goes out on every call (``always``).

        With ``changes`` it goes out only after masking or a compaction made room (both leave the view well under
        the threshold that fired); a compaction keeps room for it in its budget.
        """
        return self.status_reserve if self.status_mode == "always" else 0

    def decision_line(self) -> Message | None:
        """The budget line :attr:`decision_reserve` counts (its longest), or None when decisions count none."""
        return self.widest_status() if self.status_mode == "always" else None

    @property
    def has_line(self) -> bool:
        """Whether the coming call gets a budget line: ``always``, or ``changes`` with something to tell."""
        return self.status_mode == "always" or (self.status_mode == "changes" and self.since.changed)

    def status(self, sent: int, grounded: Callable[[int], int], *, window: int) -> Message | None:
        """The budget line for the coming call, or None (off, or ``changes`` with nothing changed).

        ``sent``: tokens of everything else the request carries; ``grounded`` corrects a count by the provider's
        last report. The figure counts the line itself, whose digits change its length a little: settled in a few
        rounds.
        """
        if not self.has_line:
            return None

        def line(tokens: int) -> Message:
            return status_message(status_text(tokens=grounded(tokens), window=window, since=self.since,
                                              tools=self.agent_tools))

        status = line(sent + self.status_reserve)
        for _ in range(_STATUS_ROUNDS):
            settled = line(sent + self.counter.count_message(status))
            if settled == status:
                break
            status = settled
        return status

    def told(self) -> None:
        """The line for the current changes went out in a request (the model's next message ends them)."""
        self._told = True

    def widest_status(self) -> Message:
        """The longest budget line this session can send (what the manager counts before deciding)."""
        return status_message(status_text(tokens=_WIDEST_TOKENS, window=_WIDEST_TOKENS, since=_WIDEST_SINCE,
                                          tools=_WIDEST_TOOLS))
