"""Redaction: planted secrets of every kind never survive, and nothing outside them changes."""

from __future__ import annotations

import itertools
import json
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from contextfold.messages import Message, TextPart, ThinkingPart, ToolCall
from contextfold.redact import BUILTIN_PATTERNS, Redactor, marker
from contextfold.redact._pattern import filler as template_filler
from contextfold.redact._pattern import is_placeholder
from contextfold.redact.rules import _NAME_LIKE, _names_a_secret

_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_UPPER_NUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_B64 = _ALNUM + "/+"


def _s(alphabet: str, n: int) -> st.SearchStrategy[str]:
    # (A run of one repeated character is a template's filling, `sk-000…` or `XXXX`, never redacted.)
    return st.text(alphabet=alphabet, min_size=n, max_size=n).filter(lambda v: not template_filler(v))


# kind -> strategy of (planted text, secret value inside it). The secret value must vanish; the rest of the
# planted text (keywords such as "password=") is context and stays.
def _plain(kind: str, values: st.SearchStrategy[str]) -> st.SearchStrategy[tuple[str, str, str]]:
    return values.map(lambda v: (kind, v, v))


def _ctx(kind: str, template: str, values: st.SearchStrategy[str]) -> st.SearchStrategy[tuple[str, str, str]]:
    return values.map(lambda v: (kind, template.format(v), v))


SECRETS: dict[str, st.SearchStrategy[tuple[str, str, str]]] = {
    "openai_key": _plain("openai_key", _s(_ALNUM, 48).map(lambda v: "sk-" + v)),
    "openai_project_key": _plain("openai_key", _s(_ALNUM + "_-", 60).map(lambda v: "sk-proj-" + v)),
    "anthropic_key": _plain("anthropic_key", _s(_ALNUM + "_-", 80).map(lambda v: "sk-ant-api03-" + v)),
    "aws_access_key": _plain("aws_access_key", _s(_UPPER_NUM, 16).map(lambda v: "AKIA" + v)),
    "aws_secret_key": _ctx("aws_secret_key", "aws_secret_access_key = {}", _s(_B64, 40)),
    "github_token": _plain("github_token", _s(_ALNUM, 36).map(lambda v: "ghp_" + v)),
    "github_pat": _plain("github_token", _s(_ALNUM + "_", 82).map(lambda v: "github_pat_" + v)),
    "slack_token": _plain("slack_token", _s(_ALNUM, 24).map(lambda v: "xoxb-1234567890-" + v)),
    "google_api_key": _plain("google_api_key", _s(_ALNUM + "_-", 35).map(lambda v: "AIza" + v)),
    "bearer_token": _ctx("bearer_token", "Authorization: Bearer {}", _s(_ALNUM + "._-", 32)),
    "jwt": _plain(
        "jwt",
        st.tuples(_s(_ALNUM, 20), _s(_ALNUM, 30), _s(_ALNUM + "_-", 43)).map(lambda t: f"eyJ{t[0]}.eyJ{t[1]}.{t[2]}"),
    ),
    # (Not "$NAME", "${", "$(": those are references to a variable, not a password. Nor a value that reads as a
    # variable's name holding a secret's name as a word, `SecretA00A00`: rules.py says why no rule can tell them.
    # Nor a YAML tag's word, `!AbcDefGhij`: `password: !vault` names where the value is. Nor lower-case letters
    # alone: `f(password=name)` passes a variable.)
    "password": _ctx(
        "password", "password={}", _s(_ALNUM + "!#$%^*", 12).filter(
            lambda v: not re.match(r"\$[A-Za-z_{(]", v) and not (_NAME_LIKE.fullmatch(v) and _names_a_secret(v))
            and not is_placeholder(v) and not (v.isalpha() and v.islower()))
    ),
    "password_json": _ctx("password", '"password": "{}"', _s(_ALNUM + " !#", 12).map(str.strip).filter(bool)),
    "api_key": _ctx("api_key", "api_key: {}", _s(_ALNUM, 24)),
    "private_key": _plain(
        "private_key",
        _s(_B64, 64).map(
            lambda v: f"-----BEGIN RSA PRIVATE KEY-----\nMIIE{v}\n{v[::-1]}==\n-----END RSA PRIVATE KEY-----"
        ),
    ),
    "url_credentials": _ctx("url_credentials", "postgres://admin:{}@db.internal:5432/app", _s(_ALNUM + "!*", 16)),
}

