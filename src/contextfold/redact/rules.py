"""The built-in secret patterns: what a secret looks like, and what only looks like one.

Provider tokens with a fixed prefix (``ghp_``, ``sk-ant-``, ``AKIA``, ``hf_``, …) are recognised by their shape alone
(:mod:`~contextfold.redact._tokens`). Everything else — ``password=…``, URL credentials, ``mysql -p…``, a
``.netrc`` entry, a bare AWS secret, a base64-encoded key — needs its context (here and in
:mod:`~contextfold.redact._contexts`), and code and logs are full of text with the same context that holds no
secret: ``password: str``, ``password == x``, ``api_key=api_key``, ``api_key: ~``, ``${POSTGRES_PASSWORD:?set it}``,
a PEM marker inside a string literal, a git hash. Those patterns carry an ``accept`` check that looks at the match in
Python and rejects what is code rather than a value. Both corpora in ``tests/redact_corpus.py`` (secrets that must
go, code that must stay) are the specification; ``bench/bench_redact.py`` compares these rules with detect-secrets
on them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from ._contexts import CONTEXT_PATTERNS
from ._pattern import (
    SecretPattern,
    decoded_text,
    is_placeholder,
    looks_random,
    made_up,
    pattern,
    value_group,
)
from ._runs import ClassRuns
from ._tokens import TOKEN_PATTERNS

__all__ = ["BUILTIN_PATTERNS", "SECRET_KEY", "SecretPattern", "is_placeholder", "looks_random", "weak_value_ok"]


# -- assignments: password=…, "api_key": "…", DB_PASS=…, JWT_SECRET=… ----------------------------------------------
# Keys whose value is a secret whatever it looks like (no left boundary: PGPASSWORD, OPENAI_API_KEY, X-Auth-Token).
_STRONG_PASSWORD_KEYS = r"passw(?:or)?d|passphrase"
_STRONG_KEYS = (
    r"api[_-]?key|apikey|secret[_-]?(?:access[_-]?)?key|client[_-]?secret|access[_-]?token|auth[_-]?token"
    r"|refresh[_-]?token|id[_-]?token|private[_-]?key|access[_-]?key|account[_-]?key|shared[_-]?access[_-]?key"
    r"|signing[_-]?key|encryption[_-]?key|master[_-]?key|subscription[_-]?key|functions[_-]?key"
    r"|consumer[_-]?(?:key|secret)|app[_-]?secret"
)
# Short keys that are also parts of ordinary words (bypass, compass, tokenizer): a whole word or a name's last part
# (DB_PASS, MYSQL_PWD, JWT_SECRET, GITHUB_TOKEN, dbPass), and, in code-style lower case, a value that looks made up.
_WEAK_PASSWORD_KEYS = r"pass|pwd"
_WEAK_KEYS = r"secret|token"
_WORD_START = r"(?-i:(?<![A-Za-z0-9])|(?<=[a-z])(?=[A-Z]))"
# The separator: = : => := (not == or the start of a comparison). A JSON key inside a JSON string ends in \".
_SEPARATOR = r"(?:\\?[\"'])?[ \t]*(?P<sep>=>|:=|[:=](?!=))[ \t]*"
# A bare value runs to whitespace, a quote, a bracket, or a separator that starts the next field (`&page=2`,
# `;Database=app`, `, user=`, `&&`): a password's own & ; , stay with it (`Xk9#mQ&3horse`), and so do its < >
# (`Tr0ub4dor&3-horse<x>`) except where a closing tag starts (`password=abc</td>`). A quote between two of its
# characters is its own too (`password: Zq8"Lm3\Tw6pXv2` left `"Lm3\Tw6pXv2` in clear); one that closes or follows
# the value (`"password=abc"`, `?token=abc","next"`) still ends it.
_BARE = (r"(?:[^\s\"'`,;&()\[\]{}<>]|[&;,](?![A-Za-z_][\w.\-]*[=:]|&)(?=[^\s\"'`()\[\]{}<>])"
         r"|(?<=[^\s=:>\"'])[<>](?!/)|(?<=[^\s=:\"'`\\])[\"'`](?=[^\s\"'`,;&()\[\]{}<>]))")
# The value: quoted (the quotes stay; escaped quotes are part of it), in escaped quotes (JSON inside a JSON string),
# in ODBC braces (`PWD={a;b}`), or a bare run. Never a marker (redacting twice changes nothing) nor a call
# (`password=get_password()`).
_VALUE = (
    r"(?!\[REDACTED)(?:\"(?P<v1>(?:[^\"\\\n]|\\.)+|[^\"\n]+)\"|'(?P<v2>(?:[^'\\\n]|\\.)+|[^'\n]+)'"
    r"|\\\"(?P<v4>[^\"\\\n]+)\\\"|(?<==)\{(?P<v5>(?:[^{}\"\n]|\}\})+)\}(?=[;\s]|$)"
    rf"|(?P<v3>{_BARE}++)(?![(\[]))"
)
_TYPE_NAME = re.compile(
    r"str|bytes|int|float|bool|object|dict|list|tuple|set|Any|string|number|boolean|unknown|any|[A-Z][a-z]+(?:[A-Z][a-z]+)*"
)
# A name, not a value: an identifier, a kebab-case name, an RST/Ruby symbol (`:circle-token`).
_NAME_LIKE = re.compile(r"[:@]?[A-Za-z_][A-Za-z0-9_\-]*")
# An absolute path (`PWD=/home/me`, the shell's working directory): not a secret.
_PATH = re.compile(r"(?:/|~/|[A-Za-z]:\\)[^\s]*")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_LOWER_IDENTIFIER = re.compile(r"[a-z_]+")
# Words joined by colons (`check_token:WARNING:expired`, a log line's fields): names, not a value.
_COLON_WORDS = re.compile(r"[A-Za-z]+(?::[A-Za-z]+)+")
# The words that name a secret in a variable's name.
_SECRET_WORDS = frozenset({
    "pass", "passwd", "password", "passwords", "passphrase", "passcode", "pwd", "key", "keys", "apikey",
    "token", "tokens", "secret", "secrets", "cred", "creds", "credential", "credentials", "auth", "authorization",
})
_DIGIT_RUN = re.compile(r"\d{3}")
# sha256Key and utf8Str switch twice between letters and digits; Key8fG2hJ9kL six times.
_LETTER_DIGIT_SWITCH = re.compile(r"(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])")
_WORD_SPLIT = re.compile(r"[_\-:@]+|(?<=[a-z0-9])(?=[A-Z])")
_NAME_WORD = re.compile(r"[A-Z]?[a-z]*[0-9]*|[A-Z]+[0-9]*|[0-9]+")
_CODE_FOLLOWERS = ",)}]"
_REFERENCE = re.compile(r"\$[A-Za-z_{(]")
# Text after a `key: value` that makes it prose (a docstring's `password: the user's password`), not a setting.
_PROSE_AFTER = re.compile(r"[ \t]+[A-Za-z]")
# Shell parameter expansion around the key: `${POSTGRES_PASSWORD:?set it}`, `${DB_PASS:-postgres}`.
_IN_EXPANSION = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\Z")


def _names_a_secret(identifier: str) -> bool:
    """Whether one of the words of ``identifier`` (snake_case or camelCase) is a secret's name: a variable.

    The word must be the name itself (``new_password``, ``jwtSecret``, ``API_KEY_2``), not merely start like it:
    ``keyaaaaaaaaa``, ``TOKEN0000000`` and ``amPWdmAoh4Ds`` are values (a property test planted the second as a
    password). Of 200,000 random 12-character passwords, 7 were kept as names when a prefix was enough, 2 now: both
    hold a secret's name as a camelCase word (``anAiPwdUaKmc``), which no rule can tell from a variable.
    """
    if _DIGIT_RUN.search(identifier) or len(_LETTER_DIGIT_SWITCH.findall(identifier)) >= 4:
        return False  # names do not carry three digits in a row, nor switch between letters and digits this often
    words = _WORD_SPLIT.sub(" ", identifier).split()
    if not all(_NAME_WORD.fullmatch(word) for word in words):
        return False  # a word of a name is lower case, capitalized or capitals: `SECREtA00` is made up
    return any(word.lower() in _SECRET_WORDS for word in words)


def _dotted_name(value: str) -> bool:
    """``self.password``, ``settings.API_KEY``: a dotted name whose parts read as names (``s.Ab12Cd…`` does not)."""
    return bool(_DOTTED.fullmatch(value)) and not any(
        _DIGIT_RUN.search(part) or len(_LETTER_DIGIT_SWITCH.findall(part)) >= 4 for part in value.split("."))


def weak_value_ok(key: str, value: str) -> bool:
    """For a short key (token, secret, pass, pwd): a lower-case (code) key needs a value that looks made up."""
    return key.isupper() or made_up(value)


def _standalone(text: str, start: int) -> bool:
    """Whether the key at ``start`` is a word of its own (not the last part of a name such as ``DB_PASS``).

    An escaped line break or tab before it (a backslash and ``n`` before ``PASS:`` in a JSON string) counts as a
    boundary.
    """
    if start == 0 or text[start - 2 : start] in ("\\n", "\\r", "\\t"):
        return True
    return not (text[start - 1].isalnum() or text[start - 1] in "_-.")


def _accept_assignment(weak: bool) -> Callable[[re.Match[str]], bool]:
    def accept(m: re.Match[str]) -> bool:
        found = value_group(m)
        if found is None:
            return False
        value, quoted, end = found
        key, sep = m.group("key"), m.group("sep")
        text = m.string
        if is_placeholder(value, maybe_tag=not quoted) or \
                _IN_EXPANSION.search(text, max(0, m.start() - 256), m.start()):
            return False
        if m.group("v5") is not None and (_NAME_LIKE.fullmatch(value) or not made_up(value)):
            return False  # password={password}: a format field, not ODBC's braces
        if quoted:
            # `input("Password: ") or x`: the quotes found are the end of one string and the start of another.
            if any(c.isspace() for c in value) and any(c in "()" for c in value):
                return False
        else:
            if _REFERENCE.match(text, m.start("v3")):  # $API_KEY, ${API_KEY}, $(cat key): a reference
                return False
            after = text[end : end + 1]
            if _dotted_name(value):  # password=self.password, api_key=settings.API_KEY
                return False
            if _NAME_LIKE.fullmatch(value) and _names_a_secret(value):
                return False  # api_key=api_key, password=new_password, token=TOKEN, secret=jwtSecret
            if sep != "=" and sep != "=>" and _TYPE_NAME.fullmatch(value):
                return False  # password: str, token: Token
            spaced = text[m.start("sep") - 1 : m.start("sep")] in " \t"
            if _LOWER_IDENTIFIER.fullmatch(value) and ((after != "" and after in _CODE_FOLLOWERS) or spaced):
                return False  # login(password=pw), password = pw
            if sep == ":" and value.isalpha() and value.islower() and _PROSE_AFTER.match(text, end):
                return False  # Args: password: the password to log in with
            if _COLON_WORDS.fullmatch(value):
                return False  # check_token:WARNING:expired
            if weak and sep == ":" and key in ("PASS", "Pass") and _standalone(text, m.start("key")):
                return False  # a test's status line (PASS: Content-Length header is absent), not DB_PASS: x
        return not weak or (weak_value_ok(key, value) and not _PATH.fullmatch(value))

    return accept


def _assignment(name: str, keys: str, *triggers: str, weak: bool, needs: str | None = None) -> SecretPattern:
    start = _WORD_START if weak else ""
    regex = re.compile(rf"(?i){start}(?P<key>{keys}){_SEPARATOR}{_VALUE}")
    # Keys that can be followed by a separator: a superset of where regex matches, found fast.
    lowered = keys.replace("(?-i:", "(?:").lower()
    locate = re.compile(rf"(?:{lowered})(?:\\?[\"'])?[ \t]*[:=]")
    return SecretPattern(name, regex, tuple(triggers), _accept_assignment(weak), locate,
                         re.compile(needs) if needs is not None else None)


# -- URL credentials ----------------------------------------------------------------------------------------------
# A password may hold @ / : (unescaped, as people write them): it runs to the last @ that a host name follows.
_URL_CREDENTIALS = (
    r"://(?<=[A-Za-z0-9+.\-]://)(?P<user>[^\s:/@?#\"'<>]*):(?P<v>[^\s\"'<>]+)@"
    r"(?=(?:[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*|\[[0-9A-Fa-f:.]+\])(?::\d+)?(?:[/?#\s\"'<>)\],;]|$))"
)
_PORT_THEN_PATH = re.compile(r"\d{1,5}(?:/.*)?")


def _accept_url_credentials(m: re.Match[str]) -> bool:
    # http://localhost:3000/@vite/client: a port and a path with an @ in it, no credentials.
    return not _PORT_THEN_PATH.fullmatch(m.group("v")) and not is_placeholder(m.group("v"))


# -- bare secrets: an AWS secret key alone, a base64-encoded secret ----------------------------------------------------
# An AWS secret access key is 40 base64 characters and nothing else tells it apart; it has to look random, and not
# decode to readable text (base64 test data of the same length does).
_AWS_SECRET_CHARS = 40
# Base64 runs decoded and searched for an encoded secret: long enough to hold a token, short enough to stay cheap.
_ENCODED_MIN_CHARS = 24
_ENCODED_MAX_CHARS = 65_536
_BASE64_RUN = (
    rf"[A-Za-z0-9+/](?<![A-Za-z0-9+/=_\-].)[A-Za-z0-9+/]{{{_ENCODED_MIN_CHARS - 1},{_ENCODED_MAX_CHARS}}}={{0,2}}"
    r"(?![A-Za-z0-9+/=_\-])"
)


def _accept_base64_run(m: re.Match[str]) -> bool | str:
    """A bare AWS secret key, or base64 whose decoded text holds a secret (``encoded_secret``)."""
    run = m.group()
    decoded = decoded_text(run.rstrip("="))
    if decoded is None:
        return len(run) == _AWS_SECRET_CHARS and run.count("/") <= 3 and looks_random(run) and "aws_secret_key"
    lowered = decoded.lower()
    return any(p.may_match(lowered) and p.matches(decoded, lowered) for p in _DIRECT_PATTERNS)


# A run whose first two characters decode to a byte no UTF-8 text starts with (a continuation byte, C0, C1, F5-FF)
# does not decode to text, whatever follows: a run opening with "/" (a path) or "g"-"v" is one.
_BASE64_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_NOT_TEXT_OPENINGS = frozenset(
    a + b for i, a in enumerate(_BASE64_ALPHABET) for j, b in enumerate(_BASE64_ALPHABET)
    if not ((i << 2) | (j >> 4)) < 0x80 and not 0xC2 <= ((i << 2) | (j >> 4)) <= 0xF4
)


# The runs _rejects_base64_run turns down by their first character and length alone, passed over where the runs are
# found (a path opens with "/": 94% of the runs in the lm32b loop's stored outputs, issue 22): a first character
# every opening pair of which is in _NOT_TEXT_OPENINGS, and a length that the "=" padding (two at most) cannot bring
# to an AWS key's.
_PASSED_OVER_RUNS = (
    frozenset(ord(a) for a in _BASE64_ALPHABET if all(a + b in _NOT_TEXT_OPENINGS for b in _BASE64_ALPHABET)),
    frozenset(range(_AWS_SECRET_CHARS - 2, _AWS_SECRET_CHARS + 1)),
)


def _rejects_base64_run(text: str, start: int, end: int) -> bool:
    """Whether :func:`_accept_base64_run` turns down a match at this run: no text when decoded, not an AWS key's length.

    A match there is the run and the ``=`` after it (two at most); it is decoded without them.
    """
    if text[start : start + 2] not in _NOT_TEXT_OPENINGS:
        return False
    padding = 2 if text.startswith("==", end) else 1 if text.startswith("=", end) else 0
    return end - start + padding != _AWS_SECRET_CHARS


# -- the table ------------------------------------------------------------------------------------------------------
# Order matters only to break ties between findings of the same span: the more specific kind wins the name.
# Triggers skip a pattern when its text cannot be present.
_DIRECT_PATTERNS: tuple[SecretPattern, ...] = (
    *TOKEN_PATTERNS,
    pattern(
        "aws_secret_key",
        r"(?i)secret_?(?:access_?)?key[\"']?[ \t]*[:=][ \t]*[\"']?(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        "secret",
    ),
    pattern("jwt", r"eyJ(?<![A-Za-z0-9_\-]eyJ)[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}", "eyj"),
    *CONTEXT_PATTERNS,
    # (What the bulk prefilter looks for in a text holding "://": the user, a colon, the password and an "@".)
    pattern("url_credentials", _URL_CREDENTIALS, "://", accept=_accept_url_credentials,
            needs=r"://[^\s:/@?#\"'<>]*:[^\s\"'<>]+@"),
    _assignment("password", _STRONG_PASSWORD_KEYS, "passw", "passphrase", weak=False),
    _assignment("password", _WEAK_PASSWORD_KEYS, "pass", "pwd", weak=True),
    _assignment("api_key", _STRONG_KEYS, "key", "secret", "token", weak=False),
    _assignment("api_key", _WEAK_KEYS, "secret", "token", weak=True),
    # A personal access token (AZURE_DEVOPS_EXT_PAT=…), only in capitals: `pat = re.compile(...)` is a pattern.
    # (No trigger: "pat" is in every path; bulk redaction looks for the key before a separator.)
    _assignment("api_key", r"(?-i:PAT)", weak=True, needs=r"pat(?:\\?[\"'])?[ \t]*[:=]"),
)

BUILTIN_PATTERNS: tuple[SecretPattern, ...] = (
    *_DIRECT_PATTERNS,
    # Last: only for runs no other pattern explains (an exact tie goes to the earlier pattern).
    # (Every match is a run of 24+ base64 characters, which lower-casing keeps one for one.)
    pattern("encoded_secret", _BASE64_RUN, accept=_accept_base64_run,
            needs=rf"[a-z0-9+/]{{{_ENCODED_MIN_CHARS},}}",
            # (A match starts a run of base64 characters: its look-behind refuses one inside a run.)
            starts=ClassRuns.of_chars("A-Za-z0-9+/", _ENCODED_MIN_CHARS, _PASSED_OVER_RUNS),
            rejects=_rejects_base64_run),
)

# A mapping key whose string value is a secret: `password`, `db_password`, `OPENAI_API_KEY`, `client-secret`, and
# the short ones as a name's last part (`db_pass`, `GITHUB_TOKEN`, `jwt_secret`).
SECRET_KEY = re.compile(
    rf"(?i)(?:.*[_\-.])?(?P<strong>(?P<pw>{_STRONG_PASSWORD_KEYS})|{_STRONG_KEYS})"
    rf"|(?:.*[_\-.]|.*(?-i:[a-z](?=[A-Z])))?(?P<weak>(?P<wpw>{_WEAK_PASSWORD_KEYS})|{_WEAK_KEYS})"
)
