"""When to act and how much to keep: the :class:`Policy`, the :class:`Budgets` it implies, and :func:`decide`.

The policy is plain, validated data (frozen; checked by a pydantic model generated from its fields when it is given
anything but its defaults, see :mod:`._policy_schema`). ``decide`` turns the current figures into the cheapest
action that gets the view back under its thresholds (DESIGN.md principle 4: masking before summarizing, soft
before hard, emergency only at the message cap).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Self, TypeAlias, TypeVar

from ..errors import ConfigError
from ..messages import EMPTY, Role, freeze
from ..steering.tool_policy import ToolPolicy

__all__ = [
    "DEFAULT_CLEAR_AT_LEAST",
    "DEFAULT_HARD_CAP_BUFFER",
    "DEFAULT_MASK_DIGEST_TOKENS",
    "DEFAULT_PROTECTED_TOOLS",
    "DEFAULT_REPLY_RESERVE_MAX_PCT",
    "DEFAULT_SOFT_PCT",
    "DEFAULT_TRIGGER_PCT",
    "DEFAULT_USER_MESSAGE_BUDGET",
    "Action",
    "Budgets",
    "Plan",
    "Policy",
    "Strategy",
    "decide",
]

Strategy: TypeAlias = Literal["task_state", "brief", "decision_log", "code_delta", "custom"]
# When the model gets the one-line context status (issue 24): never, when something was masked or summarized since
# its last turn, or on every call.
ContextStatus: TypeAlias = Literal["off", "changes", "always"]

# Compact when 85% of the window is used: late enough that short sessions never pay for a summary, early enough
# that the next turn's tool output and the reply still fit.
DEFAULT_TRIGGER_PCT = 0.85
# The soft threshold (60% of hard) starts summarizing the oldest half while there is room to do it calmly.
DEFAULT_SOFT_PCT = 0.6
# Agents that loop on tiny tool calls hit provider message caps and slow attention long before the token limit.
DEFAULT_EMERGENCY_MESSAGE_COUNT = 500
# Reserved for the model's reply: a typical tool call or a paragraph of text, so a full view still gets an answer.
DEFAULT_HARD_CAP_BUFFER = 1_500
# ... but never more than this share of the window: at 4K, 1,500 reserved tokens were 37% of the window and left the
# history 1,250 tokens beside tau-bench's 1,250-token policy, so nearly every turn compacted (496 compactions in 200
# sessions; the longest gpt-4o reply there is 461 tokens). A fifth of 4K (800) still holds a tool call or a
# paragraph; from 7,500 tokens on the reserve is the full hard_cap_buffer.
DEFAULT_REPLY_RESERVE_MAX_PCT = 0.2
# Tokens of each masked output's placeholder spent on a digest of what it replaced (names, ids, numbers). Measured
# (README, issue 11; recall at 0 / 16 / 24 / 32 / 48 tokens): SWE-agent sessions at 16K 97.88 / 97.96 / 98.00 /
# 98.02 / 97.96% (larger digests fill the view faster: 10 -> 16 compactions), tau-bench at 4K 95.16 / 95.83 / 96.01 /
# 96.18 / 96.61%; 32 is the best on the first and close to it on the second.
DEFAULT_MASK_DIGEST_TOKENS = 32
# The last six turns carry the working state (the request being served and the agent's latest steps).
DEFAULT_KEEP_RECENT_TURNS = 6
# Four tool call/result pairs: the observations the next step most likely builds on.
DEFAULT_KEEP_TOOL_IO_PAIRS = 4
# User messages are the ground truth of the task; 20K tokens keeps every request of a long session verbatim.
DEFAULT_USER_MESSAGE_BUDGET = 20_000
# The latest user request always stays verbatim, even when one huge paste exceeds the user-message budget.
DEFAULT_RETAIN_LAST_TURNS = 1
# Same bound as the summarizer's own default (summarize.base.DEFAULT_SUMMARY_TOKENS).
DEFAULT_SUMMARY_MAX_TOKENS = 2_000
# Masking rewrites the middle of the history and so invalidates the provider's prompt cache from that point on;
# only do it when it frees enough to be worth a cache miss.
DEFAULT_CLEAR_AT_LEAST = 2_000
# Each rolling summary loses a little; from the second one on, tell the user before a third degrades accuracy
# further (002: "warn before the third compaction").
DEFAULT_WARN_AFTER_COMPACTIONS = 2
# Todo and plan tools carry the agent's plan: their calls and results are never summarized away (000 §Decision 7
# names manage_todo_list; the others are the same tool in Claude Code, Codex and the Agents SDK examples).
DEFAULT_PROTECTED_TOOLS = ("manage_todo_list", "todo_write", "TodoWrite", "update_plan")
# The meta key (on Message.meta or a provider dict's "meta") that marks a message protected (004 §8).
DEFAULT_PROTECTED_FLAG = "protected"
# Idle ("sleep") compaction runs between turns once the view holds half the window (002 §Phase 1): early enough
# that the start of the next turn rarely has to compact while the user waits.
DEFAULT_SLEEP_PCT = 0.5
# One input this large is almost always a mistake (a binary, a whole log): warn, as 004 §2 asks.
DEFAULT_LARGE_INPUT_BYTES = 256 * 1024
# After the circuit breaker opens, automatic compaction is tried again once this many seconds have passed.
DEFAULT_CIRCUIT_COOLDOWN_S = 60.0

# Tool outputs may take a quarter of the window before the oldest are masked ...
TOOL_OUTPUT_WINDOW_SHARE = 0.25
# ... but never less than 20K (masking tiny histories gains nothing) nor more than 60K (past that, the model's
# attention to the rest of the conversation suffers whatever the window).
TOOL_OUTPUT_BUDGET_MIN = 20_000
TOOL_OUTPUT_BUDGET_MAX = 60_000


_T = TypeVar("_T")


def _setting(default: _T, **constraints: Any) -> _T:
    """A policy field's default with its constraints (``gt``, ``le``, ``min_length``, ``description``).

    The validating model (:mod:`._policy_schema`) gives them to the field as pydantic ``Field`` arguments.
    """
    made: _T = field(default=default, metadata=constraints)
    return made


class Action(StrEnum):
    """What :func:`decide` asks the manager to do, cheapest first."""

    NONE = "none"
    MASK = "mask"
    SOFT = "soft"
    HARD = "hard"
    EMERGENCY = "emergency"


@dataclass(frozen=True, slots=True)
class Budgets:
    """The token thresholds a policy implies for one context window.

    Attributes:
        window: The model's context window.
        hard: Full compaction above this many tokens (``trigger_pct`` of the window, at most the window minus the
            reply reserve).
        soft: Summarize the oldest portion above this (``soft_pct`` × ``hard``).
        reply_reserve: Tokens kept free for the model's reply: ``hard_cap_buffer``, at most ``reply_reserve_max_pct``
            of the window.
        tool_output_budget: Tool outputs in the view above this are masked, oldest first.
    """

    window: int
    hard: int
    soft: int
    reply_reserve: int
    tool_output_budget: int


@dataclass(frozen=True, slots=True)
class Plan:
    """The decision for one turn: the action, a sentence saying why, and the figures behind it."""

    action: Action
    reason: str
    figures: Mapping[str, int | float] = field(default_factory=lambda: EMPTY)


class _Layout:
    """One policy class's fields: their names, defaults, and whether values need the validating model."""

    __slots__ = ("defaults", "defaults_valid", "factories", "names", "required")

    def __init__(self, specs: Iterable[Field[Any]], *, trusted_defaults: bool) -> None:
        specs = list(specs)
        self.names = tuple(spec.name for spec in specs)
        self.defaults: dict[str, Any] = {s.name: s.default for s in specs if s.default is not MISSING}
        self.factories: dict[str, Callable[[], Any]] = {s.name: s.default_factory for s in specs
                                                        if s.default_factory is not MISSING}
        # (a subclass may add a field without a default: every construction is validated, which asks for it)
        self.required = frozenset(self.names) - set(self.defaults) - set(self.factories)
        # Policy's own defaults are valid by construction (tests/test_cold_start.py checks it); a subclass's are
        # checked with its first construction (a missing required field, too).
        self.defaults_valid = trusted_defaults

    def trusted(self, values: Mapping[str, Any]) -> bool:
        """Whether ``values`` may skip validation: defaults only, of the same type (``auto=1`` is validated)."""
        if not self.defaults_valid or self.required:
            return False
        for name, value in values.items():
            default = self.defaults.get(name, MISSING)
            if default is MISSING:
                factory = self.factories.get(name)
                default = factory() if factory is not None else MISSING
            if type(value) is not type(default) or value != default:
                return False
        return True

    def fill(self, policy: Policy, values: Mapping[str, Any], given: frozenset[str]) -> None:
        for name in self.names:
            if name in values:
                value = values[name]
                if type(value) is dict:  # (the caller's dict is theirs: a later change to it must not show here)
                    value = dict(value)
            elif name in self.defaults:
                value = self.defaults[name]
            else:
                value = self.factories[name]()
            object.__setattr__(policy, name, value)
        object.__setattr__(policy, "_fields_set", given)


