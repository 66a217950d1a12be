"""LangChain v1 integration: an ``AgentMiddleware`` for ``create_agent`` that keeps the agent inside its window.

::

    agent = create_agent(model, tools=tools, system_prompt=prompt, checkpointer=saver,
                         middleware=[ContextfoldMiddleware(manager_options={"store": "memory"})])

Without a manager, the middleware builds one per LangGraph thread, its window taken from the chat model's
profile (``model.profile["max_input_tokens"]``); ``manager_factory`` builds them your way, and ``manager=`` serves a
single conversation. At most ``max_threads`` managers are kept (least recently used first out): the compacted
history itself lives in the graph state, so a thread that comes back, or resumes in a new process from a
checkpointer, picks up from it.

- ``mode="before_model"`` (the default) persists: before each model call the agent state's messages are replaced
  with the manager's view (``RemoveMessage(REMOVE_ALL_MESSAGES)`` followed by the view), so the state and any
  checkpoint hold the compacted history.
- ``mode="wrap_model_call"`` works per request: the state keeps every message; only the request carries the view.

Added directly as a subgraph of a parent graph (``graph.add_node("agent", agent)``), the agent in the default mode
sends the view per request during its run, and its final messages are an update by id that turns the parent's
messages into the manager's view (see :mod:`._langgraph_parent`): the parent's state stays bounded, with the
summary where the messages it replaced stood, and other writers' messages untouched.

In both modes the system prompt is pinned in the manager (counted, never compacted away), a context-length error
is recovered within the call (compact, retry at most 3 times, stall guard, circuit breaker; LangChain's own
``ContextOverflowError`` included), and the middleware's ``tools`` give the agent ``tool_output_cache``,
``tool_output_cache_grep`` and ``history_search``. The middleware keeps no record of what a manager has seen:
that lives with the manager, so any number of middleware objects over one manager add each message once.
Needs ``contextfold[langchain]``.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ConfigError, MissingExtra
from ..manager.reconcile import Exchange, content_key, pin_head, rebase, reconcile, unpinned
from ..media import MediaLimitInfo
from ..recovery import DEFAULT_MAX_RETRIES, OverflowInfo, OverflowRecovery, parse_limit_error
from ..telemetry import CompactWarning
from ._calls import record_usage_safely
from ._degrade import prepare_messages
from ._langchain_convert import Origins, from_langchain, to_langchain
from ._langgraph_parent import parent_update
from ._retrieval import TOOL_NAMES, answer, offer, tool_specs

try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain.agents.structured_output import AutoStrategy, ProviderStrategy, ToolStrategy
    from langchain_core.exceptions import ContextOverflowError as LangChainOverflow
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, RemoveMessage, ToolMessage
    from langchain_core.tools import BaseTool, StructuredTool
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langgraph.config import get_config
    from langgraph.graph.message import REMOVE_ALL_MESSAGES
    from langgraph.types import Overwrite
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("the LangChain middleware", "langchain", module="langchain") from exc

if TYPE_CHECKING:
    from ..manager import ContextManager
    from ..messages import Message

__all__ = ["ContextfoldMiddleware", "Mode", "compacting_node", "request_extras"]

Mode = Literal["before_model", "wrap_model_call"]
_MODES: tuple[str, ...] = ("before_model", "wrap_model_call")
# The thread key used when the agent runs without a LangGraph thread id (no checkpointer configured).
DEFAULT_THREAD = "default"
# The LangGraph history's name in the manager's record, and where the LangChain objects behind it are kept.
SOURCE = "langchain"
ORIGINS_SLOT = "langchain:origins"
# meta["id"] of the agent's system prompt, pinned at the head of the manager's view.
SYSTEM_PROMPT_ID = "langchain:system_prompt"
# Managers kept per middleware (one per thread): enough for a busy server, bounded for a long-lived one.
DEFAULT_MAX_THREADS = 256
# The configurable key compacting_node sets for the agent it runs: the parent takes the agent's final messages
# wholesale, so the middleware may replace the agent's state as at the top (see _in_subgraph).
PARENT_TAKES_VIEW = "contextfold_parent_takes_view"
# The warning's code when a subgraph agent's view cannot be handed to its parent (the parent keeps every message).
SUBGRAPH_STATE_CODE = "subgraph_state_unbounded"
# Where a subgraph agent's manager keeps the ids of the messages its caller held at the end of the last run.
HELD_SLOT = "langchain:held"
# The per-manager memo of message keys (``_Keys``).
KEYS_SLOT = "langchain:keys"
# What the subgraph_state_unbounded warning says.
NESTED_REASON = ("the agent runs two or more graphs below its caller: the graph between applies the agent's removals "
                 "itself, so the graph above keeps every message (in order; each request still carries the view); "
                 "add the agent directly to the graph whose state holds the conversation to keep that state bounded")


class _Step:
    """The runs of a subgraph agent in one step of its parent (``Send`` fan-out), and the ids one of them removed.

    A parent's ``add_messages`` appends a message it no longer has: a removal in one run's update and the same id
    named in another's (every run names the messages it was given) put that message after the step's new ones. So
    a run removes only while it is the step's only run, and a later run of the step leaves out what it removed.
    """

    def __init__(self) -> None:
        self.runs = 0
        self.removed: set[str] = set()


class _Held:
    """The ids of the messages a subgraph agent's caller held at the end of its last run (see _langgraph_parent)."""

    def __init__(self) -> None:
        self.ids: frozenset[str] = frozenset()


