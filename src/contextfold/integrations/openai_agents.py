"""OpenAI Agents SDK integration: a ``call_model_input_filter`` and a compacting ``Session``.

The filter runs right before every model call of ``Runner.run``: it feeds the manager the items it has not seen
yet and sends the manager's view instead of the whole history, so a long tool loop stays inside the window::

    cm = ContextManager(model="gpt-4o", store="memory")
    result = await Runner.run(agent, "fix the build", max_turns=100,
                              run_config=RunConfig(call_model_input_filter=ContextfoldInputFilter(cm)))

The SDK keeps its own full history (``result.to_input_list()``); the filter never changes it. To keep the compacted
history between runs, use :class:`ContextfoldSession`, which persists the manager's view in any SDK ``Session``
(``SQLiteSession``, Redis, …). Needs ``contextfold[openai-agents]``.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from ..errors import MissingExtra
from ..formats import openai_responses
from ..normalize import remove_messages
from ._mirror import HistoryMirror

try:
    from agents.lifecycle import RunHooks
    from agents.run_config import CallModelData, ModelInputData
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("the OpenAI Agents SDK integration", "openai-agents", module="agents") from exc

if TYPE_CHECKING:
    from agents.memory import Session

    from ..manager import ContextManager
    from ..messages import Message

__all__ = ["ContextfoldInputFilter", "ContextfoldSession", "UsageHooks"]

FORMAT = openai_responses.NAME


def _plain(item: Any) -> dict[str, Any]:
    """A Responses input item as a plain dict (the SDK's items are TypedDicts, but pydantic objects slip in)."""
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        dumped: dict[str, Any] = dump(exclude_unset=True)
        return dumped
    raise TypeError(f"expected a Responses input item (dict), got {type(item).__name__}")


def _decode(items: Sequence[Mapping[str, Any]]) -> list[Message]:
    return openai_responses.decode(items)


def _instructions_item(instructions: str) -> dict[str, Any]:
    return {"role": "system", "content": instructions}


class ContextfoldInputFilter:
    """A ``RunConfig.call_model_input_filter`` that sends the manager's view of the history to the model.

    The items it receives are a shallow copy of the SDK's stored history: it never changes them, and returns a new
    :class:`ModelInputData` with new items. Only the items added since the previous call reach the manager; a
    history that does not extend the previous one (a new run with other input) rebuilds the view from it.

    Args:
        manager: The manager of this agent's conversation.
        count_instructions: Count the agent's instructions against the window (they travel as a system item
            inside the manager and go back to their own field before the call).
    """

    def __init__(self, manager: ContextManager, *, count_instructions: bool = True) -> None:
        self.manager = manager
        self.count_instructions = count_instructions
        self._mirror: HistoryMirror[dict[str, Any]] = HistoryMirror(manager)
        self._lock = threading.Lock()
        self.calls = 0

    @property
    def rebuilds(self) -> int:
        """How often the SDK's history did not extend the previous one and the view was rebuilt."""
        return self._mirror.rebuilds

    def filter(self, data: CallModelData[Any]) -> ModelInputData:
        """The synchronous filter: sync the manager, prepare (compacting when due), return the view."""
        instructions = data.model_data.instructions
        head = [_instructions_item(instructions)] if self.count_instructions and instructions else []
        items = [*head, *(_plain(item) for item in data.model_data.input)]
        with self._lock:
            self.calls += 1
            self._mirror.sync(items, _decode)
            view = self.manager.prepare(FORMAT)
        # The view shares dicts with the manager's encoding cache; the SDK must get its own copies.
        sent = copy.deepcopy(view)
        if head and sent and sent[0] == head[0]:
            sent = sent[1:]
        return ModelInputData(input=sent, instructions=instructions)

    async def __call__(self, data: CallModelData[Any]) -> ModelInputData:
        """The filter as the SDK calls it; compaction (maybe an LLM summary) runs off the event loop."""
        return await asyncio.to_thread(self.filter, data)


class UsageHooks(RunHooks[Any]):
    """``RunHooks`` that ground the manager in the token counts the model reports after each call.

    Pass ``hooks=UsageHooks(cm)`` to ``Runner.run`` next to the filter: the reported input tokens include the
    instructions and tool schemas, so later decisions account for everything the request carried.
    """

    def __init__(self, manager: ContextManager) -> None:
        self.manager = manager

    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        """Record the usage of the call that just returned."""
        usage = getattr(response, "usage", None)
        tokens = getattr(usage, "input_tokens", 0) if usage is not None else 0
        if tokens:
            self.manager.record_usage({"input_tokens": tokens, "output_tokens": getattr(usage, "output_tokens", 0)})


class ContextfoldSession:
    """An SDK ``Session`` whose history is the manager's view, persisted compacted in an inner session.

    ``add_items`` feeds the manager (big tool outputs are truncated at once, the full text kept by ref) and
    compacts when the policy says so; ``get_items`` returns the view. The inner session, when given, always holds
    the view as the manager has it, so a process that reopens it resumes from the compacted history; the full
    record stays in the manager's archive and tool output cache.

    Args:
        manager: The manager of this conversation.
        inner: Where the compacted history is persisted (``SQLiteSession``, a Redis session, …); None keeps it in
            the manager only.
        session_id: Defaults to the inner session's id, else the manager's.
    """

    session_settings: Any = None

    def __init__(self, manager: ContextManager, inner: Session | None = None, *,
                 session_id: str | None = None) -> None:
        self.manager = manager
        self.inner = inner
        self.session_id: str = session_id or (inner.session_id if inner is not None else manager.session_id)
        self.session_settings = getattr(inner, "session_settings", None)
        self._persisted: list[dict[str, Any]] = []
        self._loaded = inner is None
        self._lock = asyncio.Lock()

    async def _load(self) -> None:
        """Resume from the inner session once, when the manager starts empty."""
        if self._loaded or self.inner is None:
            return
        self._loaded = True
        stored = [_plain(item) for item in await self.inner.get_items()]
        if stored and not self.manager.messages():
            await self.manager.aadd(stored, format=FORMAT)
        self._persisted = stored

    async def _persist(self, items: list[dict[str, Any]]) -> None:
        """Make the inner session hold ``items``: append when they extend what it holds, else rewrite it."""
        if self.inner is None or items == self._persisted:
            return
        done = len(self._persisted)
        if items[:done] == self._persisted:
            await self.inner.add_items(cast("list[Any]", copy.deepcopy(items[done:])))
        else:
            await self.inner.clear_session()
            if items:
                await self.inner.add_items(cast("list[Any]", copy.deepcopy(items)))
        self._persisted = copy.deepcopy(items)

    def _stored_items(self) -> list[dict[str, Any]]:
        return openai_responses.encode(self.manager.messages())

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The compacted history (the latest ``limit`` items when given)."""
        async with self._lock:
            await self._load()
            view: list[dict[str, Any]] = await self.manager.aprepare(FORMAT)
            await self._persist(view)
            items = copy.deepcopy(view)
        return items[-limit:] if limit else items

    async def add_items(self, items: list[Any]) -> None:
        """Feed new items to the manager and persist the view, compacted when the policy says so."""
        async with self._lock:
            await self._load()
            plain = [_plain(item) for item in items]
            if plain:
                await self.manager.aadd(plain, format=FORMAT)
            await self._persist(await self.manager.aprepare(FORMAT))

    async def pop_item(self) -> Any:
        """Remove and return the latest item; a tool result takes its call with it (no call is left unanswered)."""
        async with self._lock:
            await self._load()
            popped: list[dict[str, Any]] = []

            def drop_last(view: list[Message]) -> list[Message]:
                if not view:
                    return view
                last = view[-1]
                last_items = openai_responses.encode([last])
                popped.append(last_items[-1])
                if last.role == "tool":
                    # A result goes with its call: the history must stay valid for the next request.
                    return remove_messages(view, [len(view) - 1])
                # An assistant turn spans several items (reasoning, message, calls): keep all but the last.
                rest = openai_responses.decode(last_items[:-1]) if len(last_items) > 1 else []
                return [*view[:-1], *(m.with_meta(**dict(last.meta)) for m in rest)]

            self.manager.rewrite_view(drop_last, reason="pop_item")
            await self._persist(self._stored_items())
        return copy.deepcopy(popped[0]) if popped else None

    async def clear_session(self) -> None:
        """Forget the conversation (the manager archives the view first) and clear the inner session."""
        async with self._lock:
            self._loaded = True
            self.manager.rewrite_view(lambda _view: [], reason="clear_session")
            if self.inner is not None:
                await self.inner.clear_session()
            self._persisted = []