# Filler that cannot form or extend a secret: no '-', '_', '=', ':', '@', '/', uppercase or 'x'.
_FILLER = st.text(alphabet="abcdefghijklmnopqrstuvwyz0123456789 .,;()!?\n\t", max_size=40)
_SEPARATORS = st.sampled_from([" ", "\n", "\t", " (", ") ", ", "])

# These tests check the patterns one input at a time: a redactor that remembers secrets across tests would redact
# text that merely repeats an earlier test's secret (remembering has tests of its own).
redactor = Redactor(remember=False)


def _expected(planted: str, value: str, kind: str) -> str:
    return planted.replace(value, marker(kind), 1)


def test_every_builtin_kind_is_exercised() -> None:
    """Each built-in kind has a fuzz strategy here or an entry in the realistic corpus (tests/redact_corpus.py)."""
    from redact_corpus import SECRETS

    corpus_kinds = {f.name for s in SECRETS for f in redactor.scan(s.text)}
    assert {p.name for p in BUILTIN_PATTERNS} == corpus_kinds | _kinds_covered()


def _kinds_covered() -> set[str]:
    return {
        "openai_key", "anthropic_key", "aws_access_key", "aws_secret_key", "github_token", "slack_token",
        "google_api_key", "bearer_token", "jwt", "password", "api_key", "private_key", "url_credentials",
    }  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(_FILLER, _SEPARATORS, st.one_of(*SECRETS.values()), _SEPARATORS),
        min_size=1,
        max_size=5,
    ),
    _FILLER,
)
@example([("", " ", ("password", "password=!AAAAAAAAAAB", "!AAAAAAAAAAB"), " ")], "")  # not a YAML tag
def test_planted_secrets_never_survive_and_nothing_else_changes(
    pieces: list[tuple[str, str, tuple[str, str, str]]], tail: str
) -> None:
    text = ""
    expected = ""
    for filler, left, (kind, planted, value), right in pieces:
        text += filler + left + planted + right
        expected += filler + left + _expected(planted, value, kind) + right
    text += tail
    expected += tail
    out = redactor.redact_text(text)
    filler_text = "\x00".join([*(p[0] for p in pieces), tail])
    for _, _, (_, _, value), _ in pieces:
        # (The filler may by chance contain the value itself, e.g. a run of zeros; that is not a leak.)
        assert value not in out or value in filler_text
    assert out == expected
    assert redactor.redact_text(out) == out  # idempotent


@settings(max_examples=100, deadline=None)
@given(_FILLER)
def test_text_without_secrets_is_unchanged(text: str) -> None:
    assert redactor.redact_text(text) == text


@settings(max_examples=60, deadline=None)
@given(st.one_of(*SECRETS.values()))
def test_each_kind_alone(example: tuple[str, str, str]) -> None:
    name, planted, value = example
    assert redactor.redact_text(f"x {planted} y") == f"x {_expected(planted, value, name)} y"


def test_a_quoted_value_starting_with_an_exclamation_mark_is_a_password_not_a_yaml_tag() -> None:
    # Found by test_each_kind_alone at a saved example: '"password": "!AAaAAaAAaAA"' was left whole, taken for a
    # YAML tag (!Ref, !vault). Only a bare value can be a tag; quoted (JSON, a quoted YAML scalar) it is literal.
    for text in ('{"password": "!AAaAAaAAaAA"}', "password: '!AAaAAaAAaAA'", 'DB_PASSWORD="!AAaAAaAAaAA"'):
        assert "AAaAAaAAaAA" not in Redactor().redact_text(text), text
    assert "AAaAAaAAaAA" not in json.dumps(Redactor().redact_obj({"password": "!AAaAAaAAaAA"}))
    for text in ("password: !Ref DbPassword", "  password: !vault |", "token: !!str"):
        assert Redactor().redact_text(text) == text