def _content_key(message: BaseMessage) -> str:
    calls = [(c.get("id"), c.get("name"), c.get("args")) for c in getattr(message, "tool_calls", None) or ()]
    return content_key([message.type, message.content, calls, getattr(message, "tool_call_id", None)],
                       ident=message.id)


class _Keys:
    """Identity keys of the messages the agent's state holds, made once per message object (per manager).

    The state hands the same message objects to every model call of a thread; a key is a JSON fingerprint of the
    whole message (~19 µs for a 700-character output), so making all of them on every call cost ~190 ms per call at
    10,000 messages. A key is reused while the message is the same object with the same content and tool-call
    objects (a message given new content, as pydantic allows, is keyed again; one whose content list or tool-call
    dicts are changed in place is not noticed, as LangGraph's own reducers never do that).
    """

    def __init__(self) -> None:
        self._made: dict[int, tuple[BaseMessage, Any, Any, str]] = {}

    def key(self, message: BaseMessage) -> str:
        made = self._made.get(id(message))
        # (only an AIMessage has tool calls: asking any other message goes through pydantic's slow __getattr__)
        calls = message.tool_calls if isinstance(message, AIMessage) else None
        if made is not None and made[0] is message and made[1] is message.content and made[2] is calls:
            return made[3]
        key = _content_key(message)
        self._made[id(message)] = (message, message.content, calls, key)
        return key

    def keep_only(self, messages: Sequence[BaseMessage]) -> None:
        """Forget the messages no longer held (called with the state's list once the memo outgrows it)."""
        if len(self._made) > 2 * len(messages) + 64:
            held = {id(m) for m in messages}
            self._made = {k: v for k, v in self._made.items() if k in held}


def _keys(cm: ContextManager) -> _Keys:
    return cm.framework_history.slot(KEYS_SLOT, _Keys)


def _exchange(message: BaseMessage) -> Exchange | None:
    """A message's part in a tool exchange (reconcile mirrors exchanges a parent graph dropped)."""
    if isinstance(message, ToolMessage):
        return "result", (str(message.tool_call_id),)
    calls = getattr(message, "tool_calls", None)
    if isinstance(message, AIMessage) and calls:
        return "call", tuple(str(c.get("id")) for c in calls)
    return None


def _overflow(exc: Exception) -> OverflowInfo | MediaLimitInfo | None:
    info = parse_limit_error(exc)
    if info is None and isinstance(exc, LangChainOverflow):
        info = OverflowInfo(message=str(exc))
    return info


