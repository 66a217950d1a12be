"""LangChain v1 integration: an ``AgentMiddleware`` for ``create_agent`` that keeps the agent inside its window.

Two modes, as configured:

- ``"before_model"`` (the default) persists: before each model call the agent state's messages are replaced with
  the manager's view (``RemoveMessage(REMOVE_ALL_MESSAGES)`` followed by the view), so the state and any
  checkpoint hold the compacted history, as LangChain's own ``SummarizationMiddleware`` does.
- ``"wrap_model_call"`` works per request: the state keeps every message and only the request sent to the model
  carries the view.

::

    cm = ContextManager(model="gpt-4o", store="memory")
    agent = create_agent(model, tools=tools, middleware=[ContextfoldMiddleware(cm)])

One manager per conversation: pass ``manager_factory`` (called with the LangGraph ``thread_id``) when one agent
serves many threads. The usage a reply reports grounds the manager's next decision (it includes the system prompt
and the tool schemas, which the middleware does not see in ``before_model``). Needs ``contextfold[langchain]``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from ..errors import ConfigError, MissingExtra
from ._langchain_convert import Origins, from_langchain, to_langchain
from ._mirror import HistoryMirror

try:
    from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
    from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage
    from langgraph.config import get_config
    from langgraph.graph.message import REMOVE_ALL_MESSAGES
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("the LangChain middleware", "langchain", module="langchain") from exc

if TYPE_CHECKING:
    from ..manager import ContextManager
    from ..messages import Message

__all__ = ["ContextfoldMiddleware", "Mode"]

Mode = Literal["before_model", "wrap_model_call"]
_MODES: tuple[str, ...] = ("before_model", "wrap_model_call")
# The thread key used when the agent runs without a LangGraph thread id (no checkpointer configured).
DEFAULT_THREAD = "default"


class _Conversation:
    """One thread's manager, the state it has been fed, and where each of its messages came from."""

    def __init__(self, manager: ContextManager) -> None:
        self.manager = manager
        self.mirror: HistoryMirror[BaseMessage] = HistoryMirror(manager)
        self.origins = Origins()
        self.lock = threading.Lock()

    def _convert(self, messages: Sequence[BaseMessage]) -> list[Message]:
        return from_langchain(messages, self.origins, start=len(self.mirror.known))

    def _record_usage(self, fresh: Sequence[BaseMessage]) -> None:
        # The first new AI message answered the request made with the view as it stands now.
        for message in fresh:
            if isinstance(message, AIMessage):
                usage = message.usage_metadata
                if usage and usage.get("input_tokens"):
                    self.manager.record_usage({"input_tokens": usage["input_tokens"],
                                               "output_tokens": usage.get("output_tokens", 0)})
                return

    def view(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """Feed the new messages, prepare (compacting when due), and return the view as LangChain messages."""
        self.mirror.sync(messages, self._convert, before_add=self._record_usage)
        return to_langchain(self.manager.prepare_messages(), self.origins)


class ContextfoldMiddleware(AgentMiddleware):
    """Keeps a ``create_agent`` agent inside its model's context window with a ContextManager.

    Args:
        manager: The manager of the conversation (every thread shares it; see ``manager_factory``).
        manager_factory: Builds a manager for a LangGraph ``thread_id``, for agents serving many threads.
        mode: ``"before_model"`` persists the view in the agent state; ``"wrap_model_call"`` sends it per request
            and leaves the state whole.
    """

    def __init__(self, manager: ContextManager | None = None, *,
                 manager_factory: Callable[[str], ContextManager] | None = None,
                 mode: Mode = "before_model") -> None:
        super().__init__()
        if (manager is None) == (manager_factory is None):
            raise ConfigError("pass exactly one of manager= or manager_factory=", field="ContextfoldMiddleware")
        if mode not in _MODES:
            raise ConfigError(f"must be one of {list(_MODES)}, got {mode!r}", field="ContextfoldMiddleware.mode")
        self.mode: Mode = mode
        self._manager = manager
        self._factory = manager_factory
        self._conversations: dict[str, _Conversation] = {}
        self._lock = threading.Lock()
        self.updates = 0  # state rewrites returned from before_model

    def conversation_manager(self, thread_id: str = DEFAULT_THREAD) -> ContextManager:
        """The manager of ``thread_id`` (created by the factory on first use)."""
        return self._conversation(thread_id).manager

    def _conversation(self, thread_id: str | None = None) -> _Conversation:
        key = thread_id if thread_id is not None else _thread_id()
        with self._lock:
            conversation = self._conversations.get(key)
            if conversation is None:
                if self._manager is not None:
                    # One shared manager: every thread feeds the same mirror (a different thread rebuilds it).
                    conversation = next(iter(self._conversations.values()), None) or _Conversation(self._manager)
                else:
                    assert self._factory is not None
                    conversation = _Conversation(self._factory(key))
                self._conversations[key] = conversation
            return conversation

    # -- before_model: persist the view in the state --------------------------------------------------------------
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Replace the state's messages with the manager's view when it differs from them."""
        if self.mode != "before_model":
            return None
        messages: list[BaseMessage] = list(state["messages"])
        conversation = self._conversation()
        with conversation.lock:
            view = conversation.view(messages)
            if len(view) == len(messages) and all(a is b for a, b in zip(view, messages, strict=True)):
                return None
            conversation.mirror.rebase(view)
            self.updates += 1
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *view]}

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async :meth:`before_model`; compaction (maybe an LLM summary) runs off the event loop."""
        if self.mode != "before_model":
            return None
        return await asyncio.to_thread(self.before_model, state, runtime)

    # -- wrap_model_call: the view per request --------------------------------------------------------------------
    def _request_with_view(self, request: ModelRequest) -> ModelRequest:
        conversation = self._conversation()
        with conversation.lock:
            view = conversation.view(list(request.messages))
        return request.override(messages=cast("list[Any]", view))

    def wrap_model_call(self, request: ModelRequest,
                        handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        """Send the manager's view instead of the whole history (``wrap_model_call`` mode)."""
        if self.mode != "wrap_model_call":
            return handler(request)
        return handler(self._request_with_view(request))

    async def awrap_model_call(self, request: ModelRequest,
                               handler: Callable[[ModelRequest], Awaitable[ModelResponse]]) -> Any:
        """Async :meth:`wrap_model_call`."""
        if self.mode != "wrap_model_call":
            return await handler(request)
        return await handler(await asyncio.to_thread(self._request_with_view, request))


def _thread_id() -> str:
    try:
        config = get_config()
    except RuntimeError:  # called outside a LangGraph run
        return DEFAULT_THREAD
    thread = (config.get("configurable") or {}).get("thread_id")
    return str(thread) if thread is not None else DEFAULT_THREAD