@pytest.mark.parametrize(
    "text",
    [
        "the task-abcdefghijklmnopqrstuvwxyz is done",  # "sk-" inside a word
        "a bearer of good news",
        "AKIA is a prefix, AKIAshort",
        "password: [REDACTED:password]",
        "see https://example.com/path and git@github.com:org/repo.git",
        "def login(username=None, password=None): ...",
        "client = make(password=get_password(), api_key=settings.API_KEY())",
        "MyBearer abcdefghijklmnopqrstuvwxyz",
    ],
)
def test_near_misses_are_left_alone(text: str) -> None:
    assert redactor.redact_text(text) == text


def test_unterminated_private_key_is_redacted_to_the_end_of_its_key_lines() -> None:
    # A truncated block: its key lines go, the tool's own note after them stays.
    text = "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n<response clipped>"
    assert redactor.redact_text(text) == "key:\n" + marker("private_key") + "\n<response clipped>"


def test_user_patterns_and_callback() -> None:
    r = Redactor(patterns={"ticket": r"TCK-\d{6}"}, callback=lambda s: s.replace("hunter", "h*****"))
    assert r.redact_text("TCK-123456 hunter") == "[REDACTED:ticket] h*****"


def test_disabled_and_unknown_disabled_names() -> None:
    text = "postgres://u:secretpw@host/db"
    assert Redactor(enabled=False).redact_text(text) == text
    assert Redactor(disabled=["url_credentials"]).redact_text(text) == text
    with pytest.raises(ValueError, match="unknown built-in"):
        Redactor(disabled=["nope"])


def test_redact_obj_is_deep_and_keeps_keys() -> None:
    key = "sk-" + "a1" * 20
    obj = {"a": [key, {"b": (1, key)}], key: None}
    assert redactor.redact_obj(obj) == {"a": [marker("openai_key"), {"b": (1, marker("openai_key"))}], key: None}


def test_redact_message_covers_text_parts_arguments_meta_extra() -> None:
    key = "ghp_" + "Z" * 36
    signed = ThinkingPart(f"I saw {key}", signature="sig-" + key)
    m = Message(
        "assistant",
        (TextPart(f"token {key}"), ThinkingPart(f"I also saw {key}"), signed),
        (ToolCall("c1", "bash", json.dumps({"cmd": f"curl -H 'Authorization: Bearer {key}'"})),),
        meta={"id": "m1", "note": key},
        extra={"x": [key]},
    )
    out = redactor.redact_message(m)
    dumped = json.dumps([str(p) for p in out.parts[:2]]) + out.tool_calls[0].arguments + str(dict(out.meta))
    assert key not in dumped
    # Signed thinking is the provider's state: one changed byte fails its signature check, so it is never redacted
    # (issue 23); unsigned thinking text is.
    assert out.parts[2] is signed
    json.loads(out.tool_calls[0].arguments)
    assert out.meta["id"] == "m1"
    assert redactor.redact_message(Message.user("nothing here")) == Message.user("nothing here")


def test_json_arguments_stay_valid_when_a_secret_ends_in_an_escape() -> None:
    args = json.dumps({"cmd": 'echo "password=abc\\"def"'})
    out = redactor.redact_json_string(args)
    assert "abc" not in out
    json.loads(out)


def test_findings_do_not_overlap() -> None:
    text = "api_key=sk-" + "q1W2e3R4t5" * 3 + " Bearer eyJabcdefgh.eyJabcdefgh.abcdefgh"
    spans = redactor.scan(text)
    # A JWT sent as a bearer token: both patterns find the same span, and the more specific name wins.
    assert [f.name for f in spans] == ["openai_key", "jwt"]
    assert all(a.end <= b.start for a, b in itertools.pairwise(spans))
    assert re.fullmatch(r"api_key=\[REDACTED:openai_key\] Bearer \[REDACTED:jwt\]", redactor.redact_text(text))


