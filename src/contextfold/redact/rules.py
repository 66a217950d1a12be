"""The built-in secret patterns: what a secret looks like, and what only looks like one.

Two kinds of rule live here. Provider tokens with a fixed prefix (``ghp_``, ``sk-ant-``, ``AKIA``, ``hf_``, …) are
recognised by their shape alone. Everything else — ``password=…``, URL credentials, ``mysql -p…``, a bare AWS
secret, a base64-encoded key — needs its context, and code and logs are full of text with the same context that
holds no secret: ``password: str``, ``password == x``, ``api_key=api_key``, ``api_key: ~``, a PEM marker inside a
string literal, a git hash. Those patterns carry an ``accept`` check that looks at the match in Python and rejects
what is code rather than a value. Both corpora in ``tests/redact_corpus.py`` (secrets that must go, code that must
stay) are the specification; ``bench/bench_redact.py`` compares these rules with detect-secrets on them.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["BUILTIN_PATTERNS", "SECRET_KEY", "SecretPattern", "is_placeholder", "looks_random", "weak_value_ok"]


@dataclass(frozen=True, slots=True)
class SecretPattern:
    """One kind of secret.

    The secret is the named group ``v`` (or the first matching group whose name starts with ``v``), else the whole
    match; only that span is replaced by ``[REDACTED:<name>]``. ``accept``, when given, sees every match and may
    reject it (False: code that has a secret's context but no secret) or name what it found (a str: one regex
    that finds several kinds).
    """

    name: str
    regex: re.Pattern[str]
    # Lower-case substrings of which at least one is in every match; none in the text means no need to search.
    triggers: tuple[str, ...] = ()
    accept: Callable[[re.Match[str]], bool | str] | None = None
    # A case-sensitive pattern run over the lower-cased text whose match starts are where ``regex`` may match:
    # a case-insensitive regex with a look-behind cannot use the engine's literal search and is ten times slower.
    locate: re.Pattern[str] | None = None
    # For a pattern without triggers: a pattern over the lower-cased text that finds something wherever ``regex``
    # can match (a superset). Bulk redaction skips a text in which neither a trigger nor this is found; a pattern
    # with neither turns that prefilter off.
    needs: re.Pattern[str] | None = None

    @classmethod
    def compile(cls, name: str, pattern: str, flags: int = 0) -> SecretPattern:
        """A pattern from regex source (raises ``re.error`` for invalid syntax)."""
        return cls(name, re.compile(pattern, flags))

    def may_match(self, lowered: str) -> bool:
        """False only when no trigger occurs in ``lowered`` (the text, lower-cased)."""
        return not self.triggers or any(t in lowered for t in self.triggers)

    def matches(self, text: str, lowered: str | None = None) -> list[re.Match[str]]:
        """Every accepted match in ``text`` (``lowered``: ``text.lower()``, when the caller has it)."""
        return [m for m, _ in self.findings(text, lowered)]

    def findings(self, text: str, lowered: str | None = None) -> list[tuple[re.Match[str], str]]:
        """Every accepted match in ``text`` with the name of what it found."""
        found: list[re.Match[str]]
        if self.locate is not None:
            lowered = text.lower() if lowered is None else lowered
            if len(lowered) == len(text):  # (lower-casing can change the length of some non-ASCII text)
                candidates = (self.regex.match(text, at.start()) for at in self.locate.finditer(lowered))
                found = [m for m in candidates if m is not None]
            else:
                found = list(self.regex.finditer(text))
        else:
            found = list(self.regex.finditer(text))
        if self.accept is None:
            return [(m, self.name) for m in found]
        named = ((m, self.accept(m)) for m in found)
        return [(m, verdict if isinstance(verdict, str) else self.name) for m, verdict in named if verdict]


def _p(
    name: str, pattern: str, *triggers: str, accept: Callable[[re.Match[str]], bool | str] | None = None,
    needs: str | None = None,
) -> SecretPattern:
    return SecretPattern(name, re.compile(pattern), tuple(triggers), accept,
                         needs=re.compile(needs) if needs is not None else None)


# -- what random looks like ----------------------------------------------------------------------------------------
# Bits per character above which a string is taken for random: 40 random base64 characters score about 4.9,
# English words and paths of the same length 3.5-4.1.
_RANDOM_ENTROPY_BITS = 4.3


def _entropy(text: str) -> float:
    counts = Counter(text)
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def looks_random(text: str) -> bool:
    """Whether ``text`` mixes upper case, lower case and digits with the entropy of random characters."""
    return (
        any(c.isupper() for c in text)
        and any(c.islower() for c in text)
        and any(c.isdigit() for c in text)
        and _entropy(text) >= _RANDOM_ENTROPY_BITS
    )


# Decoded bytes that are mostly printable text: base64 of a document, not of key material.
_PRINTABLE_SHARE = 0.95
# Base64 runs decoded and searched for an encoded secret: long enough to hold a token, short enough to stay cheap.
_ENCODED_MIN_CHARS = 24
_ENCODED_MAX_CHARS = 65_536


def _decoded_text(run: str) -> str | None:
    """``run`` base64-decoded, when that gives readable UTF-8 text (else None)."""
    padded = run + "=" * (-len(run) % 4)
    try:
        raw = base64.b64decode(padded, validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    if not text:
        return None
    printable = sum(1 for c in text if c.isprintable() or c in "\r\n\t")
    return text if printable >= _PRINTABLE_SHARE * len(text) else None


# -- assignments: password=…, "api_key": "…", DB_PASS=…, JWT_SECRET=… ----------------------------------------------
# Keys whose value is a secret whatever it looks like (no left boundary: PGPASSWORD, OPENAI_API_KEY, X-Auth-Token).
_STRONG_PASSWORD_KEYS = r"passw(?:or)?d|passphrase"
_STRONG_KEYS = (
    r"api[_-]?key|apikey|secret[_-]?(?:access[_-]?)?key|client[_-]?secret|access[_-]?token|auth[_-]?token"
    r"|refresh[_-]?token|id[_-]?token|private[_-]?key|access[_-]?key|account[_-]?key|shared[_-]?access[_-]?key"
    r"|signing[_-]?key|encryption[_-]?key|master[_-]?key"
)
# Short keys that are also parts of ordinary words (bypass, compass, tokenizer): a whole word or a name's last part
# (DB_PASS, MYSQL_PWD, JWT_SECRET, GITHUB_TOKEN, dbPass), and, in code-style lower case, a value that looks made up.
_WEAK_PASSWORD_KEYS = r"pass|pwd"
_WEAK_KEYS = r"secret|token"
_WORD_START = r"(?-i:(?<![A-Za-z0-9])|(?<=[a-z])(?=[A-Z]))"
# The separator: = : => := (not == or the start of a comparison).
_SEPARATOR = r"[\"']?[ \t]*(?P<sep>=>|:=|[:=](?!=))[ \t]*"
# The value: quoted (the quotes stay), or a bare run up to whitespace, a separator or a bracket (`f(password=x)`,
# `?token=x&page=2`). Never a marker (redacting twice changes nothing) nor a call (`password=get_password()`).
_VALUE = (
    r"(?!\[REDACTED)(?:\"(?P<v1>[^\"\n]+)\"|'(?P<v2>[^'\n]+)'"
    r"|(?P<v3>[^\s\"'`,;&()\[\]{}<>]++)(?![(\[]))"
)
_NULL_LIKE = re.compile(r"(?i)none|null|nil|true|false|undefined|~|-|\*+|x{3,}|\.{3}|…")
# Placeholders and references, not values: <your-key>, [PAD], ${API_KEY}, $API_KEY, %s, %(key)s, {key}, {{ key }}.
_PLACEHOLDER = re.compile(r"<[^<>]*>|\[[^\[\]]*\]|\$\{[^}]*\}?|\$[A-Za-z_]\w*|%(?:\(\w+\))?[sdrif]|\{\{?[^{}]*\}?\}?")
# A type in an annotation (`password: str`, `token: Optional[str]`, `api_key: SecretStr`, TypeScript `string`).
_TYPE_NAME = re.compile(
    r"str|bytes|int|float|bool|object|dict|list|tuple|set|Any|string|number|boolean|unknown|any|[A-Z][a-z]+(?:[A-Z][a-z]+)*"
)
# A name, not a value: an identifier, a kebab-case name, an RST/Ruby symbol (`:circle-token`).
_NAME_LIKE = re.compile(r"[:@]?[A-Za-z_][A-Za-z0-9_\-]*")
# An absolute path (`PWD=/home/me`, the shell's working directory): not a secret.
_PATH = re.compile(r"(?:/|~/|[A-Za-z]:\\)[^\s]*")
_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_LOWER_IDENTIFIER = re.compile(r"[a-z_]+")
# The words that name a secret in a variable's name.
_SECRET_WORDS = frozenset({
    "pass", "passwd", "password", "passwords", "passphrase", "passcode", "pwd", "key", "keys", "apikey",
    "token", "tokens", "secret", "secrets", "cred", "creds", "credential", "credentials", "auth", "authorization",
})
_DIGIT_RUN = re.compile(r"\d{3}")
# sha256Key and utf8Str switch twice between letters and digits; Key8fG2hJ9kL six times.
_LETTER_DIGIT_SWITCH = re.compile(r"(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])")
_WORD_SPLIT = re.compile(r"[_\-:@]+|(?<=[a-z0-9])(?=[A-Z])")
_CODE_FOLLOWERS = ",)}]"
_REFERENCE = re.compile(r"\$[A-Za-z_{(]")
# Text after a `key: value` that makes it prose (a docstring's `password: the user's password`), not a setting.
_PROSE_AFTER = re.compile(r"[ \t]+[A-Za-z]")


def _names_a_secret(identifier: str) -> bool:
    """Whether one of the words of ``identifier`` (snake_case or camelCase) is a secret's name: a variable.

    The word must be the name itself (``new_password``, ``jwtSecret``, ``API_KEY_2``), not merely start like it:
    ``keyaaaaaaaaa``, ``TOKEN0000000`` and ``amPWdmAoh4Ds`` are values (a property test planted the second as a
    password). Of 200,000 random 12-character passwords, 7 were kept as names when a prefix was enough, 2 now: both
    hold a secret's name as a camelCase word (``anAiPwdUaKmc``), which no rule can tell from a variable.
    """
    if _DIGIT_RUN.search(identifier) or len(_LETTER_DIGIT_SWITCH.findall(identifier)) >= 4:
        return False  # names do not carry three digits in a row, nor switch between letters and digits this often
    words = _WORD_SPLIT.sub(" ", identifier).lower().split()
    return any(word in _SECRET_WORDS for word in words)


def _value_group(m: re.Match[str]) -> tuple[str, bool, int] | None:
    groups = m.re.groupindex
    for name, quoted in (("v1", True), ("v2", True), ("v3", False)):
        value = m.group(name) if name in groups else None
        if value is not None:
            return value, quoted, m.end(name)
    return None


def is_placeholder(value: str) -> bool:
    """Whether a secret-keyed value holds no secret: empty, null-like, a placeholder or a variable reference."""
    stripped = value.strip()
    return not stripped or bool(_NULL_LIKE.fullmatch(stripped) or _PLACEHOLDER.fullmatch(stripped))


def _made_up(value: str) -> bool:
    """At least two of lower case, upper case, digits, symbols, and not only a number."""
    classes = (
        any(c.islower() for c in value),
        any(c.isupper() for c in value),
        any(c.isdigit() for c in value),
        any(not c.isalnum() for c in value),
    )
    return sum(classes) >= 2 and not value.replace(".", "").replace("-", "").isdigit()


def weak_value_ok(key: str, value: str) -> bool:
    """For a short key (token, secret, pass, pwd): a lower-case (code) key needs a value that looks made up."""
    return key.isupper() or _made_up(value)


def _accept_assignment(weak: bool) -> Callable[[re.Match[str]], bool]:
    def accept(m: re.Match[str]) -> bool:
        found = _value_group(m)
        if found is None:
            return False
        value, quoted, end = found
        key, sep = m.group("key"), m.group("sep")
        if is_placeholder(value):
            return False
        text = m.string
        if quoted:
            # `input("Password: ") or x`: the quotes found are the end of one string and the start of another.
            if any(c.isspace() for c in value) and any(c in "()" for c in value):
                return False
        else:
            if _REFERENCE.match(text, m.start("v3")):  # $API_KEY, ${API_KEY}, $(cat key): a reference
                return False
            after = text[end : end + 1]
            if _DOTTED.fullmatch(value):  # password=self.password, api_key=settings.API_KEY
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
        return not weak or (weak_value_ok(key, value) and not _PATH.fullmatch(value))

    return accept


def _assignment(name: str, keys: str, *triggers: str, weak: bool) -> SecretPattern:
    start = _WORD_START if weak else ""
    regex = re.compile(rf"(?i){start}(?P<key>{keys}){_SEPARATOR}{_VALUE}")
    # Keys that can be followed by a separator: a superset of where regex matches, found fast.
    locate = re.compile(rf"(?:{keys})[\"']?[ \t]*[:=]")
    return SecretPattern(name, regex, tuple(triggers), _accept_assignment(weak), locate)


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


# -- private keys -------------------------------------------------------------------------------------------------
# The lines contextfold's own tool-output view (cache._view.render_view) puts after the head it keeps are not base64,
# so a key block never runs across them (the ref they name would be redacted and remembered as a secret).
_PEM_BEGIN = r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
# Between the lines of a key: a newline, an escaped newline (the key inside JSON, once or twice escaped) or spaces
# (a key pasted into one line).
_PEM_BREAK = r"(?:\r?\n|\\r\\n|\\n|\\\\n|[ \t]+)"
_PEM_HEADER = r"(?:[A-Za-z][A-Za-z\-]*:[^\n\\]*" + _PEM_BREAK + r")"
# A real block: BEGIN, optional headers (Proc-Type, DEK-Info), then base64 — not a marker inside a string literal
# (`"-----BEGIN PRIVATE KEY-----"` in source). A block cut short (a truncated tool output) ends with its base64.
_PEM_BLOCK = (
    rf"{_PEM_BEGIN}{_PEM_BREAK}{_PEM_HEADER}*{_PEM_BREAK}?[A-Za-z0-9+/=]{{16,}}"
    rf"(?:{_PEM_BREAK}?[A-Za-z0-9+/=]+)*(?:{_PEM_BREAK}?{_PEM_END})?"
)


# -- commands with a password on the command line ---------------------------------------------------------------------
_MYSQL_PASSWORD = (
    r"\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlsh|mariadb|mariadb-dump)\b[^\n|;&]*?[ \t]-p"
    r"(?:'(?P<v1>[^'\n]+)'|\"(?P<v2>[^\"\n]+)\"|(?P<v3>[^\s'\"\-][^\s'\"]*))"
)
_CURL_USER = r"\bcurl\b[^\n|;&]*?[ \t](?:-u|--user)[ =]?['\"]?[^\s:'\"]*:(?P<v>[^\s'\"]+)"
_SSHPASS = r"\bsshpass\b[ \t]+-p[ \t]*['\"]?(?P<v>[^\s'\"]+)"


def _accept_command_password(m: re.Match[str]) -> bool:
    found = _value_group(m)
    value = found[0] if found is not None else m.group("v")
    return not is_placeholder(value)


# -- bare secrets: an AWS secret key alone, a base64-encoded secret ----------------------------------------------------
# An AWS secret access key is 40 base64 characters and nothing else tells it apart; it has to look random, and not
# decode to readable text (base64 test data of the same length does).
_AWS_SECRET_CHARS = 40
_BASE64_RUN = (
    rf"[A-Za-z0-9+/](?<![A-Za-z0-9+/=_\-].)[A-Za-z0-9+/]{{{_ENCODED_MIN_CHARS - 1},{_ENCODED_MAX_CHARS}}}={{0,2}}"
    r"(?![A-Za-z0-9+/=_\-])"
)


def _accept_base64_run(m: re.Match[str]) -> bool | str:
    """A bare AWS secret key, or base64 whose decoded text holds a secret (``encoded_secret``)."""
    run = m.group()
    decoded = _decoded_text(run.rstrip("="))
    if decoded is None:
        return len(run) == _AWS_SECRET_CHARS and looks_random(run) and run.count("/") <= 3 and "aws_secret_key"
    lowered = decoded.lower()
    return any(p.may_match(lowered) and p.matches(decoded, lowered) for p in _DIRECT_PATTERNS)


# -- the table ------------------------------------------------------------------------------------------------------
_TOKEN = r"A-Za-z0-9_\-"


def _prefixed(
    name: str, prefix: str, rest: str, *triggers: str, accept: Callable[[re.Match[str]], bool | str] | None = None
) -> SecretPattern:
    """A token starting with ``prefix`` (a fixed-width regex), not inside a longer token.

    The prefix comes first and the boundary check after it, so that the engine can search for the prefix's literal.
    """
    return _p(name, rf"{prefix}(?<![{_TOKEN}]{prefix}){rest}(?![{_TOKEN}])", *triggers, accept=accept)


def _accept_mixed_case(m: re.Match[str]) -> bool:
    body = m.group()[3:]
    return any(c.isupper() for c in body) and any(c.islower() for c in body)


# Order matters only to break ties between findings of the same span: the more specific kind wins the name.
# Triggers skip a pattern when its text cannot be present.
_DIRECT_PATTERNS: tuple[SecretPattern, ...] = (
    _p("private_key", _PEM_BLOCK, "-----begin"),
    # The end of a block whose beginning is gone (a truncated output keeps head and tail lines): the key lines right
    # before the END line are still secret.
    _p("private_key", rf"(?m)^(?:[A-Za-z0-9+/=]{{16,}}\r?\n)+{_PEM_END}", "-----end"),
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
    _prefixed("github_token", r"gh[pousr]_", r"[A-Za-z0-9]{36,}", "ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    _prefixed("github_token", r"github_pat_", r"[A-Za-z0-9_]{22,}", "github_pat_"),
    _prefixed("gitlab_token", r"gl(?:pat|ptt|cbt|oas)-", r"[A-Za-z0-9_\-]{20,}", "glpat-", "glptt-", "glcbt-",
              "gloas-"),
    _prefixed("gitlab_token", r"gl[dr]t-", r"[A-Za-z0-9_\-]{20,}", "gldt-", "glrt-"),
    _p("slack_token", rf"xox(?<![{_TOKEN}]xox)[abposre]-[A-Za-z0-9\-]{{10,}}", "xox"),
    _prefixed("slack_token", r"xapp-", r"\d-[A-Za-z0-9\-]{10,}", "xapp-"),
    _p(
        "slack_webhook",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<v>[A-Za-z0-9_/\-]{20,})",
        "hooks.slack.com",
    ),
    _p("discord_webhook", r"discord(?:app)?\.com/api/webhooks/\d+/(?P<v>[A-Za-z0-9_\-]{30,})", "discord"),
    _prefixed("google_api_key", r"AIza", r"[0-9A-Za-z_\-]{35}", "aiza"),
    _prefixed("google_oauth", r"GOCSPX-", r"[A-Za-z0-9_\-]{28}", "gocspx-"),
    _prefixed("google_oauth", r"ya29\.", r"[A-Za-z0-9_\-]{20,}", "ya29."),
    _prefixed("stripe_key", r"[sr]k_(?:live|test)_", r"[A-Za-z0-9]{16,}", "_live_", "_test_"),
    _prefixed("stripe_key", r"whsec_", r"[A-Za-z0-9]{24,}", "whsec_"),
    _prefixed("huggingface_token", r"hf_", r"[A-Za-z0-9]{30,}", "hf_", accept=_accept_mixed_case),
    _prefixed("npm_token", r"npm_", r"[A-Za-z0-9]{36}", "npm_"),
    _prefixed("pypi_token", r"pypi-AgE", r"[A-Za-z0-9_\-]{50,}", "pypi-"),
    _prefixed("sendgrid_key", r"SG\.", r"[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}", "sg."),
    _prefixed("twilio_key", r"SK", r"[0-9a-fA-F]{32}", "sk"),
    _p(
        "azure_client_secret",
        r"Q~(?<=[A-Za-z0-9_.\-]{3}[0-9]Q~)(?<![A-Za-z0-9_.~\-]....Q~)[A-Za-z0-9_.~\-]{31,34}(?![A-Za-z0-9_.~\-])",
        "q~",
    ),
    _p("azure_sas_signature", r"[?&]sig=(?P<v>[A-Za-z0-9%+/=]{20,})", "sig="),
    _prefixed("digitalocean_token", r"do[por]_v1_", r"[a-f0-9]{64}", "_v1_"),
    _prefixed("shopify_token", r"shp(?:at|ss|ca|pa)_", r"[a-fA-F0-9]{32}", "shp"),
    _prefixed("mailgun_key", r"key-", r"[0-9a-f]{32}", "key-"),
    _prefixed("groq_key", r"gsk_", r"[A-Za-z0-9]{48,}", "gsk_"),
    _prefixed("replicate_token", r"r8_", r"[A-Za-z0-9]{37}", "r8_"),
    _prefixed("xai_key", r"xai-", r"[A-Za-z0-9]{70,}", "xai-"),
    _prefixed("perplexity_key", r"pplx-", r"[A-Za-z0-9]{40,}", "pplx-"),
    _prefixed("databricks_token", r"dapi", r"[a-f0-9]{32}(?:-\d)?", "dapi"),
    _prefixed("atlassian_token", r"ATATT3", r"[A-Za-z0-9_\-=]{100,}", "atatt3"),
    _prefixed("vault_token", r"hv[sb]\.", r"[A-Za-z0-9_\-]{90,}", "hvs.", "hvb."),
    _p("telegram_bot_token", r"(?<![0-9])[0-9]{8,10}:AA[A-Za-z0-9_\-]{33}(?![A-Za-z0-9_\-])", ":aa"),
    _p("jwt", rf"eyJ(?<![{_TOKEN}]eyJ)[A-Za-z0-9_\-]{{5,}}\.eyJ[A-Za-z0-9_\-]{{5,}}\.[A-Za-z0-9_\-]{{5,}}", "eyj"),
    # A capital "Bearer" or an Authorization header: lower-case prose ("a bearer of news") is not a header.
    _p("bearer_token", r"Bearer(?<![A-Za-z0-9_]Bearer)[ \t]+(?P<v>[A-Za-z0-9\-._~+/]{16,}=*)", "bearer"),
    _p("bearer_token", r"(?i)authorization:[ \t]*bearer[ \t]+(?P<v>[A-Za-z0-9\-._~+/]{16,}=*)", "authorization"),
    _p(
        "basic_auth",
        r"(?i)authorization[\"']?[ \t]*[:=][ \t]*[\"']?basic[ \t]+(?P<v>[A-Za-z0-9+/]{8,}={0,2})",
        "authorization",
    ),
    _p("url_credentials", _URL_CREDENTIALS, "://", accept=_accept_url_credentials),
    _p("password", _MYSQL_PASSWORD, "mysql", "mariadb", accept=_accept_command_password),
    _p("password", _CURL_USER, "curl", accept=_accept_command_password),
    _p("password", _SSHPASS, "sshpass", accept=_accept_command_password),
    _assignment("password", _STRONG_PASSWORD_KEYS, "passw", "passphrase", weak=False),
    _assignment("password", _WEAK_PASSWORD_KEYS, "pass", "pwd", weak=True),
    _assignment("api_key", _STRONG_KEYS, "key", "secret", "token", weak=False),
    _assignment("api_key", _WEAK_KEYS, "secret", "token", weak=True),
)

BUILTIN_PATTERNS: tuple[SecretPattern, ...] = (
    *_DIRECT_PATTERNS,
    # Last: only for runs no other pattern explains (an exact tie goes to the earlier pattern).
    # (Every match is a run of 24+ base64 characters, which lower-casing keeps one for one.)
    _p("encoded_secret", _BASE64_RUN, accept=_accept_base64_run,
       needs=rf"[a-z0-9+/]{{{_ENCODED_MIN_CHARS},}}"),
)

# A mapping key whose string value is a secret: `password`, `db_password`, `OPENAI_API_KEY`, `client-secret`, and
# the short ones as a name's last part (`db_pass`, `GITHUB_TOKEN`, `jwt_secret`).
SECRET_KEY = re.compile(
    rf"(?i)(?:.*[_\-.])?(?P<strong>(?P<pw>{_STRONG_PASSWORD_KEYS})|{_STRONG_KEYS})"
    rf"|(?:.*[_\-.]|.*(?-i:[a-z](?=[A-Z])))?(?P<weak>(?P<wpw>{_WEAK_PASSWORD_KEYS})|{_WEAK_KEYS})"
)