def request_extras(request: ModelRequest) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The tool schemas and response-format schema a model request sends, as the manager counts them.

    Tools as the chat model binds them (``convert_to_openai_tool``; provider tools given as dicts as they are);
    structured output as the schema the strategy sends: a ``response_format`` for the provider strategy, one tool
    per schema for the tool strategy (and the automatic one, which starts as it). The system prompt is pinned in
    the view already.
    """
    tools: list[dict[str, Any]] = []
    for tool in request.tools:
        try:
            tools.append(dict(convert_to_openai_tool(tool)))
        except (TypeError, ValueError):  # a provider's built-in tool in a shape LangChain passes through
            tools.append(dict(tool) if isinstance(tool, Mapping) else {"name": str(getattr(tool, "name", tool))})
    strategy = request.response_format
    response_format = None
    if isinstance(strategy, ProviderStrategy):
        response_format = dict(strategy.to_model_kwargs().get("response_format") or {}) or None
    elif isinstance(strategy, ToolStrategy | AutoStrategy):
        specs = strategy.schema_specs if isinstance(strategy, ToolStrategy) else \
            ToolStrategy(schema=strategy.schema).schema_specs
        tools += [{"type": "function", "function": {"name": spec.name, "description": spec.description or "",
                                                    "parameters": spec.json_schema}} for spec in specs]
    return tools, response_format


def _in_subgraph() -> bool:
    """Whether the agent runs as a subgraph whose final messages the parent merges by id into its own.

    LangGraph joins the namespaces of nested graphs with ``|``; the agent's own nodes at the top have one level. A
    subgraph run by :func:`compacting_node` is not one: its parent takes the final messages as they are.
    """
    try:
        config = get_config()
    except RuntimeError:  # called outside a LangGraph run
        return False
    configurable = config.get("configurable") or {}
    return "|" in str(configurable.get("checkpoint_ns") or "") and not configurable.get(PARENT_TAKES_VIEW)


def compacting_node(agent: Any) -> Any:
    """A parent graph's node that runs ``agent`` (``create_agent`` with the middleware): the view replaces the parent's.

    The agent's final messages (the manager's view and the reply) replace the parent's outright
    (``RemoveMessage(REMOVE_ALL_MESSAGES)`` first), and inside it the middleware replaces the agent's state before
    each model call, as at the top. Added directly (``graph.add_node("agent", agent)``), the agent already leaves
    the parent holding its view through an update by id; this node is for a parent that must hold the view from
    the first run on (the update by id removes only messages the parent held at the end of the previous run).
    The parent's ``messages`` key must use ``add_messages`` (``MessagesState`` does). Other keys of the agent's
    final state that the parent has are passed on as they are.

    It must be the only node writing ``messages`` in its step: LangGraph folds a step's writes in node order, so a
    parallel branch's messages folded before this node's replacement are replaced with the rest. Join parallel
    branches before this node, give them keys of their own, or add the agent directly.
    """
    from langchain_core.runnables import RunnableLambda

    def config_for(config: Any) -> dict[str, Any]:
        configurable = {**(config.get("configurable") or {}), PARENT_TAKES_VIEW: True}
        return {**config, "configurable": configurable}

    def update(state: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in result.items() if k != "messages" and k in state}
        out["messages"] = [RemoveMessage(id=REMOVE_ALL_MESSAGES), *result["messages"]]
        return out

    def run(state: Mapping[str, Any], config: Any) -> dict[str, Any]:
        return update(state, agent.invoke(state, config_for(config)))

    async def arun(state: Mapping[str, Any], config: Any) -> dict[str, Any]:
        return update(state, await agent.ainvoke(state, config_for(config)))

    return RunnableLambda(run, afunc=arun, name=str(getattr(agent, "name", None) or "agent"))


def _messages(state: Any) -> list[BaseMessage]:
    """The state's messages, without the removals a persistent subgraph's last final state may still hold."""
    return _live(state["messages"])


def _live(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages`` without removals and what they remove.

    A persistent subgraph's checkpoint keeps its last final state as it was set (``Overwrite``): each removal
    after the empty stand-in of the message it removes (see :mod:`._langgraph_parent`), which goes with it.
    """
    removed = {m.id for m in messages if isinstance(m, RemoveMessage)}
    return [m for m in messages if m.id not in removed] if removed else list(messages)


def _run_namespace() -> str:
    """The namespace of the agent's run a hook runs in: ``checkpoint_ns`` without the hook's own task (the last)."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # called outside a LangGraph run
        return ""
    return str(configurable.get("checkpoint_ns") or "").rpartition("|")[0]


def _subgraph_run() -> str:
    """The thread and namespace of the subgraph run a hook runs in (parallel runs of one thread differ by it)."""
    return f"{_thread_id()}|{_run_namespace()}"


def _graphs_between() -> bool:
    """Whether a graph stands between the agent and the graph that holds the history (two or more levels up).

    That graph merges the agent's final messages with its own ``add_messages``: it applies the removals, and only
    its result (without them) reaches the graph above, which keeps every message the view dropped.
    """
    return "|" in _run_namespace()


def _parent_step() -> str:
    """The thread, the parent's namespace and its checkpoint: the same for the runs of one step of the parent."""
    try:
        checkpoints = get_config().get("configurable", {}).get("checkpoint_map") or {}
    except RuntimeError:  # called outside a LangGraph run
        return DEFAULT_THREAD
    parent = _run_namespace().rpartition("|")[0]
    return f"{_thread_id()}|{parent}|{checkpoints.get(parent)}"


