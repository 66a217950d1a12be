"""Settings from a YAML file, the environment and keyword arguments (that order of precedence: keywords win).

.. code-block:: yaml

    version: 1
    model: gpt-4o
    max_context_tokens: 128000
    policy: {trigger_pct: 0.85, keep_recent_turns: 3}
    telemetry: {exporters: [jsonl], jsonl_path: events.jsonl}
    storage: {store: local, archive: s3://bucket/archive}
    redaction: {enabled: true, patterns: {ticket: "TCK-[0-9]{6}"}}
    summarizer: openai:gpt-4o-mini
    tool_output: {max_tokens: 5000, unit: tokens, serialization_buffer: 1.2, header: true}

The shape of the design documents (004 §8) loads too: ``telemetry.exporter`` (one name), ``storage.adapter`` +
``storage.path``, ``redaction.patterns`` as a list, ``policy.protected_flag``.

Environment: ``CONTEXTFOLD_<SECTION>__<FIELD>`` sets any field (``CONTEXTFOLD_POLICY__TRIGGER_PCT=0.9``,
``CONTEXTFOLD_TELEMETRY__EXPORTER=ariadne``); the flat names (``CONTEXTFOLD_TRIGGER_PCT``, one per policy field and
the ones in :data:`ENV_VARS`) and their ``COMPACT_`` aliases still work, nested names win over flat ones. Any other
``CONTEXTFOLD_`` variable is reported as a warning (a typo would otherwise be ignored silently).

Every error is a :class:`~contextfold.errors.ConfigError` naming where the bad value came from (the file, the
environment variable, or keyword arguments) and its field path (``policy.trigger_pct``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from .errors import ConfigError

if TYPE_CHECKING:
    from .compaction import Policy
    from .redact import Redactor

__all__ = [
    "CONFIG_VERSION",
    "ENV_PREFIXES",
    "ENV_VARS",
    "RedactionSettings",
    "Settings",
    "StorageSettings",
    "TelemetrySettings",
    "ToolOutputSettings",
    "load_settings",
]

# The only file format version so far; a newer file is refused rather than half-understood.
CONFIG_VERSION = 1
# Emit-to-export queue bound: about a minute of a busy agent's events, a few MB at most, before dropping.
DEFAULT_QUEUE_SIZE = 10_000
# Ariadne's documented local default (issue 6).
DEFAULT_ARIADNE_URL = "http://localhost:5175"
# Checked in order: the first prefix set wins, so CONTEXTFOLD_X overrides its COMPACT_X alias.
ENV_PREFIXES = ("CONTEXTFOLD_", "COMPACT_")
# Environment variable suffix -> (field path, kind of value).
ENV_VARS: dict[str, tuple[str, str]] = {
    "MODEL": ("model", "str"),
    "SUMMARIZER": ("summarizer", "str"),
    "MAX_CONTEXT_TOKENS": ("max_context_tokens", "str"),
    "TRIGGER_PCT": ("policy.trigger_pct", "str"),
    "SOFT_PCT": ("policy.soft_pct", "str"),
    "KEEP_RECENT_TURNS": ("policy.keep_recent_turns", "str"),
    "KEEP_TOOL_IO_PAIRS": ("policy.keep_tool_io_pairs", "str"),
    "STRATEGY": ("policy.strategy", "str"),
    "AUTO": ("policy.auto", "str"),
    "STORE": ("storage.store", "str"),
    "ARCHIVE": ("storage.archive", "str"),
    "REDACTION": ("redaction.enabled", "str"),
    "PERSONAL_DATA": ("redaction.personal_data", "str"),
    "EXPORTERS": ("telemetry.exporters", "list"),
    "JSONL_PATH": ("telemetry.jsonl_path", "str"),
    "ARIADNE_URL": ("telemetry.ariadne_url", "str"),
    "OTEL_ENDPOINT": ("telemetry.otel_endpoint", "str"),
    "QUEUE_SIZE": ("telemetry.queue_size", "str"),
}
# Names the file itself; read only when load_settings() is given no path.
ENV_CONFIG_FILE = "CONTEXTFOLD_CONFIG"
# Splits a nested variable into its field path: CONTEXTFOLD_POLICY__TRIGGER_PCT -> policy.trigger_pct.
ENV_NESTED_DELIMITER = "__"
# CONTEXTFOLD_ variables read elsewhere (the test suite's switch), never reported as unknown.
ENV_OTHER_KNOWN = frozenset({"CONTEXTFOLD_REQUIRE_ALL"})
KWARGS_SOURCE = "keyword arguments"
DEFAULTS_SOURCE = "defaults"

ExporterName = Literal["console", "jsonl", "ariadne", "otel"]
# Names the design documents use for the same exporters.
_EXPORTER_ALIASES = {"otlp": "otel"}


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TelemetrySettings(_Section):
    """Where events go. ``exporters`` names them; each exporter reads its own key below."""

    exporters: tuple[ExporterName, ...] = ()
    console: bool = False
    jsonl_path: str | None = None
    ariadne_url: str = DEFAULT_ARIADNE_URL
    otel_endpoint: str | None = None
    queue_size: int = Field(default=DEFAULT_QUEUE_SIZE, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _one_exporter(cls, data: Any) -> Any:
        # 004 §8 writes `exporter: ariadne` (one name); it joins the list. "none" means no exporter.
        if isinstance(data, Mapping) and "exporter" in data:
            data = dict(data)
            one = data.pop("exporter")
            if one == "custom":
                raise ValueError("exporter 'custom' is passed in Python: ContextManager(telemetry=your_sink)")
            names = [] if one in (None, "none", "") else [one]
            existing = data.get("exporters") or []
            data["exporters"] = [*(_split_names(existing)), *names]
        return data

    @field_validator("exporters", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        names = _split_names(value) if isinstance(value, str | list | tuple) else value
        if isinstance(names, list):
            return tuple(dict.fromkeys(_EXPORTER_ALIASES.get(n, n) if isinstance(n, str) else n for n in names))
        return names


def _split_names(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return list(value)


class StorageSettings(_Section):
    """The tool output store and the archive, by URL (``local``, ``redis://…``, ``s3://bucket/prefix``, a path).

    004 §8's ``adapter`` (``fs`` | ``s3`` | ``memory``) and ``path`` are read as the archive's location.
    """

    store: str = "local"
    archive: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _adapter_and_path(cls, data: Any) -> Any:
        if not isinstance(data, Mapping) or not ({"adapter", "path"} & set(data)):
            return data
        data = dict(data)
        adapter, path = data.pop("adapter", "fs"), data.pop("path", None)
        if "archive" in data:
            raise ValueError("give either archive or adapter/path, not both")
        if adapter == "custom":
            raise ValueError("adapter 'custom' is passed in Python: ContextManager(archive=your_archive_store)")
        if adapter == "memory":
            data["archive"] = "memory"
        elif adapter == "fs":
            data["archive"] = path
        elif adapter == "s3":
            if not path:
                raise ValueError("adapter 's3' needs a path: bucket/prefix or s3://bucket/prefix")
            data["archive"] = path if str(path).startswith("s3://") else f"s3://{path}"
        else:
            raise ValueError(f"unknown adapter {adapter!r} (expected fs, s3, memory or custom)")
        return data


class ToolOutputSettings(_Section):
    """Write-time truncation of big tool outputs (000's TOOL_OUTPUT_* settings, 001's ToolOutputCacheConfig).

    None keeps the built-in default: the per-output token cap is a quarter of the tool-output budget (8,000 at a
    128K window), 50 KiB, 2,000 characters per line, no line cap.
    """

    enabled: bool = True
    unit: Literal["tokens", "bytes", "none"] = "tokens"
    max_tokens: int | None = Field(default=None, gt=0)
    max_bytes: int | None = Field(default=None, gt=0)
    max_lines: int | None = Field(default=None, gt=0)
    max_line_length: int | None = Field(default=None, gt=0)
    serialization_buffer: float = Field(default=1.2, ge=1.0, le=4.0)
    header: bool = False
    budget_tokens: int | None = Field(default=None, gt=0)

    def cache_options(self) -> dict[str, Any]:
        """``ContextManager(tool_output=...)``: the :class:`~contextfold.cache.CacheConfig` fields that were set."""
        names = {"max_tokens": "max_message_tokens", "max_bytes": "max_message_bytes",
                 "max_lines": "max_message_lines", "budget_tokens": "context_budget_tokens"}
        out: dict[str, Any] = {}
        for key, value in self.model_dump(exclude_unset=True).items():
            if value is not None:
                out[names.get(key, key)] = value
        return out


class RedactionSettings(_Section):
    """Secret redaction before export and archiving (on by default).

    ``personal_data``: where e-mail addresses, phone and card numbers are redacted as well: ``telemetry`` (the
    default: what exporters send out of the process), ``everywhere`` (the archive too), ``nowhere``.
    """

    enabled: bool = True
    patterns: dict[str, str] = Field(default_factory=dict)
    builtin: bool = True
    disabled: tuple[str, ...] = ()
    apply_to_model: bool = False
    personal_data: Literal["telemetry", "everywhere", "nowhere"] = "telemetry"

    @field_validator("patterns", mode="before")
    @classmethod
    def _list_of_patterns(cls, value: Any) -> Any:
        # 004 §8 lists bare regexes; each gets a name for the [REDACTED:name] marker.
        if isinstance(value, list | tuple):
            return {f"pattern_{i}": source for i, source in enumerate(value, 1)}
        return value

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, value: dict[str, str]) -> dict[str, str]:
        for name, source in value.items():
            try:
                re.compile(source)
            except re.error as exc:
                raise ValueError(f"pattern {name!r} is not a valid regular expression: {exc}") from None
        return value

    def redactor(self, callback: Any = None) -> Redactor:
        """A :class:`~contextfold.redact.Redactor` configured by these settings (``callback``: a str -> str hook)."""
        from .redact import Redactor

        return Redactor(
            enabled=self.enabled,
            patterns=self.patterns,
            builtin=self.builtin,
            disabled=self.disabled,
            callback=callback,
            apply_to_model=self.apply_to_model,
            personal_data=self.personal_data,
        )


class Settings(_Section):
    """Everything configurable, validated and immutable. Build it with :func:`load_settings`.

    ``policy`` is kept as the validated mapping of the keys that were set; :meth:`policy_object` builds the
    :class:`~contextfold.compaction.Policy`.
    """

    version: int = CONFIG_VERSION
    model: str | None = None
    summarizer: str | None = None
    max_context_tokens: int | None = Field(default=None, gt=0)
    policy: dict[str, Any] = Field(default_factory=dict)
    telemetry: TelemetrySettings = TelemetrySettings()
    storage: StorageSettings = StorageSettings()
    redaction: RedactionSettings = RedactionSettings()
    tool_output: ToolOutputSettings = ToolOutputSettings()
    _notices: tuple[str, ...] = PrivateAttr(default=())

    @field_validator("version", mode="before")
    @classmethod
    def _version_string(cls, value: Any) -> Any:
        # 004 writes version: "1.0".
        if isinstance(value, str) and value.strip() in ("1", "1.0"):
            return CONFIG_VERSION
        return value

    @field_validator("version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        if value != CONFIG_VERSION:
            raise ValueError(f"unsupported version {value}; this contextfold reads version {CONFIG_VERSION}")
        return value

    def policy_object(self) -> Policy:
        """The :class:`~contextfold.compaction.Policy` these settings describe."""
        from .compaction import Policy

        return Policy.model_validate(self.policy)

    @property
    def warnings(self) -> tuple[str, ...]:
        """Conditions the caller should report as warning events (redaction disabled, unknown variables, …)."""
        out: list[str] = list(self._notices)
        if not self.redaction.enabled:
            out.append("redaction is disabled: secrets in messages and tool outputs will be exported and archived")
        if self.redaction.enabled and not self.redaction.builtin and not self.redaction.patterns:
            out.append("redaction is enabled but has no patterns: nothing will be redacted")
        return tuple(out)


# -- sources -------------------------------------------------------------------------------------------------------
@dataclass
class _Layers:
    """The merged raw values and, for every leaf path, the source that set it last."""

    data: dict[str, Any]
    origin: dict[str, str]

    def merge(self, values: Mapping[str, Any], source: str, prefix: str = "") -> None:
        _deep_merge(self.data, values, self.origin, source, prefix)

    def source_of(self, path: str) -> str:
        while path:
            if path in self.origin:
                return self.origin[path]
            path = path.rpartition(".")[0]
        return DEFAULTS_SOURCE


def _deep_merge(
    into: dict[str, Any], values: Mapping[str, Any], origin: dict[str, str], source: str, prefix: str
) -> None:
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _deep_merge(into[key], value, origin, source, f"{path}.")
        else:
            into[key] = _copy(value)
            for stale in [p for p in origin if p.startswith(f"{path}.")]:
                del origin[stale]
            origin[path] = source
            if isinstance(value, Mapping):
                _record(value, origin, source, f"{path}.")


def _record(values: Mapping[str, Any], origin: dict[str, str], source: str, prefix: str) -> None:
    for key, value in values.items():
        origin[f"{prefix}{key}"] = source
        if isinstance(value, Mapping):
            _record(value, origin, source, f"{prefix}{key}.")


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    return value


def _set_path(target: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    head, _, rest = path.partition(".")
    if not rest:
        return {**target, head: value}
    return {**target, head: _set_path(target.get(head, {}), rest, value)}


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    source = f"file {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("file not found", source=source) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read: {exc}", source=source) from None
    try:
        _check_yaml_shape(text, source)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ConfigError(f"invalid YAML: {where}{exc.problem or exc.context}", source=source) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", source=source) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"the top level must be a mapping, got {type(data).__name__}", source=source)
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise ConfigError(f"keys must be strings, got {bad[0]!r}", source=source)
    return data


# A settings file is a few levels deep; past this it is a mistake or an attack (PyYAML and every later walk recurse).
MAX_CONFIG_DEPTH = 32
# Values a file may expand to through YAML aliases ("billion laughs": nine aliases of nine aliases of ...).
MAX_CONFIG_VALUES = 100_000
# Python refuses to turn longer digit strings into an int (sys.get_int_max_str_digits()); say so by field instead.
_LONG_INT_RE = re.compile(r"[-+]?[0-9][0-9_]{4299,}")


@dataclass(slots=True)
class _YamlFrame:
    """An open mapping or sequence while :func:`_check_yaml_shape` walks the events."""

    path: str
    is_map: bool
    is_key: bool  # a mapping or sequence used as a key (complex key): not a value of the parent
    anchor: str | None
    expecting_key: bool = True
    key: str = ""
    index: int = 0
    values: int = 1  # itself and everything in it

    def value_path(self) -> str:
        if self.is_map:
            return f"{self.path}.{self.key}" if self.path else self.key
        return f"{self.path}[{self.index}]"


def _check_yaml_shape(text: str, source: str) -> None:
    """Refuse, naming the field, YAML that loading would turn into a RecursionError, a ValueError or a huge object.

    Walks the parser's event stream (which never recurses) before ``safe_load`` builds anything: nesting deeper than
    :data:`MAX_CONFIG_DEPTH`, an integer too long for Python to convert, aliases expanding past
    :data:`MAX_CONFIG_VALUES` values.
    """
    import yaml

    stack: list[_YamlFrame] = []
    sizes: dict[str, int] = {}  # anchor -> how many values the anchored node stands for
    total = 0

    def add_value(count: int) -> None:
        nonlocal total
        total += count
        if total > MAX_CONFIG_VALUES:
            where = stack[-1].value_path() if stack else ""
            raise ConfigError(f"expands to more than {MAX_CONFIG_VALUES:,} values (YAML aliases of aliases)",
                              field=where or None, source=source)
        if stack:
            top = stack[-1]
            top.values += count
            if top.is_map:
                top.expecting_key = True
            else:
                top.index += 1

    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        top = stack[-1] if stack else None
        is_key = top is not None and top.is_map and top.expecting_key
        if isinstance(event, yaml.ScalarEvent | yaml.AliasEvent) and is_key:
            assert top is not None
            top.key = event.value if isinstance(event, yaml.ScalarEvent) else f"*{event.anchor}"
            top.expecting_key = False
        elif isinstance(event, yaml.ScalarEvent):
            if event.style is None and _LONG_INT_RE.fullmatch(event.value.strip()):
                raise ConfigError(f"a number of {len(event.value):,} characters, longer than Python reads "
                                  "(4,300 digits)", field=(top.value_path() if top else "") or None, source=source)
            if event.anchor:
                sizes[event.anchor] = 1
            add_value(1)
        elif isinstance(event, yaml.AliasEvent):
            add_value(sizes.get(event.anchor or "", 1))
        elif isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
            path = "" if top is None else (f"{top.path}.?" if is_key else top.value_path())
            if len(stack) >= MAX_CONFIG_DEPTH:
                raise ConfigError(f"nested more than {MAX_CONFIG_DEPTH} levels deep", field=path or None,
                                  source=source)
            stack.append(_YamlFrame(path, isinstance(event, yaml.MappingStartEvent), is_key, event.anchor))
        elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
            frame = stack.pop()
            if frame.anchor:
                sizes[frame.anchor] = frame.values
            if frame.is_key:
                stack[-1].expecting_key = False  # the parent reads this key's value next
            else:
                add_value(frame.values)


def _from_env(env: Mapping[str, str]) -> tuple[list[tuple[str, str, Any]], list[str]]:
    """(source, field path, value) for every recognised variable, and the names of unknown CONTEXTFOLD_ ones.

    Flat names first (CONTEXTFOLD_X shadows its COMPACT_X alias), then nested names, which win.
    """
    from .compaction import Policy

    flat: dict[str, tuple[str, str]] = {**ENV_VARS}
    for name in Policy.model_fields:
        flat.setdefault(name.upper(), (f"policy.{name}", "str"))
    found: list[tuple[str, str, Any]] = []
    for suffix, (path, kind) in flat.items():
        for prefix in ENV_PREFIXES:
            name = f"{prefix}{suffix}"
            raw = env.get(name)
            if raw is None or raw.strip() == "":
                continue
            value: Any = raw.strip()
            if kind == "list":
                value = [v.strip() for v in value.split(",") if v.strip()]
            found.append((f"environment variable {name}", path, value))
            break
    known = {f"{ENV_PREFIXES[0]}{suffix}" for suffix in flat} | {ENV_CONFIG_FILE} | ENV_OTHER_KNOWN
    unknown: list[str] = []
    for name in sorted(env):
        if not name.startswith(ENV_PREFIXES[0]) or name in known:
            continue
        nested = _nested_path(name[len(ENV_PREFIXES[0]):])
        raw = env[name]
        if nested is None:
            unknown.append(name)
        elif raw.strip():
            found.append((f"environment variable {name}", nested, _env_value(raw.strip())))
    return found, unknown


def _nested_path(rest: str) -> str | None:
    """``POLICY__TRIGGER_PCT`` -> ``policy.trigger_pct`` when that names a settings field, else None."""
    from .compaction import Policy

    parts = rest.lower().split(ENV_NESTED_DELIMITER)
    if len(parts) != 2 or not all(parts):
        return None
    section, key = parts
    sections: dict[str, set[str]] = {
        "policy": set(Policy.model_fields),
        "telemetry": {*TelemetrySettings.model_fields, "exporter"},
        "storage": {*StorageSettings.model_fields, "adapter", "path"},
        "redaction": set(RedactionSettings.model_fields),
        "tool_output": set(ToolOutputSettings.model_fields),
    }
    return f"{section}.{key}" if key in sections.get(section, set()) else None


def _env_value(raw: str) -> Any:
    """A JSON list or mapping when the value looks like one (``["a", "b"]``), else the string for pydantic."""
    if raw[:1] in "[{":
        import json

        try:
            return json.loads(raw)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser's limit: pydantic names the field
            return raw
    return raw


def _kwargs_layer(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    fields = set(Settings.model_fields)
    out: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key not in fields:
            raise ConfigError(
                f"unknown setting (expected one of {', '.join(sorted(fields))})", field=key, source=KWARGS_SOURCE
            )
        if value is None:
            continue
        if isinstance(value, BaseModel):
            value = value.model_dump(exclude_unset=True)
        elif key == "policy" and _is_policy(value):  # (every field: a Policy object stands for the whole policy)
            value = value.model_dump()
        out[key] = value
    return out


def _is_policy(value: object) -> bool:
    from .compaction import Policy

    return isinstance(value, Policy)


def _error_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for item in loc:
        out += f"[{item}]" if isinstance(item, int) else (f".{item}" if out else str(item))
    return out


def _raise_validation(exc: ValidationError, layers: _Layers, prefix: str = "") -> NoReturn:
    first = exc.errors()[0]
    path = prefix + _error_path(tuple(first["loc"]))
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown setting"
    elif message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    more = len(exc.errors()) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    raise ConfigError(f"{message}{suffix}", field=path, source=layers.source_of(path)) from None


def _validate_policy(values: Mapping[str, Any], layers: _Layers) -> dict[str, Any]:
    """The policy keys that were set, validated by ``Policy`` and coerced (``"0.9"`` from the environment -> 0.9)."""
    try:
        from .compaction import Policy
    except ModuleNotFoundError as exc:  # pragma: no cover - the policy module ships with the package
        if exc.name != f"{__package__}.policy":
            raise
        return dict(values)
    try:
        policy = Policy.model_validate(values)
    except ValidationError as exc:
        _raise_validation(exc, layers, prefix="policy.")
    return policy.model_dump(include=set(values))


def load_settings(
    path: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None, **kwargs: Any
) -> Settings:
    """Build the settings from a YAML file, environment overrides and keyword arguments (keywords win).

    Args:
        path: the YAML file; when None, ``$CONTEXTFOLD_CONFIG`` if set, else no file.
        env: the environment to read overrides from (``os.environ`` when None); pass ``{}`` to ignore it.
        **kwargs: top-level settings (``model``, ``max_context_tokens``, ``policy`` as a mapping or a ``Policy``,
            ``telemetry``, ``storage``, ``redaction``); nested mappings are merged key by key.

    Raises:
        ConfigError: naming the source and the field path, e.g.
            ``environment variable CONTEXTFOLD_TRIGGER_PCT: policy.trigger_pct: Input should be less than or
            equal to 1``.
    """
    environ = os.environ if env is None else env
    layers = _Layers({}, {})
    if path is None and environ.get(ENV_CONFIG_FILE):
        path = environ[ENV_CONFIG_FILE]
    if path is not None:
        file_path = Path(path)
        layers.merge(_read_yaml(file_path), f"file {file_path}")
    env_values, unknown = _from_env(environ)
    for source, field_path, value in env_values:
        layers.merge(_set_path({}, field_path, value), source)
    layers.merge(_kwargs_layer(kwargs), KWARGS_SOURCE)

    policy = layers.data.get("policy", {})
    if not isinstance(policy, Mapping):
        raise ConfigError("must be a mapping", field="policy", source=layers.source_of("policy"))
    try:
        settings = Settings.model_validate(layers.data)
    except ValidationError as exc:
        _raise_validation(exc, layers)
    settings = settings.model_copy(update={"policy": _validate_policy(settings.policy, layers)})
    if unknown:
        settings._notices = (f"unknown environment variable{'s' if len(unknown) > 1 else ''} ignored: "
                             f"{', '.join(unknown)} (nested names look like CONTEXTFOLD_POLICY__TRIGGER_PCT)",)
    return settings