def _strings(obj: object) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for k, v in obj.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(obj, list):
        return [s for v in obj for s in _strings(v)]
    return []


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(_FILLER, st.one_of(*SECRETS.values())), min_size=1, max_size=4))
@example([("", ("password", "password=Qz7!pK2m#x9", "Qz7!pK2m#x9"))])
def test_archive_files_never_hold_planted_secrets(planted: list[tuple[str, tuple[str, str, str]]]) -> None:
    """A real session's archive (transcript, the summary its summarizer wrote, events): no planted secret.

    Each secret is planted in context once (a user message, a tool call's arguments, a tool output) and its value
    is then repeated bare by the assistant: the summary and the transcript must hold neither (issue 21: the test
    used to archive a summary written by hand, which no summarizer would write).
    """
    from contextfold.archive import MemoryArchiveStore
    from contextfold.manager import ContextManager

    store = MemoryArchiveStore()
    texts = [f"{filler} {secret} {filler}" for filler, (_, secret, _) in planted]
    values = [value for _, (_, _, value) in planted]
    cm = ContextManager("gpt-4o", store="memory", archive=store, session_id="s",
                        policy={"keep_recent_turns": 1, "retain_last_turns": 0})
    try:
        cm.add([
            Message.user(texts[0]),
            Message.assistant("", [ToolCall(f"c{i}", "bash", json.dumps({"cmd": t})) for i, t in enumerate(texts)]),
            *(Message.tool(f"c{i}", t, name="bash") for i, t in enumerate(texts)),
            Message.assistant("Using " + ", ".join(values) + " now."),
            *(m for i in range(3) for m in (Message.user(f"next {i}"), Message.assistant(f"done {i}"))),
        ])
        report = cm.compact()
        cm.archive_view()
    finally:
        cm.close()
    assert report.summary is not None
    decoded: list[str] = []
    for name in store.names("s"):
        raw = (store.read("s", name) or b"").decode()
        docs = [json.loads(raw)] if name.endswith(".json") else [json.loads(line) for line in raw.splitlines()]
        decoded += [raw, *(s for d in docs for s in _strings(d))]
        # Tool-call arguments are JSON inside JSON: decode them too.
        decoded += [v for d in docs for s in _strings(d) if s.startswith('{"cmd"') for v in _strings(json.loads(s))]
    assert any(name.startswith("summary-") for name in store.names("s"))
    fillers = "\x00".join(f for f, _ in planted)
    for value in values:
        assert all(value not in s for s in decoded) or value in fillers


def test_secret_keys_in_structures_redact_the_whole_value() -> None:
    obj = {"db_password": 'ab"c d', "OPENAI_API_KEY": "not-a-known-shape", "input_tokens": "12", "secret": ""}
    assert redactor.redact_obj(obj) == {
        "db_password": marker("password"),
        "OPENAI_API_KEY": marker("api_key"),
        "input_tokens": "12",
        "secret": "",
    }
    args = json.dumps({"password": 'ab"c'})
    out = redactor.redact_json_string(args)
    assert json.loads(out) == {"password": marker("password")}


@pytest.mark.parametrize(("text", "expected"), [
    # values that start like a secret's name: a digit run, or letters and digits switching too often for a name
    ("password=TOKEN0000000", "password=[REDACTED:password]"),
    ("password=Key8fG2hJ9kL", "password=[REDACTED:password]"),
    # names of secrets stay: a variable, not a value
    ("token=TOKEN", "token=TOKEN"),
    ("password=new_password", "password=new_password"),
    ("key=sha256Key", "key=sha256Key"),
    ("password=API_KEY_2", "password=API_KEY_2"),
])
def test_a_value_that_merely_starts_like_a_name_is_still_a_secret(text: str, expected: str) -> None:
    assert redactor.redact_text(text) == expected
