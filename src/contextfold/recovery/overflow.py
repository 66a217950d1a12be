"""Recognise a provider's "the prompt is too long" error, and read the counts it carries.

Every provider words it differently, and the SDKs wrap it differently: openai and anthropic raise
``BadRequestError`` with the JSON body in ``.body``, litellm raises ``ContextWindowExceededError``, botocore keeps
the body in ``.response``, google-genai in ``.details``, and local servers (vLLM, llama.cpp, Ollama) answer with
their own wording behind an OpenAI-compatible client. :func:`parse_overflow` takes any of them (an exception, a
response body as a dict, JSON text or plain text) and answers an :class:`OverflowInfo` or None. No SDK is
imported: exceptions are read by their attributes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ContextOverflowError
from ._quoted import STRING_QUOTES, said_in, unquoted

__all__ = ["ECHOING_CODES", "MAX_ERROR_FIGURE", "OVERFLOW_CODES", "ErrorReading", "OverflowInfo", "parse_overflow",
           "read_error", "read_figure"]

# Error codes/types that mean "context window exceeded" whatever the message says (OpenAI, Azure, Groq, llama.cpp).
OVERFLOW_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error", "context_window_exceeded",
                            "model_context_window_exceeded"})
# OpenAI's codes of a request refused for one of its values, which the message then echoes (the client's text, a tool
# schema's words): an overflow wording in such an error is the client's, not the provider's verdict (real bodies:
# ``{"error": {"message": "Invalid schema for function 'f': In context=(...), '...' is not valid ...", "type":
# "invalid_request_error", "param": "tools[0].function.parameters", "code": "invalid_function_parameters"}}``).
# A provider refusing a request for its size says so by its own code (context_length_exceeded) or its wording.
ECHOING_CODES = frozenset({"invalid_value", "invalid_type", "invalid_function_parameters", "unsupported_value",
                           "unknown_parameter", "missing_required_parameter", "unsupported_parameter",
                           "invalid_prompt", "invalid_image", "invalid_image_url", "invalid_image_format"})
# litellm maps every provider's overflow to this class; matched by name so that litellm need not be importable.
_OVERFLOW_CLASS_NAMES = frozenset({"ContextWindowExceededError", "ContextOverflowError"})
# A rate limit ("Request too large ... tokens per min") talks about tokens too, but shrinking the prompt is not the
# cure: never read a 429 as an overflow.
_RATE_LIMIT_STATUS = 429
# What an error says, outside its quotes, of a value it refuses and echoes (OpenAI's "Invalid value: '...'. Supported
# values are: ...", "Invalid 'messages[1].content': '...' is not of type 'array'", a schema's "'...' is not valid
# under any of the given schemas", Anthropic's "the value '...' is not valid for this field"): an overflow wording only
# inside such a quote is the client's text. No wrapper quoting an upstream's refusal says these.
_ECHO_MARKERS = re.compile(r"\binvalid (?:value|schema)\b|\bis not (?:valid|of type|one of|a valid)\b"
                           r"|\b(?:un)?supported values?\b", re.IGNORECASE)
# Wrapped errors (a framework re-raising the SDK's error) are followed this many causes deep.
_MAX_CAUSE_DEPTH = 4
# Bodies nest the message (``{"error": {"message": ...}}``, Gemini's ``details`` list); deeper is not an error body.
_MAX_BODY_DEPTH = 5
# Keys whose string values are an error's wording.
_TEXT_KEYS = frozenset({"message", "msg", "detail", "error", "errormessage"})
# Body fields holding the counts (llama.cpp's server) -> what they count.
_COUNT_KEYS = {"n_prompt_tokens": "prompt", "n_ctx": "limit"}
# Keys whose string values are an error's code or type.
_CODE_KEYS = frozenset({"code", "type", "status", "error_type"})
# The largest figure an error can state: no window, prompt or request is near a trillion tokens or bytes. A larger
# one (a 5,000-digit number from a broken or hostile server) is no count: read as absent, it cannot overflow the
# int conversion (4,300 digits at most) or the float arithmetic that learns the limit from it.
MAX_ERROR_FIGURE = 10**12
_MAX_FIGURE_DIGITS = len(str(MAX_ERROR_FIGURE))


@dataclass(frozen=True, slots=True)
class OverflowInfo:
    """A context-window error, with the counts the provider reported (None when it gave none).

    Attributes:
        message: The provider's wording.
        provider: Who said it (``"openai"``, ``"anthropic"``, ``"gemini"``, …), when it can be told.
        prompt_tokens: The size of the rejected input, as the provider counted it.
        limit: The provider's limit; it covers ``max_tokens`` too when the provider says so.
        max_tokens: Tokens the request reserved for the reply and the provider counted against ``limit``.
        status_code: The HTTP status, when known.
    """

    message: str
    provider: str | None = None
    prompt_tokens: int | None = None
    limit: int | None = None
    max_tokens: int | None = None
    status_code: int | None = None

    @property
    def input_limit(self) -> int | None:
        """The most input the provider would have accepted with the same reply reservation."""
        if self.limit is None:
            return None
        return max(0, self.limit - (self.max_tokens or 0))

    def to_error(self) -> ContextOverflowError:
        """The same, as a :class:`~contextfold.errors.ContextOverflowError`."""
        return ContextOverflowError(self.message, prompt_tokens=self.prompt_tokens, limit=self.limit,
                                    provider=self.provider)


@dataclass(frozen=True, slots=True)
class _Pattern:
    provider: str | None
    regex: re.Pattern[str]


def _p(provider: str | None, pattern: str) -> _Pattern:
    return _Pattern(provider, re.compile(pattern, re.IGNORECASE | re.DOTALL))


# Named groups: ``prompt``, ``limit``, ``output`` (reply tokens counted against the limit), ``total`` (prompt plus
# reply when the provider only gives the sum) and ``breakdown`` (the parenthesised split of ``total``).
_BREAKDOWN = r"(?:\s*\((?P<breakdown>[^)]*)\))?"
_PATTERNS: tuple[_Pattern, ...] = (
    _p("openrouter", r"this endpoint's maximum context length is (?P<limit>\d+) tokens\.?\s*however, you requested "
                     r"(?:about )?(?P<total>\d+) tokens" + _BREAKDOWN),
    _p("vllm", r"too large: (?P<output>\d+)\.\s*this model's maximum context length is (?P<limit>\d+) tokens and "
               r"your request has (?P<prompt>\d+) input tokens"),
    _p("openai", r"maximum context length is (?P<limit>\d+) tokens\.?,?\s*however,? (?:your messages resulted in|"
                 r"you requested|your request has) (?P<total>\d+) (?:input )?tokens" + _BREAKDOWN),
    # The same without the request's count (gateways and older servers stop at the limit).
    _p("openai", r"maximum context length is (?P<limit>\d+) tokens"),
    _p("anthropic", r"prompt is too long: (?P<prompt>\d+) tokens > (?P<limit>\d+) maximum"),
    _p("anthropic", r"input length and `?max_tokens`? exceed context limit: (?P<prompt>\d+) \+ (?P<output>\d+) > "
                    r"(?P<limit>\d+)"),
    _p("openai", r"your input exceeds the context window of this model"),
    _p("gemini", r"input token count(?: \((?P<prompt>\d+)\))? exceeds the maximum number of tokens allowed"
                 r"(?: \(?(?P<limit>\d+)\)?)?"),
    _p("bedrock", r"input is too long for requested model"),
    _p("bedrock", r"too many input tokens(?:\.? max input tokens: (?P<limit>\d+), request input token count: "
                  r"(?P<prompt>\d+))?"),
    _p("llama.cpp", r"request \((?P<prompt>\d+) tokens\) exceeds the available context size \((?P<limit>\d+) tokens\)"),
    _p("llama.cpp", r"the request exceeds the available context size"),
    # LM Studio's server (OpenAI-compatible, local agents): its own wording, and llama.cpp's under newer versions.
    _p("lmstudio", r"trying to keep the first (?P<prompt>\d+) tokens when context (?:the )?overflows\.?\s*however, the "
                   r"model is loaded with (?:a )?context length of only (?P<limit>\d+) tokens"),
    _p("lmstudio", r"cannot truncate prompt with n_keep \((?P<prompt>\d+)\) >= n_ctx \((?P<limit>\d+)\)"),
    _p("ollama", r"input length exceeds (?:the )?(?:maximum )?context length"),
    _p("mistral", r"prompt contains (?P<prompt>\d+) tokens(?: and \d+ draft tokens)?, too large for model with "
                  r"(?P<limit>\d+) maximum context length"),
    _p("cohere", r"too many tokens: total number of tokens in the prompt cannot exceed (?P<limit>\d+) - received "
                 r"(?P<prompt>\d+)"),
    # xAI's API (OpenAI-compatible; the second is its newer wording, with a code in brackets).
    _p("xai", r"maximum prompt length is (?P<limit>\d+) but the request contains (?P<prompt>\d+) tokens"),
    _p("xai", r"input_too_large\]? current message \((?P<prompt>\d+) tokens\) exceeds budget "
              r"\((?P<limit>\d+) tokens\)"),
    # Hugging Face text-generation-inference (Inference Endpoints, self-hosted TGI), HTTP 422: the input and the
    # reply's reservation over the total, or the input alone over the server's --max-input-tokens.
    _p("tgi", r"`?inputs`? tokens \+ `?max_new_tokens`? must be <= (?P<limit>\d+)\.?\s*given: (?P<prompt>\d+) "
              r"`?inputs`? tokens and (?P<output>\d+) `?max_new_tokens`?"),
    _p("tgi", r"`?inputs`? must have less than (?P<limit>\d+) tokens\.?\s*given: (?P<prompt>\d+)"),
    # Alibaba's DashScope / Model Studio (Qwen; its OpenAI-compatible endpoint prefixes "<400> InternalError.Algo.
    # InvalidParameter: "), with the input's range in tokens, and Moonshot's API (Kimi).
    _p("dashscope", r"range of input length should be \[1, (?P<limit>\d+)\]"),
    _p("moonshot", r"model max length exceeded,? max length:? ?(?P<limit>\d+)"),
    _p(None, r"context length exceeded|context_length_exceeded|exceeds? (?:the )?(?:model's )?context window|"
             r"context window (?:exceeded|is full)|maximum context length"),
)
_REGEXES = tuple(pattern.regex for pattern in _PATTERNS)
# A breakdown's parts: "4000 in the messages", "1000 for the completion", "12 of tool input", "10 in the output".
_PART = re.compile(r"(\d+) (?:in|of|for) (?:the |your )?([a-z ]+?)(?=[,;)]|$)", re.IGNORECASE)
_OUTPUT_WORDS = ("completion", "output")
# SDK module prefixes -> provider names, for errors whose wording is shared (OpenAI's is reused by many servers).
_MODULE_PROVIDERS: tuple[tuple[str, str], ...] = (("openai", "openai"), ("anthropic", "anthropic"),
                                                  ("litellm", "litellm"), ("google", "gemini"),
                                                  ("botocore", "bedrock"), ("mistralai", "mistral"),
                                                  ("cohere", "cohere"), ("groq", "groq"))


@dataclass
class ErrorReading:
    """What an error says, gathered from an exception, its causes and its body (see :func:`read_error`)."""

    texts: list[str]
    codes: set[str]
    numbers: dict[str, int]
    status: int | None = None
    provider: str | None = None
    forced: bool = False  # the error's class says "overflow" whatever the text
    # Which error of the chain each text came from (its depth: 0 the error itself, 1 its cause, ...), and the codes
    # each one carried: a code says what its own error's text means, not what a chained one's does (a fallback's
    # first model refusing a value, its second the request's length).
    text_origins: list[int] = field(default_factory=list)
    codes_by_origin: dict[int, set[str]] = field(default_factory=dict)
    origin: int = 0  # the error being gathered

    def add_text(self, text: str) -> None:
        """Keep ``text`` as said by the error being gathered."""
        self.texts.append(text)
        self.text_origins.append(self.origin)

    def add_code(self, code: str) -> None:
        """Keep ``code`` as carried by the error being gathered."""
        self.codes.add(code)
        self.codes_by_origin.setdefault(self.origin, set()).add(code)

    def codes_of(self, text_index: int) -> set[str]:
        """The codes the error that said ``texts[text_index]`` carried."""
        origin = self.text_origins[text_index] if text_index < len(self.text_origins) else 0
        return self.codes_by_origin.get(origin, set())


def parse_overflow(error: object, *, provider: str | None = None) -> OverflowInfo | None:
    """Return what a context-length error says, or None when ``error`` is some other error.

    Args:
        error: An SDK exception (openai, anthropic, litellm, google-genai, botocore, …), a
            :class:`~contextfold.errors.ContextOverflowError`, a response body (dict, JSON text or bytes), or the
            error's message.
        provider: Names the provider when the caller knows it better than the error does.

    >>> parse_overflow("prompt is too long: 210000 tokens > 200000 maximum").prompt_tokens
    210000
    >>> parse_overflow("Rate limit reached for requests") is None
    True
    """
    if isinstance(error, ContextOverflowError):
        return OverflowInfo(str(error), provider or error.provider, error.prompt_tokens, error.limit)
    evidence = read_error(error)
    if evidence.status == _RATE_LIMIT_STATUS:
        return None
    overflow_coded = evidence.forced or bool(evidence.codes & OVERFLOW_CODES)
    unread: OverflowInfo | None = None  # a wording said only in quotes or past the cap: an overflow, no figures
    for index, text in enumerate(evidence.texts):
        codes = evidence.codes_of(index)
        if not evidence.forced and not codes & OVERFLOW_CODES and codes & ECHOING_CODES:
            continue  # the provider named another cause for this error: whatever wording it echoes is the client's
        # What the error quotes is the client's (an invalid value echoed whole): its wording there sets no limit.
        said = said_in(text, _REGEXES, STRING_QUOTES)
        if said is None:
            continue
        if said.match is None and not said.capped and not overflow_coded and _echoes_a_value(text):
            # Said only inside a quote the error marks as a value it refused ("Invalid value: '...'", "'...' is not
            # valid under ..."): a user's or a tool's text echoed. A wrapper quoting an upstream's refusal
            # ({exc!r}, SageMaker's 'with message "..."', a gateway's 'Upstream returned 400: "..."') says none of
            # these, and its quote is read as an overflow without figures (issue 17: else the same oversized
            # request is sent again).
            continue
        said_by = provider or evidence.provider or _PATTERNS[said.wording].provider
        if said.match is not None:
            return _info(text, said.match, said_by, evidence)
        unread = unread or _info(text, None, said_by, evidence)
    if unread is not None:
        return unread
    if overflow_coded:
        message = evidence.texts[0] if evidence.texts else "context window exceeded"
        return _info(message, None, provider or evidence.provider, evidence)
    return None


def _echoes_a_value(text: str) -> bool:
    """Whether ``text``, outside its quotes, says it refused a value it quotes (an echo marker)."""
    return _ECHO_MARKERS.search(unquoted(text, STRING_QUOTES)) is not None


def read_error(error: object) -> ErrorReading:
    """The wording, codes, HTTP status and provider an error carries (exception, its causes, body, text).

    What :func:`parse_overflow` reads; :func:`contextfold.media.parse_media_limit` reads the same for media limits.
    """
    evidence = ErrorReading([], set(), {})
    _gather(error, evidence, depth=0)
    return evidence


def _info(message: str, match: re.Match[str] | None, provider: str | None, evidence: ErrorReading) -> OverflowInfo:
    groups: dict[str, str | None] = match.groupdict() if match is not None else {}
    prompt, limit, output = _int(groups.get("prompt")), _int(groups.get("limit")), _int(groups.get("output"))
    total = _int(groups.get("total"))
    if total is not None:
        split_prompt, split_output = _split(groups.get("breakdown") or "")
        # Without a split, "you requested N tokens" may include the reply: an over-estimate of the input is safe.
        prompt = split_prompt if split_prompt is not None else total
        output = split_output
    prompt = prompt if prompt is not None else evidence.numbers.get("prompt")
    limit = limit if limit is not None else evidence.numbers.get("limit")
    # A limit of no tokens at all is no provider's: taken at its word, recovery would drop the whole history.
    limit = limit or None
    return OverflowInfo(message=message.strip(), provider=provider, prompt_tokens=prompt, limit=limit,
                        max_tokens=output, status_code=evidence.status)


def _split(breakdown: str) -> tuple[int | None, int | None]:
    prompt = output = None
    for number, what in _PART.findall(breakdown):
        if any(word in what.lower() for word in _OUTPUT_WORDS):
            output = (output or 0) + int(number)
        else:
            prompt = (prompt or 0) + int(number)
    return prompt, output


def _int(value: str | None) -> int | None:
    return read_figure(value)


def read_figure(value: str | int | None) -> int | None:
    """A count an error states (digits, or a JSON number), or None when absent, negative or past MAX_ERROR_FIGURE."""
    if isinstance(value, str):
        digits = value.lstrip("0")
        if not value or not value.isdigit() or len(digits) > _MAX_FIGURE_DIGITS:
            return None
        value = int(digits or "0")
    if value is None or isinstance(value, bool) or not 0 <= value <= MAX_ERROR_FIGURE:
        return None
    return value


# -- gathering the evidence ----------------------------------------------------------------------------------------


def _gather(error: object, evidence: ErrorReading, *, depth: int) -> None:
    if isinstance(error, bytes | bytearray):
        error = bytes(error).decode("utf-8", errors="replace")
    if isinstance(error, str):
        body = _json(error)
        if body is not None:
            _walk(body, evidence, depth=0)
        evidence.add_text(error)
        return
    if isinstance(error, Mapping):
        _walk(error, evidence, depth=0)
        return
    if isinstance(error, BaseException):
        _gather_exception(error, evidence, depth=depth)


def _gather_exception(exc: BaseException, evidence: ErrorReading, *, depth: int) -> None:
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & _OVERFLOW_CLASS_NAMES:
        evidence.forced = True
    if isinstance(exc, ContextOverflowError):  # ours, wrapped by a framework: its counts are already parsed
        for key, value in (("prompt", exc.prompt_tokens), ("limit", exc.limit)):
            if value is not None:
                evidence.numbers.setdefault(key, value)
        evidence.provider = evidence.provider or exc.provider
    if evidence.provider is None:
        evidence.provider = _exception_provider(exc)
    status = _status(exc)
    if evidence.status is None and status is not None:
        evidence.status = status
    evidence.origin = depth
    code = getattr(exc, "code", None)
    if isinstance(code, str):
        evidence.add_code(code.lower())
    for attribute in ("body", "response", "details", "error"):
        value = getattr(exc, attribute, None)
        if isinstance(value, Mapping | list):
            _walk(value, evidence, depth=0)
        elif isinstance(value, str | bytes) and attribute == "body":
            _gather(value, evidence, depth=depth)
    message = getattr(exc, "message", None)
    if isinstance(message, str) and message:
        evidence.add_text(message)
    evidence.add_text(str(exc))
    cause = exc.__cause__ or exc.__context__
    if cause is not None and depth < _MAX_CAUSE_DEPTH:
        _gather_exception(cause, evidence, depth=depth + 1)


def _exception_provider(exc: BaseException) -> str | None:
    llm_provider = getattr(exc, "llm_provider", None)
    if isinstance(llm_provider, str) and llm_provider:
        return llm_provider
    module = type(exc).__module__ or ""
    for prefix, name in _MODULE_PROVIDERS:
        if module == prefix or module.startswith(prefix + "."):
            return name
    return None


def _status(exc: BaseException) -> int | None:
    for attribute in ("status_code", "status", "code"):
        value = getattr(exc, attribute, None)
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value < 600:
            return value
    response = getattr(exc, "response", None)
    if isinstance(response, Mapping):  # botocore: {"ResponseMetadata": {"HTTPStatusCode": 400}, "Error": {...}}
        meta = response.get("ResponseMetadata")
        if isinstance(meta, Mapping) and isinstance(meta.get("HTTPStatusCode"), int):
            return int(meta["HTTPStatusCode"])
    return None


def _walk(value: object, evidence: ErrorReading, *, depth: int) -> None:
    if depth > _MAX_BODY_DEPTH:
        return
    if isinstance(value, list):
        for item in value:
            _walk(item, evidence, depth=depth + 1)
        return
    if not isinstance(value, Mapping):
        return
    for key, item in value.items():
        name = str(key).lower()
        if isinstance(item, str):
            if name in _TEXT_KEYS:
                evidence.add_text(item)
            elif name in _CODE_KEYS:
                evidence.add_code(item.lower())
        elif isinstance(item, int) and not isinstance(item, bool):
            if name in _COUNT_KEYS and (figure := read_figure(item)) is not None:
                evidence.numbers.setdefault(_COUNT_KEYS[name], figure)
            elif name in ("code", "status", "httpstatuscode") and 100 <= item < 600 and evidence.status is None:
                evidence.status = item
        elif isinstance(item, Mapping | list):
            _walk(item, evidence, depth=depth + 1)


def _json(text: str) -> Any:
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):  # not JSON, or nested past the reader's depth (a cut or forged page)
        return None