def _thread_id() -> str:
    try:
        config = get_config()
    except RuntimeError:  # called outside a LangGraph run
        return DEFAULT_THREAD
    thread = (config.get("configurable") or {}).get("thread_id")
    return str(thread) if thread is not None else DEFAULT_THREAD


class ContextfoldMiddleware(AgentMiddleware):
    """Keeps a ``create_agent`` agent inside its model's context window with a ContextManager per thread.

    Args:
        manager: The manager of a single conversation (one thread).
        manager_factory: Builds the manager of a LangGraph ``thread_id``.
        manager_options: Keywords for the managers the middleware builds itself (neither of the above given):
            ``store``, ``archive``, ``policy``, … The window comes from the chat model's profile unless
            ``max_context_tokens`` is among them.
        mode: ``"before_model"`` persists the view in the agent state; ``"wrap_model_call"`` sends it per request
            and leaves the state whole.
        max_threads: Managers kept at most (least recently used first out; one the middleware built is closed as it
            goes, and :meth:`close` closes the rest).
        retrieval_tools: Give the agent the retrieval tools (``tools``); without them, notes on cut outputs say
            what was cut without naming a tool.
        compact_tool: Give the agent ``compact_context`` too (it compacts its own context, as ``/compact``).
        max_retries: Overflow retries per model call.
        strict: Raise when preparing the view fails instead of sending the smallest valid view.
    """

    def __init__(self, manager: ContextManager | None = None, *,
                 manager_factory: Callable[[str], ContextManager] | None = None,
                 manager_options: Mapping[str, Any] | None = None, mode: Mode = "before_model",
                 max_threads: int = DEFAULT_MAX_THREADS, retrieval_tools: bool = True,
                 max_retries: int = DEFAULT_MAX_RETRIES, strict: bool = False, compact_tool: bool = False) -> None:
        super().__init__()
        if manager is not None and manager_factory is not None:
            raise ConfigError("pass at most one of manager= and manager_factory=", field="ContextfoldMiddleware")
        if mode not in _MODES:
            raise ConfigError(f"must be one of {list(_MODES)}, got {mode!r}", field="ContextfoldMiddleware.mode")
        if isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1:
            raise ConfigError(f"must be a positive integer, got {max_threads!r}",
                              field="ContextfoldMiddleware.max_threads")
        self.mode: Mode = mode
        self.max_retries = max_retries
        self.strict = strict
        self.max_threads = max_threads
        self._manager = manager
        self._factory = manager_factory
        self._options = dict(manager_options or {})
        self._managers: OrderedDict[str, ContextManager] = OrderedDict()
        self._built: set[int] = set()  # ids of the managers in _managers that the middleware built itself
        self._lock = threading.Lock()
        self.updates = 0  # state rewrites returned from before_model
        self._told_subgraph: weakref.WeakSet[ContextManager] = weakref.WeakSet()  # managers told the parent grows
        self._run_inputs: OrderedDict[str, list[str]] = OrderedDict()  # per subgraph run: the ids it began with
        self._steps: OrderedDict[str, _Step] = OrderedDict()  # per step of a parent: its runs of the agent
        self.compact_tool = compact_tool
        self.tools: list[BaseTool] = self._retrieval_tools(retrieval_tools, compact_tool)

    # -- managers -------------------------------------------------------------------------------------------------
    def conversation_manager(self, thread_id: str = DEFAULT_THREAD) -> ContextManager:
        """The manager of ``thread_id`` (built on first use; needs a factory or a single manager)."""
        cm = self._resolve(thread_id, None)
        if cm is None:
            raise ConfigError(f"thread {thread_id!r} has no manager yet: the middleware builds it at the first "
                              "model call (it needs the chat model's profile)", field="thread_id")
        return cm

    def _resolve(self, thread: str, model: Any) -> ContextManager | None:
        """The manager of ``thread``; None when it must be built from a model that is not known yet."""
        evicted: list[ContextManager] = []
        with self._lock:
            if self._manager is not None:
                return self._manager
            cm = self._managers.get(thread)
            if cm is None:
                if self._factory is not None:
                    cm = self._factory(thread)
                elif model is None:
                    return None
                else:
                    cm = self._build(thread, model)
                    self._built.add(id(cm))
                self._managers[thread] = cm
                while len(self._managers) > self.max_threads:
                    _, old = self._managers.popitem(last=False)
                    if id(old) in self._built:
                        self._built.discard(id(old))
                        evicted.append(old)
            self._managers.move_to_end(thread)
        # A manager the middleware built is the middleware's to close: dropped unclosed, each kept its exporter
        # threads and stores open (issue 21 §5: threads 4 -> 44). Closed outside the lock (it archives and flushes);
        # one a factory made is the factory's. The thread's state rebuilds it if the thread comes back.
        for old in evicted:
            old.close()
        return cm

    def close(self) -> None:
        """Close the managers the middleware built (not a ``manager=`` or a factory's); idempotent."""
        with self._lock:
            built = [cm for cm in self._managers.values() if id(cm) in self._built]
            self._built.clear()
        for cm in built:
            cm.close()

    def _build(self, thread: str, model: Any) -> ContextManager:
        from ..manager import ContextManager

        options = dict(self._options)
        profile = getattr(model, "profile", None) or {}
        window = profile.get("max_input_tokens") if isinstance(profile, Mapping) else None
        name = str(getattr(model, "model_name", None) or getattr(model, "model", None) or "unknown")
        options.setdefault("model", name)
        if "max_context_tokens" not in options:
            if not window:
                raise ConfigError(f"the chat model {name!r} has no profile with max_input_tokens; pass "
                                  "manager_options={'max_context_tokens': ...}", field="ContextfoldMiddleware")
            options["max_context_tokens"] = int(window)
        options.setdefault("session_id", thread)
        return ContextManager(**options)

    # -- the view -------------------------------------------------------------------------------------------------
    def _view(self, cm: ContextManager, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """Feed what is new, prepare (compacting when due), and return the view as LangChain messages."""
        origins = self._feed(cm, messages)
        view: list[Message] = prepare_messages(cm, strict=self.strict, where="langchain middleware")
        return to_langchain(unpinned(cm, view), origins)

    @staticmethod
    def _feed(cm: ContextManager, messages: Sequence[BaseMessage]) -> Origins:
        """Add to ``cm`` what is new in ``messages`` (with the usage of the reply that answered its view)."""
        origins = cm.framework_history.slot(ORIGINS_SLOT, Origins)

        def record_usage(fresh: Sequence[BaseMessage]) -> None:
            # The first new AI message answered the request made with the view as it stands now.
            for message in fresh:
                if isinstance(message, AIMessage):
                    usage = message.usage_metadata
                    if usage and usage.get("input_tokens"):
                        record_usage_safely(cm, {"input_tokens": usage["input_tokens"],
                                         "output_tokens": usage.get("output_tokens", 0)})
                    return

        keys = _keys(cm)
        keys.keep_only(messages)
        reconcile(cm, SOURCE, list(messages), key=keys.key, convert=lambda fresh: from_langchain(fresh, origins),
                  before_add=record_usage, exchange=_exchange)
        return origins

    # -- before_agent / after_agent: the run's input, the final reply, a subgraph's parent ---------------------------
    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """As a subgraph, note the ids of the messages the run begins with (what its caller passed in)."""
        if self.mode == "before_model" and _in_subgraph():
            run = _subgraph_run()
            with self._lock:
                self._run_inputs[run] = [str(m.id) for m in _messages(state)]
                self._run_inputs.move_to_end(run)
                while len(self._run_inputs) > self.max_threads:
                    self._run_inputs.popitem(last=False)
                parent_step = _parent_step()
                self._steps.setdefault(parent_step, _Step()).runs += 1
                self._steps.move_to_end(parent_step)
                while len(self._steps) > self.max_threads:
                    self._steps.popitem(last=False)
        return None

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async :meth:`before_agent`."""
        return self.before_agent(state, runtime)

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Record the run's final reply in the manager (no model call follows it, so nothing else would).

        Without it ``cm.status()``, the archive and the report of a finished run missed the answer the user got. As
        a subgraph, the run's final messages also become the update that turns the parent's messages into the
        manager's view (see :mod:`._langgraph_parent`): LangGraph merges them into the parent's by id.
        """
        thread = _thread_id()
        with self._lock:
            given = self._run_inputs.pop(_subgraph_run(), None)
            step = self._steps.get(_parent_step())
        cm = self._resolve(thread, None)
        if cm is None:
            return None
        messages = _messages(state)
        with cm.framework_history.lock:
            origins = self._feed(cm, messages)
            if self.mode != "before_model" or not _in_subgraph():
                return None
            return self._hand_to_parent(cm, origins, messages, given, step)

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async :meth:`after_agent`."""
        return await asyncio.to_thread(self.after_agent, state, runtime)

    def _hand_to_parent(self, cm: ContextManager, origins: Origins, messages: list[BaseMessage],
                        given: list[str] | None, step: _Step | None) -> dict[str, Any] | None:
        """The final state that gives a subgraph's parent the manager's view; None to leave the state as it is.

        The view as it stands (no compaction here: the next run's first request compacts if it must). ``Overwrite``
        puts the removals in the final state itself, past the subgraph's own reducer, so the parent's reducer
        applies them. With other runs of the agent in the parent's step, see :class:`_Step`.
        """
        held = cm.framework_history.slot(HELD_SLOT, _Held)
        view = to_langchain(unpinned(cm, cm.messages()), origins)
        whole = len(view) == len(messages) and all(a is b for a, b in zip(view, messages, strict=True))
        given_ids = set(given) if given is not None else set()
        run_input = [m for m in messages if m.id in given_ids]
        with self._lock:  # the step's runs counted and its removals recorded at once (see _Step)
            alone = step is None or step.runs == 1
            removed_by_others = set() if step is None else set(step.removed)
            # Two graphs down, the graph between applies the removals and the one above keeps every message. A run
            # whose input was recorded in another process (resumed there after an interrupt) cannot tell the
            # parent's messages from its own: the parent keeps every message this once.
            update = None if whole or given is None or _graphs_between() else \
                parent_update(run_input, messages, view, held.ids if alone else frozenset())
            if update is not None and step is not None:
                step.removed.update(str(m.id) for m in update.messages if isinstance(m, RemoveMessage))
        if update is None:
            held.ids = frozenset(str(m.id) for m in messages)
            if not whole and _graphs_between():
                self._tell_parent_keeps_all(cm)
            final = messages
        else:
            for j, replacement in update.placed.items():
                origins.reidentify(view[j], replacement)
            held.ids = frozenset(str(m.id) for m in update.parent_after)
            # the next run's input, when the parent applied it
            rebase(cm, SOURCE, update.parent_after, _keys(cm).key, _exchange)
            self.updates += 1
            final = update.messages
        if any(m.id in removed_by_others for m in final):
            return {"messages": Overwrite([m for m in final if m.id not in removed_by_others])}
        return None if update is None else {"messages": Overwrite(update.messages)}

    # -- before_model: persist the view in the state --------------------------------------------------------------
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Replace the state's messages with the manager's view when it differs from them.

        Not in a subgraph: its final messages go back to the parent graph merged by id, which would keep every
        message the view dropped and append the summary at the end. There the view is sent per request only.
        """
        if self.mode != "before_model" or _in_subgraph():
            return None
        cm = self._resolve(_thread_id(), None)
        if cm is None:
            return None  # the first call of a thread: wrap_model_call builds the manager from the model
        messages = _messages(state)
        with cm.framework_history.lock:
            view = self._view(cm, messages)
            if len(view) == len(messages) and all(a is b for a, b in zip(view, messages, strict=True)):
                return None
            rebase(cm, SOURCE, view, _keys(cm).key, _exchange)
            self.updates += 1
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *view]}

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async :meth:`before_model`; compaction (maybe an LLM summary) runs off the event loop."""
        if self.mode != "before_model" or _in_subgraph():
            return None
        return await asyncio.to_thread(self.before_model, state, runtime)

    # -- wrap_model_call: the view per request, and overflow recovery ---------------------------------------------
    def _tell_parent_keeps_all(self, cm: ContextManager) -> None:
        """Warn once per manager that a subgraph's view cannot reach the graph above, which keeps every message.

        Only two or more graphs down (see :func:`_graphs_between`): the graph between applies the removals itself.
        """
        with self._lock:  # (two runs of one manager at once: one warns)
            if cm in self._told_subgraph:
                return
            self._told_subgraph.add(cm)
        cm.tracer.emit(CompactWarning(
            session_id=cm.session_id, code=SUBGRAPH_STATE_CODE,
            message=NESTED_REASON))

    def _request_with_view(self, cm: ContextManager, request: ModelRequest) -> ModelRequest:
        names = {getattr(t, "name", None) or (t.get("name") if isinstance(t, Mapping) else None)
                 for t in request.tools}
        tools, response_format = request_extras(request)
        with cm.framework_history.lock:
            offer(cm, set(TOOL_NAMES[:2]) <= names, names)
            cm.set_request_extras(tools=tools, response_format=response_format)  # counted with the view
            system = request.system_message
            if system is not None and system.text:
                pin_head(cm, SYSTEM_PROMPT_ID, system.text)
            extra = _provider_settings(cm, request)  # before the view: it tells the manager who compacts
            view: list[Any] = self._view(cm, _live(request.messages))
            status = cm.status_message()  # the budget line, when on: this request only, never the agent state
            if status is not None:
                view = [*view, HumanMessage(content=status.text)]
        if extra:
            return request.override(messages=view, model_settings={**request.model_settings, **extra})
        return request.override(messages=view)

    def _manager_for(self, request: ModelRequest) -> ContextManager:
        cm = self._resolve(_thread_id(), request.model)
        assert cm is not None  # a model is given
        return cm

    def wrap_model_call(self, request: ModelRequest,
                        handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        """Send the manager's view; recover from a context-length error within the call."""
        cm = self._manager_for(request)
        recovery = OverflowRecovery(cm, self.max_retries, 0)
        while True:
            try:
                return _observed(cm, handler(self._request_with_view(cm, request)))
            except Exception as exc:
                info = _overflow(exc)
                if info is None:
                    raise
                recovery.shrink(info, exc)

    async def awrap_model_call(self, request: ModelRequest,
                               handler: Callable[[ModelRequest], Awaitable[ModelResponse]]) -> Any:
        """Async :meth:`wrap_model_call`; compaction runs off the event loop."""
        cm = await asyncio.to_thread(self._manager_for, request)
        recovery = OverflowRecovery(cm, self.max_retries, 0)
        while True:
            try:
                return _observed(cm, await handler(await asyncio.to_thread(self._request_with_view, cm, request)))
            except Exception as exc:
                info = _overflow(exc)
                if info is None:
                    raise
                await asyncio.to_thread(recovery.shrink, info, exc)

    # -- the retrieval tools --------------------------------------------------------------------------------------
    def _retrieval_tools(self, retrieval: bool, compact: bool) -> list[BaseTool]:
        tools: list[BaseTool] = []
        for spec in tool_specs(compact=compact):
            if not retrieval and spec.name in TOOL_NAMES:
                continue
            def run(_name: str = spec.name, **arguments: Any) -> str:
                cm = self._resolve(_thread_id(), None)
                if cm is None:
                    return f"error: {_name} has nothing to read yet in this conversation"
                return answer(cm, _name, arguments)

            tools.append(StructuredTool.from_function(func=run, name=spec.name, description=spec.description,
                                                      args_schema=spec.parameters))
        return tools


