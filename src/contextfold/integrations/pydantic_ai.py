"""pydantic-ai integration: a history processor that keeps an ``Agent`` inside its model's context window.

::

    cm = ContextManager(model="gpt-4o", store="memory")
    processor = ContextfoldHistoryProcessor(cm)
    agent = Agent(model, tools=[...], capabilities=[processor.capability()])   # pydantic-ai 2.x
    agent = Agent(model, tools=[...], history_processors=[processor])           # pydantic-ai 1.x

The capability also gives the agent ``tool_output_cache``, ``tool_output_cache_grep`` and ``history_search`` (a
toolset) and recovers from a context-length error within the run (``on_model_request_error``: compact, retry at
most 3 times, stall guard, circuit breaker).

pydantic-ai calls the processor before every model request with the run's whole message history and keeps what
it returns as the history, so the compaction persists for the rest of the run (and in ``result.all_messages()``).
Each request part (system prompt, user prompt, tool return, retry feedback) becomes one Message and each
``ModelResponse`` one assistant Message; what the manager leaves unchanged goes back as the very pydantic-ai
object it came from. Parts that carry no conversation (instruction and tool-availability deltas) ride along with
the request they belong to. Needs ``contextfold[pydantic-ai]``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, InvalidHistory, MissingExtra
from ..manager.reconcile import content_key, rebase, reconcile
from ..media.budget import WIRE_BYTES_KEY
from ..messages import DocumentPart, ImagePart, Message, Part, TextPart, ThinkingPart, ToolCall, UnknownPart
from ..recovery import DEFAULT_MAX_RETRIES
from ._calls import record_usage_safely
from ._degrade import prepare_messages

try:
    from pydantic_ai import RunContext
    from pydantic_ai import messages as pm
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtra("the pydantic-ai history processor", "pydantic-ai", module="pydantic_ai") from exc

if TYPE_CHECKING:
    from ..manager import ContextManager

__all__ = ["ContextfoldHistoryProcessor", "Origins", "from_pydantic_ai", "to_pydantic_ai"]

# The format name recorded on parts contextfold does not model, so they are counted and go back unchanged.
FORMAT = "pydantic_ai"
# The run history's name in the manager's record, and where the pydantic-ai objects behind the view are kept.
SOURCE = "pydantic_ai"
ORIGINS_SLOT = "pydantic_ai:origins"

_Key = tuple[str, str]  # (message key, fingerprint): identifies one Message as the manager holds it


class Origins:
    """The pydantic-ai objects behind the manager's Messages, so unchanged ones go back as themselves."""

    def __init__(self) -> None:
        self.parts: dict[str, tuple[Any, str]] = {}  # message key -> (request part or response, its fingerprint)
        self.request_of: dict[str, pm.ModelRequest] = {}  # message key -> the request its part belongs to
        self.requests: dict[tuple[_Key, ...], pm.ModelRequest] = {}  # a group of request Messages -> the request
        self.responses: dict[_Key, pm.ModelResponse] = {}
        self.passthrough: dict[str, list[Any]] = {}  # message key -> non-conversation parts of its request
        self.serials = itertools.count()

    def prune(self, keys: Iterable[str]) -> None:
        """Forget the objects behind Messages that left the view (the archive keeps their content)."""
        live = set(keys)
        self.parts = {k: v for k, v in self.parts.items() if k in live}
        self.request_of = {k: v for k, v in self.request_of.items() if k in live}
        self.passthrough = {k: v for k, v in self.passthrough.items() if k in live}
        self.requests = {g: r for g, r in self.requests.items() if all(k in live for k, _ in g)}
        self.responses = {g: r for g, r in self.responses.items() if g[0] in live}


def _user_content(content: Any) -> str | tuple[Part, ...]:
    if isinstance(content, str):
        return content
    parts: list[Part] = []
    for item in content:
        if isinstance(item, str):
            parts.append(TextPart(item))
        else:  # images and documents as such (counted as images, seen by media limits); audio, video: described
            parts.append(_media(item) or UnknownPart(data={"kind": type(item).__name__, "repr": repr(item)[:200]},
                                                     format=FORMAT))
    return tuple(parts)


