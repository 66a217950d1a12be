"""The bulk prefilter stays a necessary condition: every text or message a scan finds a secret in is a suspect.

Issue 22: the prefilter (``Redactor._suspect_texts``) looks again at the texts holding a trigger or a base64 run
(``redact/_gate.py``) and clears those no pattern can match in. Secrets of every built-in rule are planted in
random text, bare and in context, in JSON (escaped, as a value, under a secret's key) and in messages; whatever the
scan or the key rule finds must be in a suspect. The texts that motivated the second look (paths, ``task``, a
``(pass 3)`` marker, a URL without a password) are cleared.
"""

from __future__ import annotations

import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st
from redact_corpus import CODE, SECRETS

from contextfold.messages import Message, ToolCall
from contextfold.redact import Redactor
from contextfold.redact.rules import BUILTIN_PATTERNS

_rng = random.Random(22)


def _r(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_HEX = "0123456789abcdef"
# The rules the secrets corpus has no sample of, written out here.
_MORE = [
    f"GF_TOKEN=glsa_{_r(_ALNUM, 32)}_{_r(_HEX, 8)}",
    f"grafana glc_{_r(_ALNUM, 40)}==",
    f"jfrog AKCp{_r(_ALNUM, 69)}",
    f"artifactory cmVmdGtu{_r(_ALNUM, 60)}",
    f"BREVO=xkeysib-{_r(_HEX, 64)}-{_r(_ALNUM, 16)}",
    f"smtp xsmtpsib-{_r(_HEX, 64)}-{_r(_ALNUM, 16)}",
    f"NOTION=ntn_{_r(_ALNUM, 46)}",
    f"notion secret_{_r(_ALNUM, 43)}",
    f"mongosh mongodb://localhost -u admin -p {_r(_ALNUM, 12)}",
    f'- name: DB_PASSWORD\n  value: "{_r(_ALNUM, 14)}"',
    f"aws ssm put-parameter --name /prod/db/password --value {_r(_ALNUM, 14)}",
    f"TWILIO=SK{_r(_HEX, 32)}",
    f"<config><password>{_r(_ALNUM, 12)}</password></config>",
    f"pass <conf><pa\u017fsword>{_r(_ALNUM, 12)}</pa\u017fsword></conf>",  # (a long s: (?i) takes it for "s")
    f"token <api_\u212aey>{_r(_ALNUM, 16)}</api_\u212aey>",  # (a Kelvin sign: (?i) takes it for "k")
    f"secret <db-credent\u0131als>{_r(_ALNUM, 12)}</db-credent\u0131als>",  # (a dotless i)
    f'"name": "DB_PASSWORD", "value": "{_r(_ALNUM, 14)}"',
    f"bot 123456789:AA{_r(_ALNUM, 33)}",
    f"{_r(_HEX, 32)}-us12",
]
_PLANTED = [s.text for s in SECRETS] + _MORE
_FILLER = [c.text for c in CODE[:60]] + [
    "/testbed/django/contrib/admin/options.py", "sympy/core/tests/test_basic.py", "task", "disk usage",
    "Message 12 (pass 3)", "the key of the dict", "see https://github.com/org/repo/issues/3", "value: 3",
    "tokenizer", "passed", "secret_of_life", "AKIA", "SK", "</div>", "user@host", "http://a:b", "key-", "eyJ",
]
_piece = st.sampled_from(_PLANTED) | st.sampled_from(_FILLER) | st.text(max_size=30) | st.text(
    alphabet=st.sampled_from("aZ09+/=_-.:@ \n\"'<>\\"), max_size=40)


def _wrap(text: str, how: int) -> str:
    """``text`` as it may stand: bare, JSON-escaped, a JSON value, or a secret's key's value."""
    if how == 1:
        return json.dumps(text)
    if how == 2:
        return json.dumps({"cmd": text}, ensure_ascii=False)
    if how == 3:
        return json.dumps({"db_pass": text})
    return text


_texts = st.builds(lambda pieces, how, sep: sep.join(_wrap(p, h) for p, h in zip(pieces, how, strict=False)),
                   st.lists(_piece, min_size=1, max_size=4), st.lists(st.integers(0, 3), min_size=4, max_size=4),
                   st.sampled_from(["", " ", "\n", "\\n", "=", ": "]))
_REDACTOR = Redactor(remember=False)


def _suspects(texts: list[str], *, joined: bool = False) -> set[int]:
    found: set[int] = set()
    _REDACTOR.patterns  # (resolves the prefilter)
    _REDACTOR._scanner.suspect_texts(texts, found, joined=joined)
    return found


@settings(max_examples=400, deadline=None)
@given(st.lists(_texts, min_size=1, max_size=5))
def test_every_text_a_scan_finds_a_secret_in_is_a_suspect(texts: list[str]) -> None:
    scan = Redactor(remember=False)
    suspects, joined = _suspects(texts), _suspects(texts, joined=True)
    for i, text in enumerate(texts):
        if scan.scan(text):
            assert i in suspects and i in joined, text


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_texts, st.integers(0, 3), st.sampled_from(["note", "password", "DB_PASS", "api-key"])),
                min_size=1, max_size=5))
def test_every_message_redaction_changes_is_a_suspect(items: list[tuple[str, int, str]]) -> None:
    batch: list[Message] = []
    for text, shape, key in items:
        if shape == 0:
            batch.append(Message.tool("c1", text))
        elif shape == 1:
            args = json.dumps({key: text, "n": 1}, ensure_ascii=bool(len(text) % 2))
            batch.append(Message("assistant", "", (ToolCall("c1", "bash", args),)))
        elif shape == 2:
            batch.append(Message("user", "hello", meta={key: text}))
        else:
            batch.append(Message("assistant", text, extra={"nested": [{key: text}]}))
    found = Redactor(remember=False)._message_redactor._suspects(batch)
    assert found is not None
    suspects, _ = found
    for i, m in enumerate(batch):
        if Redactor(remember=False).redact_message(m) != m:
            assert i in suspects, m


def test_every_builtin_rule_has_a_planted_sample() -> None:
    found = {p.name for text in _PLANTED for p in BUILTIN_PATTERNS
             if p.may_match(text.lower()) and p.findings(text, text.lower())}
    assert {p.name for p in BUILTIN_PATTERNS} <= found


def test_texts_that_cannot_hold_a_secret_are_not_suspects() -> None:
    cleared = ["/testbed/django/contrib/admin/options.py", "sympy/core/tests/test_basic_operations.py",
               "ask the task runner about the disk", "Message 12 (pass 3) of the run", "the key of the dict",
               "see https://github.com/org/repo/issues/3 for the token refresh", "tokenizer_config.json",
               "src/contextfold/redact/_triggers.py:122"]
    assert _suspects(cleared) == set()
    assert _suspects(cleared, joined=True) == set()
    # (A password, a URL's, a base64 secret and a secret key's JSON value stay suspects.)
    kept = ["password=Xk9#mQ3horse", "postgres://app:Zq8Lm3Tw6p@db:5432/app",
            "c2stcHJvai1hYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3g=", '{"db_pass": "Xk9mQ3ho"}']
    assert _suspects(kept) == {0, 1, 2, 3}