@dataclass(kw_only=True, repr=True, eq=True, slots=True, weakref_slot=True)
class Policy:
    """Thresholds, keep rules and summarization settings. Immutable; unknown keys are rejected.

    Validation errors name the field (``trigger_pct``, ``keep_recent_turns``, …), so a bad config file points at
    the line to fix. They are pydantic's ``ValidationError``: a policy given any value that is not its default is
    validated by a pydantic model generated from these fields (:mod:`._policy_schema`, built on first use). The
    default policy is valid by construction and needs neither pydantic nor its import, most of a process's first
    ``ContextManager(...)`` when it was a pydantic model (issue 22). The pydantic-style methods a caller may use are
    kept (:meth:`model_validate`, :meth:`model_validate_json`, :meth:`model_json_schema`, :meth:`model_construct`,
    :meth:`model_copy`, :meth:`model_dump`, :meth:`model_dump_json`, :attr:`model_fields`,
    :attr:`model_fields_set`), and a ``Policy`` field of a pydantic model is validated as before
    (``__get_pydantic_core_schema__``). A subclass may set other defaults or add fields (``class Lean(Policy):
    trigger_pct: float = 0.7``): it gets a validating model of its own, and its defaults are checked once.
    """

    # -- thresholds --------------------------------------------------------------------------------------------
    trigger_pct: float = _setting(DEFAULT_TRIGGER_PCT, gt=0, le=1, description="hard threshold, share of window")
    soft_pct: float = _setting(DEFAULT_SOFT_PCT, gt=0, lt=1, description="soft threshold, fraction of hard")
    emergency_message_count: int = _setting(DEFAULT_EMERGENCY_MESSAGE_COUNT, ge=2)
    hard_cap_buffer: int = _setting(DEFAULT_HARD_CAP_BUFFER, ge=0, description="tokens reserved for the reply")
    reply_reserve_max_pct: float = _setting(
        DEFAULT_REPLY_RESERVE_MAX_PCT, gt=0, le=1,
        description="the reply reserve never takes more than this share of the window")

    # -- what to keep ------------------------------------------------------------------------------------------
    keep_recent_turns: int = _setting(DEFAULT_KEEP_RECENT_TURNS, ge=0)
    keep_tool_io_pairs: int = _setting(DEFAULT_KEEP_TOOL_IO_PAIRS, ge=0)
    roles_never_prune: tuple[Role, ...] = ("system", "developer")
    protected_tools: tuple[str, ...] = DEFAULT_PROTECTED_TOOLS
    protected_flag: str = _setting(DEFAULT_PROTECTED_FLAG, min_length=1,
                                   description="meta key marking a message protected")
    user_message_budget: int = _setting(DEFAULT_USER_MESSAGE_BUDGET, ge=0)
    retain_last_turns: int = _setting(DEFAULT_RETAIN_LAST_TURNS, ge=0)

    # -- idle ("sleep") compaction and warnings ------------------------------------------------------------------
    sleep_pct: float = _setting(DEFAULT_SLEEP_PCT, gt=0, le=1,
                                description="idle compaction threshold, share of the window")
    large_input_bytes: int = _setting(DEFAULT_LARGE_INPUT_BYTES, gt=0,
                                      description="warn when one added message is larger than this")
    circuit_cooldown_s: float = _setting(DEFAULT_CIRCUIT_COOLDOWN_S, ge=0,
                                         description="seconds before a paused manager tries compacting again")

    # -- summarizing -------------------------------------------------------------------------------------------
    strategy: Strategy = "task_state"
    custom_prompt: str | None = None
    summary_max_tokens: int = _setting(DEFAULT_SUMMARY_MAX_TOKENS, gt=0)
    summary_directives: tuple[str, ...] = ()
    retain_directives: tuple[str, ...] = ()
    retain_prompt: str | None = _setting(None, min_length=1,
                                         description="replaces the instruction for the <retain> block (001 §2.6.4)")
    summary_role: Literal["user", "system"] = "user"
    summary_header: str | None = _setting(
        None, min_length=1,
        description="first line of the summary; {version} and {count} are filled in (default: "
                    "'[contextfold summary v{version} — {count} earlier messages compacted]')")
    enabled: bool = _setting(True, description="false: contextfold never masks or compacts on its own, not "
                                               "even on overflow; a manual compact() still does (001 §2.5)")
    auto: bool = True
    allow_on_overflow: bool = False
    on_compaction_failure: Literal["raise", "proceed"] = _setting(
        "raise", description="proceed: prepare() sends the view uncompacted when compaction fails (004 §1)")
    warn_after_compactions: int = _setting(DEFAULT_WARN_AFTER_COMPACTIONS, ge=1)

    # -- masking old tool outputs ------------------------------------------------------------------------------
    tool_output_budget_tokens: int | None = _setting(None, gt=0)
    exclude_tools: tuple[str, ...] = ()
    clear_at_least: int = _setting(DEFAULT_CLEAR_AT_LEAST, ge=0)
    clear_tool_inputs: bool = False
    mask_digest_tokens: int = _setting(DEFAULT_MASK_DIGEST_TOKENS, ge=0,
                                       description="tokens of a masked output's placeholder kept for a digest of it")
    mask_digest: Literal["full", "light"] = _setting(
        "light",
        description="what that digest lists: light (the entities by kind as first seen, checked for secrets at "
                    "once; nothing for an output over 3,000 characters: the background read-ahead ~45% cheaper, "
                    "recall at equal tokens within 0.1 pt on the shared sessions) or full (candidates ranked by "
                    "kind and mentions, definitions with their line numbers, bare numbers, long outputs' ends)")

    # -- the provider's prompt cache ----------------------------------------------------------------------------
    cache_aware: bool = _setting(
        True,
        description="weigh each masking batch, soft compaction and wider answered output against the provider's "
                    "prompt cache it invalidates, and wait while it does not pay (the hard threshold always acts); "
                    "false: act on the thresholds alone")
    cache_pricing: str | None = _setting(
        None, min_length=1,
        description="the model whose prompt-cache scheme and prices those decisions use (None: the manager's model)")
    prompt_cache_ttl: Literal["5m", "1h"] | None = _setting(
        None,
        description="the lifetime of the provider's prompt cache the session writes, for those decisions: '5m' or "
                    "'1h' (Anthropic's 1-hour cache: 2x writes, kept an hour idle). None: 5 minutes until a usage "
                    "report says otherwise; once record_usage() sees cache writes, the latest call that wrote "
                    "decides either way")
    # -- what the agent sees of its context, per-tool rules (issue 24, contextfold.steering) ------------------------
    tools: dict[str, ToolPolicy] = field(default_factory=dict, metadata={
        "description": "tool name or glob -> max_tokens, keep_whole, never_mask, mask_after_turns, summarize, "
                       "protected, resource (superseded reads); later entries override what they set"})
    superseded_reads: bool = _setting(
        True, description="mask first the outputs of reads a later read of the same resource (same or wider range) "
                          "or an edit of it superseded")
    context_status: ContextStatus = field(default="off", metadata={
        "description": "a one-line context status after the history: off, changes (when something was masked or "
                       "summarized since the model's last turn) or always"})
    compaction_receipt: bool = _setting(
        True, description="after a compaction, a short note after the summary says how many messages it replaced "
                          "and which tool finds them")

    # -- the answered output -------------------------------------------------------------------------------------
    answered_output_tokens: int | None = _setting(
        None, ge=0,
        description="most tokens the output being answered may take when shown wider than its write-time view "
                    "(None: twice its write-time cap, within the room under hard; 0: never widened)")

    # -- the provider's own context management (contextfold.provider_context) -----------------------------------
    compactor: Literal["contextfold", "provider", "both"] = _setting(
        "contextfold",
        description="who compacts: contextfold; the provider (its context editing and compaction, sized from this "
                    "policy); or both (the provider's editing first, contextfold's compaction as the fallback)")
    keep_thinking_turns: int | Literal["all"] = _setting(
        "all",
        description="thinking and reasoning of the last N turns kept, older cleared ('all': keep every one, "
                    "best for the prompt cache); the turn in a tool loop is always kept whole")
    provider_compaction_instructions: str | None = _setting(
        None, min_length=1, description="instructions for the provider's own compaction summary (Anthropic)")
    provider_pause_after_compaction: bool = _setting(
        False, description="ask the provider to stop after compacting (Anthropic pause_after_compaction)")

    # (name -> dataclasses.Field, each with its constraints and description in ``metadata``; set for each class)
    model_fields: ClassVar[Mapping[str, Field[Any]]]
    _layout: ClassVar[_Layout]
    # The keys given when the policy was made (pydantic's ``model_fields_set``, read by ``exclude_unset``).
    _fields_set: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)

    if not TYPE_CHECKING:  # (mypy types the keywords from the fields, kw_only; the dataclass keeps this __init__)

        def __init__(self, **values: Any) -> None:
            layout = type(self)._layout
            given = frozenset(values)
            if not layout.trusted(values):
                from ._policy_schema import validated

                if not layout.defaults_valid and not layout.required:
                    validated(type(self), {})  # (a subclass's own defaults, checked once)
                    layout.defaults_valid = True
                values = validated(type(self), values)
            layout.fill(self, values, given)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # A subclass sets team defaults or adds fields: it is made a dataclass of its own (in place: its fields
        # with a default of their own live in its instances' __dict__), validated by a model generated for it.
        super(Policy, cls).__init_subclass__(**kwargs)  # (zero-argument super() sees the class before slots)
        if "__init__" not in cls.__dict__:
            cls.__init__ = Policy.__init__  # type: ignore[method-assign]
        dataclass(kw_only=True, repr=True, eq=True)(cls)
        inherited = Policy.model_fields
        for spec in fields(cls):  # (a default redefined keeps the field's range: trigger_pct stays within (0, 1])
            if not spec.metadata and spec.name in inherited:
                spec.metadata = inherited[spec.name].metadata
        _lay_out(cls)

    def __setattr__(self, name: str, value: object) -> None:
        from pydantic_core import ValidationError

        raise ValidationError.from_exception_data(type(self).__name__, [{"type": "frozen_instance", "loc": (name,),
                                                                        "input": value}])

    def __delattr__(self, name: str) -> None:
        self.__setattr__(name, None)

    def __getstate__(self) -> dict[str, Any]:
        # (pydantic's layout: a policy pickled by a version where Policy was a pydantic model loads the same way)
        return {"__dict__": {name: getattr(self, name) for name in self._layout.names},
                "__pydantic_fields_set__": set(self._fields_set)}

    def __setstate__(self, state: object) -> None:  # (pickle, copy: past the frozen __setattr__)
        from .._pickled import pickled_fields

        values, given = pickled_fields(type(self).__name__, state, self._layout.names)
        self._layout.fill(self, values, frozenset(values) if given is None else given)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """A policy as a field of a pydantic model: validated by the generated model, dumped as its fields."""
        from ._policy_schema import core_schema

        return core_schema(cls, handler)

    @classmethod
    def model_validate(cls, obj: object, *, strict: bool | None = None, from_attributes: bool | None = None,
                       context: Any = None) -> Self:
        """A policy from a mapping of its fields (validated), or ``obj`` itself when it is one."""
        if isinstance(obj, cls):
            return obj
        from ._policy_schema import validated

        if isinstance(obj, Mapping):
            given = frozenset(obj)
        else:
            given = frozenset(name for name in cls._layout.names if hasattr(obj, name))
        values = validated(cls, obj, strict=strict, from_attributes=from_attributes, context=context)
        return cls._made(values, given)

    @classmethod
    def model_validate_json(cls, json_data: str | bytes, *, strict: bool | None = None,
                            context: Any = None) -> Self:
        """A policy from the JSON text of its fields (as :meth:`model_dump_json` writes it), validated."""
        from ._policy_schema import model_of

        checked = model_of(cls).model_validate_json(json_data, strict=strict, context=context)
        return cls._made({name: getattr(checked, name) for name in cls._layout.names},
                         frozenset(checked.model_fields_set))

    @classmethod
    def model_json_schema(cls, **options: Any) -> dict[str, Any]:
        """The JSON schema of a policy (pydantic's ``model_json_schema`` of the generated model)."""
        from ._policy_schema import model_of

        schema: dict[str, Any] = model_of(cls).model_json_schema(**options)
        return schema

    @classmethod
    def model_construct(cls, _fields_set: Collection[str] | None = None, **values: Any) -> Self:
        """A policy of ``values`` (the defaults for the rest), not validated: for values that are valid already."""
        return cls._made(values, frozenset(values) if _fields_set is None else frozenset(_fields_set))

    @classmethod
    def _made(cls, values: Mapping[str, Any], given: frozenset[str]) -> Self:
        policy = object.__new__(cls)
        cls._layout.fill(policy, values, given)
        return policy

    @property
    def model_fields_set(self) -> set[str]:
        """The fields given when the policy was made (not those left at their defaults)."""
        return set(self._fields_set)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with the fields in ``update`` replaced, validated (pydantic's ``model_copy`` does not validate)."""
        values = {name: getattr(self, name) for name in self._layout.names}
        if deep:
            values = copy.deepcopy(values)
        if not update:
            return self._made(values, self._fields_set)
        from ._policy_schema import validated

        return self._made(validated(type(self), {**values, **update}), self._fields_set | frozenset(update))

    def model_dump(self, *, mode: Literal["python", "json"] | str = "python", include: Any = None,
                   exclude: Any = None, exclude_none: bool = False, **options: Any) -> dict[str, Any]:
        """The fields as plain data (tool policies as mappings; lists, not tuples, with ``mode="json"``).

        ``options`` are pydantic's (``exclude_unset``, ``by_alias``, ``round_trip``, …): with any of them, or
        ``include``/``exclude`` given as nested mappings, the generated model dumps the policy.
        """
        if options or not (_names_only(include) and _names_only(exclude)) or mode not in ("python", "json"):
            dumped: dict[str, Any] = self._as_model().model_dump(mode=mode, include=include, exclude=exclude,
                                                                  exclude_none=exclude_none, **options)
            return dumped
        out: dict[str, Any] = {}
        for name in self._layout.names:
            if (include is not None and name not in include) or (exclude is not None and name in exclude):
                continue
            value = getattr(self, name)
            if value is None and exclude_none:
                continue
            out[name] = _plain(value, as_json=mode == "json")
        return out

    def model_dump_json(self, *, indent: int | None = None, **options: Any) -> str:
        """The fields as JSON text (:meth:`model_validate_json` reads it back); ``options`` as :meth:`model_dump`'s."""
        if indent is not None or options:
            text: str = self._as_model().model_dump_json(indent=indent, **options)
            return text
        return json.dumps(self.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))

    def _as_model(self) -> Any:
        """This policy as an instance of the generated model (not validated again), for pydantic's dump options."""
        from ._policy_schema import model_of

        return model_of(type(self)).model_construct(
            _fields_set=set(self._fields_set), **{name: getattr(self, name) for name in self._layout.names})

    @property
    def may_compact_on_overflow(self) -> bool:
        """Whether overflow recovery may compact: enabled, and automatic compaction on or allowed on overflow."""
        return self.enabled and (self.auto or self.allow_on_overflow)

    @classmethod
    def quality(cls, **overrides: object) -> Self:
        """A preset that spends more of the window to keep more of the history verbatim.

        Against the cost-lean default: compaction waits longer (soft at 80% of hard, hard at 90% of the window)
        and keeps more recent turns and tool I/O pairs, so fewer facts leave the view; it sends more tokens per
        call (figures of both in the README's quality table). ``overrides`` set any other field.
        """
        fields: dict[str, object] = {"trigger_pct": 0.9, "soft_pct": 0.8, "keep_recent_turns": 8,
                                     "keep_tool_io_pairs": 6, **overrides}
        return cls.model_validate(fields)

    def sleep_threshold(self, window: int) -> int:
        """Tokens of the view above which idle-time compaction runs (``sleep_pct`` of the window)."""
        return int(window * self.sleep_pct)

    def budgets(self, window: int) -> Budgets:
        """The thresholds for a model with a ``window``-token context.

        Raises:
            ConfigError: the window is not larger than the reply reserve (``hard_cap_buffer``).
        """
        if window <= 0:
            raise ConfigError(f"must be a positive number of tokens, got {window}", field="window")
        reserve = min(self.hard_cap_buffer, int(window * self.reply_reserve_max_pct))
        if window <= reserve:
            raise ConfigError(
                f"reserves {reserve} tokens for the reply, which leaves nothing of a {window}-token "
                "window: lower hard_cap_buffer or reply_reserve_max_pct, or use a larger window",
                field="hard_cap_buffer",
            )
        hard = min(int(window * self.trigger_pct), window - reserve)
        soft = int(hard * self.soft_pct)
        return Budgets(
            window=window,
            hard=hard,
            soft=soft,
            reply_reserve=reserve,
            tool_output_budget=self._tool_output_budget(window, soft),
        )

    def _tool_output_budget(self, window: int, soft: int) -> int:
        if self.tool_output_budget_tokens is not None:
            return self.tool_output_budget_tokens
        clamped = min(max(int(window * TOOL_OUTPUT_WINDOW_SHARE), TOOL_OUTPUT_BUDGET_MIN), TOOL_OUTPUT_BUDGET_MAX)
        # In small windows the 20K floor exceeds the soft threshold, and masking (cheap, lossless) would never run
        # before summarizing (expensive, lossy); the soft threshold caps it.
        return min(clamped, soft)