def _media(item: Any) -> ImagePart | DocumentPart | None:
    """An image or document of a user prompt; its object goes back as it came (see ``_rebuild_request_part``)."""
    if isinstance(item, pm.BinaryContent):
        # The payload stays in pydantic-ai's object: the part holds what it takes on the wire (base64).
        extra = {WIRE_BYTES_KEY: 4 * math.ceil(len(item.data) / 3)}
        if item.is_image:
            return ImagePart(media_type=item.media_type, extra=extra)
        if item.is_document:
            return DocumentPart(media_type=item.media_type, extra=extra)
        return None
    if isinstance(item, pm.ImageUrl | pm.DocumentUrl):
        try:
            media_type: str | None = item.media_type
        except ValueError:  # (an extension pydantic-ai cannot name a type for)
            media_type = None
        kind = ImagePart if isinstance(item, pm.ImageUrl) else DocumentPart
        return kind(url=item.url, media_type=media_type)
    return None


def _tool_media(part: pm.ToolReturnPart) -> list[tuple[Any, ImagePart | DocumentPart]]:
    """The images and documents a tool returned, each with its part (audio and video are left to the text)."""
    return [(item, found) for item in part.files if (found := _media(item)) is not None]


def _text_field(value: Any, index: int, field: str, *, nonempty: bool = False) -> str:
    """``value`` when it is a string (a non-empty one with ``nonempty``); pydantic-ai's dataclasses take anything."""
    if not isinstance(value, str) or (nonempty and not value):
        wanted = "a non-empty string" if nonempty else "a string"
        raise InvalidHistory(f"expected {wanted}, got {type(value).__name__} {str(value)[:40]!r}", index=index,
                             field=field)
    return value


def _request_part(part: Any, key: str, index: int, k: int = 0) -> Message | None:
    meta = {"id": key}
    if isinstance(part, pm.SystemPromptPart):
        return Message("system", _text_field(part.content, index, f"parts[{k}].content"), meta=meta)
    if isinstance(part, pm.UserPromptPart):
        return Message("user", _user_content(part.content), meta=meta)
    if isinstance(part, pm.ToolReturnPart):
        call_id = _text_field(part.tool_call_id, index, f"parts[{k}].tool_call_id", nonempty=True)
        name = _text_field(part.tool_name, index, f"parts[{k}].tool_name", nonempty=True)
        # A tool's screenshots and documents are images to the manager too (counted, seen by the media limits);
        # pydantic-ai sends them beside the return's text.
        media = tuple(found for _, found in _tool_media(part))
        content: str | tuple[Part, ...] = (TextPart(part.model_response_str()), *media) if media \
            else part.model_response_str()
        return Message("tool", content, tool_call_id=call_id, name=name, meta=meta)
    if isinstance(part, pm.RetryFeedbackPart):
        return Message("user", part.model_response(), meta=meta)
    if isinstance(part, pm.RetryPromptPart):  # legacy histories
        if part.tool_name and part.tool_call_id:
            return Message("tool", part.model_response(), tool_call_id=part.tool_call_id, name=part.tool_name,
                           meta=meta)
        return Message("user", part.model_response(), meta=meta)
    return None


def _response(message: pm.ModelResponse, key: str, index: int = 0) -> Message:
    content: list[Part] = []
    calls: list[ToolCall] = []
    for k, part in enumerate(message.parts):
        if isinstance(part, pm.TextPart):
            content.append(TextPart(_text_field(part.content, index, f"parts[{k}].content")))
        elif isinstance(part, pm.ThinkingPart):
            content.append(ThinkingPart(_text_field(part.content, index, f"parts[{k}].content"),
                                        signature=part.signature))
        elif isinstance(part, pm.ToolCallPart):
            call_id = _text_field(part.tool_call_id, index, f"parts[{k}].tool_call_id", nonempty=True)
            name = _text_field(part.tool_name, index, f"parts[{k}].tool_name", nonempty=True)
            try:
                arguments = part.args_as_json_str()
            except (TypeError, ValueError) as exc:  # args neither a JSON string nor a JSON-able mapping
                raise InvalidHistory(f"tool call {call_id!r}: args cannot be read as JSON ({exc})", index=index,
                                     field=f"parts[{k}].args") from None
            calls.append(ToolCall(call_id, name, arguments))
        elif isinstance(part, pm.CompactionPart) and part.provider_name is not None:
            # A provider's compaction: a boundary of the view (contextfold.provider_context), counted as its summary.
            content.append(_compaction(part))
        else:  # provider-executed tools, files: kept inside the turn, counted by their description
            content.append(UnknownPart(data={"kind": type(part).__name__, "repr": repr(part)[:200]}, format=FORMAT))
    text_only = all(isinstance(p, TextPart) for p in content)
    body: str | tuple[Part, ...] = "".join(p.text for p in content if isinstance(p, TextPart)) if text_only \
        else tuple(content)
    return Message("assistant", body, tuple(calls), meta={"id": key})