def _provider_api(model: Any) -> str:
    """The provider API a LangChain chat model calls: ``openai_responses`` for a ChatOpenAI on Responses."""
    responses = getattr(model, "use_responses_api", None) is True or getattr(model, "output_version", None) == \
        "responses/v1"
    return "openai_responses" if type(model).__name__ == "ChatOpenAI" and responses else type(model).__name__


def _provider_settings(cm: ContextManager, request: ModelRequest) -> dict[str, Any]:
    """The model settings that ask the provider to manage the context, when ``Policy.compactor`` says so."""
    settings = cm.provider_context.settings(_provider_api(request.model))
    if settings is None or "context_management" in request.model_settings:
        return {}
    return {"context_management": settings.params["context_management"]}


def _observed(cm: ContextManager, response: Any) -> Any:
    """``response``, after telling the manager what the provider compacted for it (its compaction blocks)."""
    settings = cm.provider_context.engaged
    if settings is None:
        return response
    output: list[dict[str, Any]] = []
    tokens = 0
    for message in getattr(response, "result", None) or ():
        content = getattr(message, "content", None)
        output += [dict(b) for b in content if isinstance(b, Mapping) and b.get("type") == "compaction"] \
            if isinstance(content, list) else []
        usage = getattr(message, "usage_metadata", None) or {}
        tokens = usage.get("input_tokens", tokens) if isinstance(usage, Mapping) else tokens
    cm.provider_context.observe(settings.api, {"output": output, "usage": {"input_tokens": tokens}})
    return response