def _lay_out(cls: type[Policy]) -> None:
    cls.model_fields = MappingProxyType({f.name: f for f in fields(cls) if f.init})
    cls._layout = _Layout(cls.model_fields.values(), trusted_defaults=cls is Policy)


_lay_out(Policy)


def _names_only(names: object) -> bool:
    """Whether ``include``/``exclude`` is absent or a plain collection of field names (not pydantic's nesting)."""
    return names is None or (isinstance(names, set | frozenset | list | tuple)
                             and all(isinstance(name, str) for name in names))


def _plain(value: Any, *, as_json: bool) -> Any:
    """``value`` as plain data, as pydantic dumps it (a dataclass as a mapping of its fields)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name), as_json=as_json) for f in fields(value)}
    if isinstance(value, dict):
        return {key: _plain(item, as_json=as_json) for key, item in value.items()}
    if isinstance(value, tuple):
        items = [_plain(item, as_json=as_json) for item in value]
        return items if as_json else tuple(items)
    return value


def decide(tokens: int, message_count: int, tool_output_tokens: int, budgets: Budgets, policy: Policy) -> Plan:
    """The cheapest action that brings the view back under its thresholds.

    Order (DESIGN.md principle 4): nothing under soft · mask the oldest tool outputs when that alone gets the view
    under the threshold it crossed (and frees at least ``clear_at_least``) · soft over the soft threshold · hard
    over the hard threshold · emergency at the message cap. With ``auto`` off, compaction is never chosen here
    (overflow recovery decides that with ``allow_on_overflow``); masking still is, since it loses nothing. With
    ``enabled`` off, nothing is chosen at all.

    Args:
        tokens: Tokens of the view as it would be sent.
        message_count: Messages in the view.
        tool_output_tokens: Tokens of the tool outputs in the view that may be masked.
        budgets: From :meth:`Policy.budgets`.
        policy: The policy in force.
    """
    if tokens < 0 or message_count < 0 or tool_output_tokens < 0:  # (one test: this runs on every prepare())
        for name, value in (("tokens", tokens), ("message_count", message_count),
                            ("tool_output_tokens", tool_output_tokens)):
            if value < 0:
                raise ConfigError(f"must not be negative, got {value}", field=name)
    excess_tool = max(0, tool_output_tokens - budgets.tool_output_budget)
    figures: dict[str, int | float] = {
        "tokens": tokens,
        "message_count": message_count,
        "tool_output_tokens": tool_output_tokens,
        "soft": budgets.soft,
        "hard": budgets.hard,
        "window": budgets.window,
        "tool_output_budget": budgets.tool_output_budget,
        "maskable_excess": excess_tool,
        "usage_pct": round(tokens / budgets.window, 4),
    }
    worth_masking = excess_tool > 0 and excess_tool >= policy.clear_at_least
    if (not worth_masking and tokens <= budgets.soft and tokens <= budgets.hard and policy.enabled
            and message_count < policy.emergency_message_count):
        # What almost every call decides, first (the same plan the ladder below ends in).
        return Plan(Action.NONE, f"{tokens} tokens are within the soft threshold {budgets.soft}", freeze(figures))

    def plan(action: Action, reason: str) -> Plan:
        return Plan(action, reason, freeze(figures))

    if not policy.enabled:
        return plan(Action.NONE, f"{tokens} tokens, {message_count} messages: compaction is disabled (enabled: false)")

    if message_count >= policy.emergency_message_count:
        figures["target"] = budgets.soft
        if not policy.auto:
            return plan(Action.NONE, f"{message_count} messages reach the cap, but automatic compaction is off")
        return plan(Action.EMERGENCY,
                    f"{message_count} messages reach the cap of {policy.emergency_message_count}")
    for threshold, name, action in ((budgets.hard, "hard", Action.HARD), (budgets.soft, "soft", Action.SOFT)):
        if tokens <= threshold:
            continue
        if worth_masking and tokens - excess_tool <= threshold:
            figures["target"] = threshold
            return plan(Action.MASK, f"{tokens} tokens exceed the {name} threshold {threshold}; masking "
                                     f"{excess_tool} tokens of old tool output is enough")
        figures["target"] = budgets.soft
        if not policy.auto:
            return plan(Action.NONE, f"{tokens} tokens exceed the {name} threshold {threshold}, but automatic "
                                     "compaction is off")
        return plan(action, f"{tokens} tokens exceed the {name} threshold {threshold}")
    if worth_masking:
        figures["target"] = budgets.tool_output_budget
        return plan(Action.MASK, f"tool outputs take {tool_output_tokens} tokens, over their budget of "
                                 f"{budgets.tool_output_budget}")
    return plan(Action.NONE, f"{tokens} tokens are within the soft threshold {budgets.soft}")