def _compaction(part: pm.CompactionPart) -> UnknownPart:
    """A provider's compaction part in the shape of that provider's item (what the boundary rules read)."""
    details = dict(part.provider_details or {})
    if part.provider_name == "anthropic":
        return UnknownPart(data={"type": "compaction", "content": part.content, **details}, format="anthropic")
    return UnknownPart(data={"type": "compaction", **details}, format="openai_responses")


def from_pydantic_ai(messages: Sequence[pm.ModelMessage], origins: Origins | None = None) -> list[Message]:
    """pydantic-ai messages as Messages (one per request part, one per response)."""
    origins = origins if origins is not None else Origins()
    out: list[Message] = []
    for index, message in enumerate(messages):
        serial = next(origins.serials)
        if isinstance(message, pm.ModelResponse):
            key = f"pai:{serial}"
            converted = _response(message, key, index)
            origins.parts[key] = (message, converted.fingerprint())
            origins.responses[(key, converted.fingerprint())] = message
            out.append(converted)
            continue
        if not isinstance(message, pm.ModelRequest):
            raise InvalidHistory(f"expected a pydantic-ai ModelRequest or ModelResponse, got "
                                 f"{type(message).__name__}", index=index)
        group: list[_Key] = []
        extra: list[Any] = []
        for k, part in enumerate(message.parts):
            key = f"pai:{serial}:{k}"
            converted_part = _request_part(part, key, index, k)
            if converted_part is None:
                extra.append(part)
                continue
            origins.parts[key] = (part, converted_part.fingerprint())
            origins.request_of[key] = message
            group.append((key, converted_part.fingerprint()))
            out.append(converted_part)
        if group:
            origins.requests[tuple(group)] = message
            origins.passthrough[group[0][0]] = extra
    return out


def _keyed(message: Message, seen: dict[str, int]) -> _Key:
    fingerprint = message.fingerprint()
    key = message.meta.get("id")
    if not isinstance(key, str):
        seen[fingerprint] = seen.get(fingerprint, 0) + 1
        key = f"fp:{fingerprint}:{seen[fingerprint]}"
    return key, fingerprint


def _serial(key: str) -> str | None:
    return key.split(":")[1] if key.startswith("pai:") else None


def _rebuild_request_part(message: Message, origin: Any) -> Any:
    text = message.text
    if isinstance(origin, pm.ToolReturnPart):
        files = _tool_media(origin)
        if files and not isinstance(message.content, str) and len(message.content) == 1 + len(files):
            # The screenshots that stayed go back as pydantic-ai's objects (one taken out for a media limit is a
            # text now, in the return's text); a masked return is its placeholder text alone.
            kept = [item for part, (item, _) in zip(message.content[1:], files, strict=True)
                    if isinstance(part, ImagePart | DocumentPart)]
            return dataclasses.replace(origin, content=[text, *kept] if kept else text)
        return dataclasses.replace(origin, content=text)
    if isinstance(origin, pm.UserPromptPart) and not isinstance(origin.content, str) \
            and not isinstance(message.content, str) and len(message.content) == len(origin.content):
        # Part for part (an image taken out for a media limit is a text in its place): the images, documents and
        # audio that stayed go back as the framework's own objects.
        return dataclasses.replace(origin, content=[
            part.text if isinstance(part, TextPart) else item
            for part, item in zip(message.content, origin.content, strict=True)])
    if isinstance(origin, pm.SystemPromptPart | pm.UserPromptPart):
        return dataclasses.replace(origin, content=text)
    if message.role == "tool":
        return pm.ToolReturnPart(tool_name=message.name or "", content=text, tool_call_id=message.tool_call_id or "")
    if message.role in ("system", "developer"):
        return pm.SystemPromptPart(text)
    return pm.UserPromptPart(text)


