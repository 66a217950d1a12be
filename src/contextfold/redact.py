"""Secret redaction, applied to everything before it leaves the process (events, archives, logs).

Each :class:`SecretPattern` finds one kind of secret; only the secret itself is replaced (``password=hunter2``
becomes ``password=[REDACTED:password]``), so the text around it is byte-for-byte unchanged and a redacted log
still reads naturally. All patterns are matched against the original text and overlapping findings are resolved
before anything is replaced, so one replacement can never create or hide another match.

What the model sees is not redacted unless the configuration asks for it: the agent may legitimately need a
token it was given. Redaction protects what is exported and archived.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .messages import DocumentPart, ImagePart, Message, Part, TextPart, ThinkingPart, ToolCall, UnknownPart, freeze

__all__ = [
    "BUILTIN_PATTERNS",
    "LEARN_MIN_CHARS",
    "MAX_LEARNED",
    "Finding",
    "Redactor",
    "SecretPattern",
    "marker",
]

# Keywords whose assigned value is a secret: `password=...`, `"api_key": "..."`, `CLIENT_SECRET: ...`.
_ASSIGNMENT_KEYS = (
    r"password|passwd|passphrase|api[_-]?key|apikey|secret[_-]?key|secret[_-]?access[_-]?key|client[_-]?secret"
    r"|access[_-]?token|auth[_-]?token|refresh[_-]?token|private[_-]?key"
)
# The value of an assignment: quoted (the quotes stay), or a bare run up to whitespace, a separator, a bracket
# (`f(password=x)`) or '&' (`?api_key=x&page=2`). Not redacted: a marker (so redacting twice changes nothing),
# null-like literals (`password=None`) and calls (`password=get_password()`), which hold no secret.
_ASSIGNMENT_VALUE = (
    r"(?!\[REDACTED)(?:\"(?P<v1>[^\"\n]+)\"|'(?P<v2>[^'\n]+)'"
    r"|(?!(?i:none|null|nil|true|false|undefined)(?![^\s\"',;&()\[\]{}]))(?P<v3>[^\s\"',;&()\[\]{}]++)(?![(\[]))"
)
# A mapping key whose string value is a secret: `password`, `db_password`, `OPENAI_API_KEY`, `client-secret`.
_SECRET_KEY = re.compile(rf"(?i)(?:.*[_\-.])?(?:(?P<pw>password|passwd|passphrase)|{_ASSIGNMENT_KEYS}|secret)")
# Characters that may continue a token; a match must not start or end inside a longer token.
_TOKEN = r"A-Za-z0-9_\-"
# A finding that is exactly a marker is a secret redacted earlier: renaming it (`api_key = "[REDACTED:openai_key]"`
# seen again by the api_key pattern) would make redaction depend on how many times it ran (the manager redacts a
# transcript and the archive redacts it again).
_MARKER_RE = re.compile(r"\[REDACTED:[^\]\n]*\]")
# A secret, once found, is remembered by its alphanumeric runs of at least this length that mix letters and digits:
# a summarizer lists identifiers without the `password=` or `Bearer` that made them recognisable, and an agent may
# repeat a token in prose. Shorter or single-class runs ("password", "localhost") are too common to replace.
LEARN_MIN_CHARS = 12
_LEARNABLE_RE = re.compile(rf"[A-Za-z0-9]{{{LEARN_MIN_CHARS},}}")
# A secret found inside JSON text (tool-call arguments) still has its escapes: `\nMIIE...` must teach `MIIE...`.
_JSON_ESCAPE_RE = re.compile(r"\\(?:[nrtbf/\"\\]|u[0-9a-fA-F]{4})")
# Remembered runs kept at most: a redactor shared by many sessions must not grow without bound.
MAX_LEARNED = 4096


@dataclass(frozen=True, slots=True)
class SecretPattern:
    """One kind of secret.

    The secret is the named group ``v`` (or the first matching group whose name starts with ``v``), else the whole
    match; only that span is replaced by ``[REDACTED:<name>]``.
    """

    name: str
    regex: re.Pattern[str]
    # Lower-case substrings of which at least one is in every match; none in the text means no need to search.
    triggers: tuple[str, ...] = ()

    @classmethod
    def compile(cls, name: str, pattern: str, flags: int = 0) -> SecretPattern:
        """A pattern from regex source (raises ``re.error`` for invalid syntax)."""
        return cls(name, re.compile(pattern, flags))

    def may_match(self, lowered: str) -> bool:
        """False only when no trigger occurs in ``lowered`` (the text, lower-cased)."""
        return not self.triggers or any(t in lowered for t in self.triggers)


@dataclass(frozen=True, slots=True, order=True)
class Finding:
    """A secret found at ``text[start:end]``."""

    start: int
    end: int
    name: str


def marker(name: str) -> str:
    """The text a secret of kind ``name`` is replaced with."""
    return f"[REDACTED:{name}]"


def _p(name: str, pattern: str, *triggers: str) -> SecretPattern:
    return SecretPattern(name, re.compile(pattern), tuple(triggers))


# The lines contextfold's own tool-output view (cache_view.render_view) puts after the head it keeps: the omission
# marker and the closing note. They hold no key material but do name the output's ref; a key block must not run across
# them, or the ref would be redacted and remembered as a secret (then every later mention of that ref, in events and
# archives, would be redacted or not depending on when it was written).
_VIEW_NOTE = r"\n\[(?:\.\.\. lines \d+-\d+ of \d+ omitted; |tool output cached as ref=tout_)"

# Order matters only to break ties between findings of the same span: the more specific kind wins the name.
# Patterns start with their literal where they can (a leading look-behind or option defeats the regex engine's
# literal-prefix search, which is most of the speed); triggers skip a pattern when its text cannot be present.
BUILTIN_PATTERNS: tuple[SecretPattern, ...] = (
    _p(
        "private_key",
        # An unterminated block (a truncated tool output) is redacted to the end of the text rather than leaked, or
        # in a cached output's view, up to the lines the view omitted.
        rf"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:(?!{_VIEW_NOTE})[\s\S])*?"
        rf"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|(?={_VIEW_NOTE})|\Z)",
        "-----begin",
    ),
    # The end of a block whose beginning is gone (a truncated output keeps head and tail lines): the key lines right
    # before the END line are still secret.
    _p(
        "private_key",
        r"(?m)^(?:[A-Za-z0-9+/=]{16,}\r?\n)+-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
        "-----end",
    ),
    _p("anthropic_key", rf"sk-ant-(?<![{_TOKEN}]sk-ant-)[A-Za-z0-9_\-]{{20,}}", "sk-ant-"),
    _p("openai_key", rf"sk-(?<![{_TOKEN}]sk-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{{20,}}", "sk-"),
    _p(
        "aws_access_key",
        r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
        "akia",
        "asia",
        "abia",
        "acca",
    ),
    _p(
        "aws_secret_key",
        r"(?i)secret_?(?:access_?)?key[\"']?[ \t]*[:=][ \t]*[\"']?(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        "secret",
    ),
    _p(
        "github_token",
        rf"(?<![{_TOKEN}])(?:gh[pousr]_[A-Za-z0-9]{{36,}}|github_pat_[A-Za-z0-9_]{{22,}})",
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
    ),
    _p("slack_token", rf"xox(?<![{_TOKEN}]xox)[abposr]-[A-Za-z0-9\-]{{10,}}", "xox"),
    _p("google_api_key", rf"AIza(?<![{_TOKEN}]AIza)[0-9A-Za-z_\-]{{35}}(?![{_TOKEN}])", "aiza"),
    _p("jwt", rf"eyJ(?<![{_TOKEN}]eyJ)[A-Za-z0-9_\-]{{5,}}\.eyJ[A-Za-z0-9_\-]{{5,}}\.[A-Za-z0-9_\-]{{5,}}", "eyj"),
    # A capital "Bearer" or an Authorization header: lower-case prose ("a bearer of news") is not a header.
    _p("bearer_token", r"Bearer(?<![A-Za-z0-9_]Bearer)[ \t]+(?P<v>[A-Za-z0-9\-._~+/]{16,}=*)", "bearer"),
    _p(
        "bearer_token",
        r"(?i)authorization:[ \t]*bearer[ \t]+(?P<v>[A-Za-z0-9\-._~+/]{16,}=*)",
        "authorization",
    ),
    _p("url_credentials", r"://(?<=[A-Za-z0-9+.\-]://)[^\s:/@]+:(?P<v>[^\s@/]+)@", "://"),
    _p(
        "password",
        rf"(?i)(?:password|passwd|passphrase)[\"']?[ \t]*[:=][ \t]*{_ASSIGNMENT_VALUE}",
        "passw",
        "passphrase",
    ),
    _p(
        "api_key",
        rf"(?i)(?:{_ASSIGNMENT_KEYS})[\"']?[ \t]*[:=][ \t]*{_ASSIGNMENT_VALUE}",
        "key",
        "secret",
        "token",
        "passphrase",
    ),
)


def _secret_span(m: re.Match[str]) -> tuple[int, int]:
    groups = m.re.groupindex
    for name in sorted(groups):
        if name.startswith("v") and m.group(name) is not None:
            return m.span(name)
    return m.span()


class Redactor:
    """Replaces secrets in text, JSON-like objects and messages.

    Example:
        >>> Redactor().redact_text("export OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwx")
        'export OPENAI_API_KEY=[REDACTED:openai_key]'

    Args:
        enabled: when False every method returns its input unchanged (the caller should emit a warning event).
        patterns: user patterns, ``{name: regex}`` or :class:`SecretPattern` objects, checked with the built-ins.
        builtin: whether the built-in patterns are used.
        disabled: names of built-in patterns to skip (for example ``{"url_credentials"}``).
        callback: a last pass over every redacted string, for secrets no regex describes.
        apply_to_model: a flag the context manager reads: redact what the model sees too (off by default).
        remember: replace later verbatim repeats of every secret found (its runs of ``LEARN_MIN_CHARS`` or more
            letters and digits), even where no pattern would recognise it. A repeat seen before the secret was
            first found is not caught.
    """

    def __init__(
        self,
        *,
        enabled: bool = True,
        patterns: Mapping[str, str] | Iterable[SecretPattern] = (),
        builtin: bool = True,
        disabled: Iterable[str] = (),
        callback: Callable[[str], str] | None = None,
        apply_to_model: bool = False,
        remember: bool = True,
    ) -> None:
        skip = set(disabled)
        unknown = skip - {p.name for p in BUILTIN_PATTERNS}
        if unknown:
            raise ValueError(f"disabled: unknown built-in pattern(s) {sorted(unknown)}")
        user = (
            [SecretPattern.compile(name, rx) for name, rx in patterns.items()]
            if isinstance(patterns, Mapping)
            else list(patterns)
        )
        chosen = [p for p in BUILTIN_PATTERNS if p.name not in skip] if builtin else []
        # User patterns come first so that, for an identical span, the user's name is the one shown.
        self.patterns: tuple[SecretPattern, ...] = (*user, *chosen)
        self.enabled = enabled
        self.callback = callback
        self.apply_to_model = apply_to_model
        self.remember = remember
        # Copy-on-write: exporter threads read it while the agent's thread learns; readers never see a dict change.
        self._learned: dict[str, str] = {}
        self._learn_lock = threading.Lock()

    def learn(self, secret: str, name: str) -> None:
        """Remember ``secret`` so that its repeats are redacted as ``name`` (see ``remember``)."""
        text = _JSON_ESCAPE_RE.sub(" ", secret) if "\\" in secret else secret
        runs = [r for r in _LEARNABLE_RE.findall(text) if not r.isalpha() and not r.isdigit()]
        if not self.remember or not runs:
            return
        with self._learn_lock:
            fresh = {r: name for r in runs if r not in self._learned}
            if fresh and len(self._learned) + len(fresh) <= MAX_LEARNED:
                self._learned = {**self._learned, **fresh}

    def _replace_learned(self, text: str) -> str:
        learned = self._learned
        if not learned or len(text) < LEARN_MIN_CHARS:
            return text
        return _LEARNABLE_RE.sub(lambda m: marker(learned[m.group()]) if m.group() in learned else m.group(), text)

    # -- text ---------------------------------------------------------------------------------------------------
    def scan(self, text: str) -> list[Finding]:
        """The secrets in ``text``, left to right, without overlaps (the earliest, then longest, finding wins)."""
        found: list[tuple[int, int, int, str]] = []
        lowered = text.lower()
        for priority, pattern in enumerate(self.patterns):
            if not pattern.may_match(lowered):
                continue
            for m in pattern.regex.finditer(text):
                start, end = _secret_span(m)
                if end > start and not _MARKER_RE.fullmatch(text, start, end):
                    found.append((start, -(end - start), priority, pattern.name))
        found.sort()
        out: list[Finding] = []
        last_end = -1
        for start, neg_len, _, name in found:
            if start >= last_end:
                out.append(Finding(start, start - neg_len, name))
                last_end = start - neg_len
        return out

    def redact_text(self, text: str) -> str:
        """``text`` with every secret replaced by its marker; the rest is unchanged."""
        if not self.enabled or not text:
            return text
        findings = self.scan(text)
        for f in findings:
            self.learn(text[f.start : f.end], f.name)
        pieces: list[str] = []
        pos = 0
        for f in findings:
            pieces.append(self._replace_learned(text[pos : f.start]))
            pieces.append(marker(f.name))
            pos = f.end
        pieces.append(self._replace_learned(text[pos:]))
        result = "".join(pieces)
        return self.callback(result) if self.callback is not None else result

    # -- structures ---------------------------------------------------------------------------------------------
    def redact_obj(self, obj: Any) -> Any:
        """A deep copy of ``obj`` with every string value redacted (dicts, lists and tuples; keys are kept)."""
        if not self.enabled:
            return obj
        if isinstance(obj, str):
            return self.redact_text(obj)
        if isinstance(obj, Mapping):
            return {k: self._redact_item(k, v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.redact_obj(v) for v in obj]
        if isinstance(obj, tuple):
            return tuple(self.redact_obj(v) for v in obj)
        return obj

    def _redact_item(self, key: Any, value: Any) -> Any:
        # {"password": "..."}: the key says the whole value is a secret, whatever it looks like.
        if isinstance(key, str) and isinstance(value, str) and value and not value.startswith("[REDACTED"):
            m = _SECRET_KEY.fullmatch(key)
            if m is not None:
                self.learn(value, "password" if m.group("pw") else "api_key")
                return marker("password" if m.group("pw") else "api_key")
        return self.redact_obj(value)

    def redact_json_string(self, text: str) -> str:
        """A JSON document (tool-call arguments) redacted so that it stays valid JSON.

        The decoded values are redacted first: in the raw text an escaped newline is not whitespace, so a bare
        ``api_key=...`` value would run on into the next line of the string. When the values hold no secret, the
        text pass still catches what only shows in JSON syntax (``"api_key": 12345``), and the original formatting
        is kept.
        """
        if not self.enabled:
            return text
        try:
            decoded = json.loads(text)
        except ValueError:
            return self.redact_text(text)  # not JSON at all: the text pass is all there is
        again = self.redact_obj(decoded)
        if again != decoded:
            return json.dumps(again, ensure_ascii=False)
        out = self.redact_text(text)
        try:
            json.loads(out)
        except ValueError:
            return json.dumps(again, ensure_ascii=False)  # the text pass cut through an escape sequence
        return out

    def _redact_part(self, part: Part) -> Part:
        if isinstance(part, TextPart):
            return replace(part, text=self.redact_text(part.text), extra=freeze(self.redact_obj(part.extra)))
        if isinstance(part, ThinkingPart):
            # signature / encrypted are opaque provider tokens that must round-trip; only readable text is redacted.
            return replace(part, text=self.redact_text(part.text))
        if isinstance(part, UnknownPart):
            return replace(part, data=freeze(self.redact_obj(part.data)))
        if isinstance(part, ImagePart | DocumentPart):
            # Inline data is binary (base64); only a URL can carry credentials.
            return replace(part, url=self.redact_text(part.url) if part.url else part.url)
        return part

    def redact_message(self, m: Message) -> Message:
        """``m`` with secrets redacted in its text, tool-call arguments, meta and extra."""
        if not self.enabled:
            return m
        content: str | tuple[Part, ...] = (
            self.redact_text(m.content) if isinstance(m.content, str) else tuple(map(self._redact_part, m.content))
        )
        calls = tuple(
            ToolCall(c.id, c.name, self.redact_json_string(c.arguments), extra=freeze(self.redact_obj(c.extra)))
            for c in m.tool_calls
        )
        meta, extra = freeze(self.redact_obj(m.meta)), freeze(self.redact_obj(m.extra))
        out = replace(m, content=content, tool_calls=calls, meta=meta, extra=extra)
        return m if out == m else out

    def redact_messages(self, messages: Iterable[Message]) -> list[Message]:
        """Every message redacted (see :meth:`redact_message`)."""
        return [self.redact_message(m) for m in messages]