def _rebuild_response(message: Message, origin: Any) -> pm.ModelResponse:
    calls = {p.tool_call_id: p for p in getattr(origin, "parts", ()) if isinstance(p, pm.ToolCallPart)}
    parts: list[Any] = []
    original_text = "".join(p.content for p in getattr(origin, "parts", ()) if isinstance(p, pm.TextPart))
    for part in getattr(origin, "parts", ()):
        if isinstance(part, pm.TextPart):
            if message.text == original_text:
                parts.append(part)
        elif not isinstance(part, pm.ToolCallPart):
            parts.append(part)
    if message.text and message.text != original_text:
        # An edited text must not carry the provider's item id, or the Responses API would use its stored copy.
        parts.insert(0, pm.TextPart(message.text))
    for call in message.tool_calls:
        part = calls.get(call.id)
        if part is None or part.args_as_json_str() != call.arguments:
            part = pm.ToolCallPart(call.name, call.arguments, call.id)
        parts.append(part)
    if isinstance(origin, pm.ModelResponse):
        return dataclasses.replace(origin, parts=parts)
    return pm.ModelResponse(parts=parts)


def to_pydantic_ai(messages: Sequence[Message], origins: Origins) -> list[pm.ModelMessage]:
    """The manager's view as pydantic-ai messages, reusing the originals of unchanged Messages."""
    out: list[pm.ModelMessage] = []
    keys: list[str] = []
    seen: dict[str, int] = {}
    group: list[tuple[Message, _Key]] = []

    def close_group() -> None:
        if group:
            out.append(_request(group, origins))
            group.clear()

    for message in messages:
        keyed = _keyed(message, seen)
        keys.append(keyed[0])
        if message.role == "assistant":
            close_group()
            response = origins.responses.get(keyed)
            if response is None:
                origin = origins.parts.get(keyed[0])
                response = _rebuild_response(message, origin[0] if origin is not None else None)
                origins.responses[keyed] = response
            out.append(response)
            continue
        serial = _serial(keyed[0])
        # A new request starts where another original request's parts start; parts the manager made join the
        # request they sit in, so a synthetic tool result stays with the results of the same turn.
        if group and serial is not None and serial != _group_serial(group):
            close_group()
        group.append((message, keyed))
    close_group()
    origins.prune(keys)
    return out


def _group_serial(group: Sequence[tuple[Message, _Key]]) -> str | None:
    return next((s for _, (key, _) in group if (s := _serial(key)) is not None), None)


def _request(group: Sequence[tuple[Message, _Key]], origins: Origins) -> pm.ModelRequest:
    signature = tuple(keyed for _, keyed in group)
    cached = origins.requests.get(signature)
    if cached is not None:
        return cached
    parts: list[Any] = []
    template: pm.ModelRequest | None = None
    for message, (key, fingerprint) in group:
        parts.extend(origins.passthrough.get(key, ()))
        origin = origins.parts.get(key)
        if origin is not None and origin[1] == fingerprint:
            part = origin[0]
        else:
            part = _rebuild_request_part(message, origin[0] if origin is not None else None)
            origins.parts[key] = (part, fingerprint)
        parts.append(part)
        template = template or origins.request_of.get(key)
    # The original request keeps its instructions, run id and timestamp; pydantic-ai reads the instructions of
    # the latest request.
    request = dataclasses.replace(template, parts=parts) if template is not None else pm.ModelRequest(parts=parts)
    origins.requests[signature] = request
    return request


def _part_key(part: Any) -> list[Any]:
    return [type(part).__name__, getattr(part, "content", None), getattr(part, "tool_call_id", None),
            getattr(part, "tool_name", None), getattr(part, "args", None)]


def _key(message: pm.ModelMessage) -> str:
    """Identity of a pydantic-ai message by its parts (timestamps and run ids left out: a rebuilt copy is the same)."""
    return content_key([type(message).__name__, [_part_key(p) for p in message.parts]])


class ContextfoldHistoryProcessor:
    """A pydantic-ai history processor backed by a ContextManager (one manager per conversation).

    Only the messages the manager has not seen reach it; the returned history (the manager's view) becomes the
    run's history. The record of what was seen, and the pydantic-ai objects behind the view, live with the
    manager: a processor built anew for every run never adds a message twice. A history that does not extend the
    one fed before (another conversation, an edited history) rebuilds the view from it.

    Args:
        manager: The manager of this conversation.
        compact_tool: The capability gives the agent ``compact_context`` too (it compacts its own context).
        retrieval_tools: The capability gives the agent the retrieval tools; without them, notes on cut outputs
            say what was cut without naming a tool.
        max_retries: Overflow retries per model request (through the capability).
        strict: Raise when preparing the view fails instead of sending the smallest valid view.
    """

    def __init__(self, manager: ContextManager, *, retrieval_tools: bool = True, compact_tool: bool = False,
                 max_retries: int = DEFAULT_MAX_RETRIES, strict: bool = False) -> None:
        self.manager = manager
        self.retrieval_tools = retrieval_tools
        self.compact_tool = compact_tool
        self.max_retries = max_retries
        self.strict = strict
        self.rewrites = 0  # calls whose returned history differed from the one received

    @property
    def rebuilds(self) -> int:
        """How often a history did not extend the one the manager was fed and the view was rebuilt."""
        return self.manager.framework_history.rebuilds

    def capability(self) -> Any:
        """The processor as a pydantic-ai 2.x capability: history, retrieval toolset and overflow recovery."""
        try:
            from ._pydantic_ai_capability import ContextfoldCapability
        except ImportError as exc:
            raise ConfigError("pydantic-ai 1.x has no capabilities: pass the processor itself, "
                              "Agent(history_processors=[processor])", field="capability") from exc
        return ContextfoldCapability(self)

    def _record_usage(self, fresh: Sequence[pm.ModelMessage]) -> None:
        # The first new response answered the request made with the view as it stands now.
        for message in fresh:
            if isinstance(message, pm.ModelResponse):
                if message.usage.input_tokens:
                    record_usage_safely(self.manager, {"input_tokens": message.usage.input_tokens,
                                                       "output_tokens": message.usage.output_tokens})
                return

    def process(self, messages: list[pm.ModelMessage]) -> list[pm.ModelMessage]:
        """Feed the messages the manager has not seen, prepare (compacting when due), and return the view."""
        cm = self.manager
        origins = cm.framework_history.slot(ORIGINS_SLOT, Origins)
        with cm.framework_history.lock:
            reconcile(cm, SOURCE, messages, key=_key, convert=lambda fresh: from_pydantic_ai(fresh, origins),
                      before_add=self._record_usage)
            view = self.view()
            if len(view) != len(messages) or any(a is not b for a, b in zip(view, messages, strict=True)):
                self.rewrites += 1
            return view

    def record(self, messages: list[pm.ModelMessage]) -> None:
        """Feed the messages the manager has not seen without preparing a view (the run's final reply)."""
        cm = self.manager
        origins = cm.framework_history.slot(ORIGINS_SLOT, Origins)
        with cm.framework_history.lock:
            reconcile(cm, SOURCE, messages, key=_key, convert=lambda fresh: from_pydantic_ai(fresh, origins),
                      before_add=self._record_usage)

    def view(self) -> list[pm.ModelMessage]:
        """The manager's view as pydantic-ai messages (compacting when due); it is the run's history from now."""
        cm = self.manager
        origins = cm.framework_history.slot(ORIGINS_SLOT, Origins)
        with cm.framework_history.lock:
            view = to_pydantic_ai(prepare_messages(cm, strict=self.strict, where="pydantic-ai processor"), origins)
            rebase(cm, SOURCE, view, _key)
            return view

    async def __call__(self, ctx: RunContext[Any], messages: list[pm.ModelMessage]) -> list[pm.ModelMessage]:
        """The processor as pydantic-ai calls it (with the run's context); compaction runs off the event loop."""
        return await asyncio.to_thread(self.process, messages)
