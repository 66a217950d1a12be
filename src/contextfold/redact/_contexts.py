"""Secrets known by where they stand: key files, command lines, HTTP headers and configuration file formats.

A value that looks like nothing in particular is a secret because of its place: after ``password`` in a ``.netrc``,
in the fifth field of a ``.pgpass`` line, inside ``<password>`` in a Maven ``settings.xml``, after ``-a`` in a
``redis-cli`` command, after a scheme in an ``Authorization`` header. Each rule finds the place and checks the value
is not a placeholder (``$REDIS_PASSWORD``, ``${env.NEXUS_PASSWORD}``, ``CHANGE_ME``, ``<token>``).
"""

from __future__ import annotations

import re

from ._pattern import SecretPattern, accept_value, decoded_text, is_placeholder, made_up, pattern, value_group

__all__ = ["CONTEXT_PATTERNS", "PEM_END"]

# -- key files ----------------------------------------------------------------------------------------------------
# The lines contextfold's own tool-output view (cache._view.render_view) puts after the head it keeps are not base64,
# so a key block never runs across them (the ref they name would be redacted and remembered as a secret).
_PEM_BEGIN = r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
PEM_END = r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
# Between the lines of a key: a newline, an escaped newline (the key inside JSON, once or twice escaped) or spaces
# (a key pasted into one line).
_PEM_BREAK = r"(?:\r?\n|\\r\\n|\\n|\\\\n|[ \t]+)"
_PEM_HEADER = r"(?:[A-Za-z][A-Za-z\-]*:[^\n\\]*" + _PEM_BREAK + r")"
# A real block: BEGIN, optional headers (Proc-Type, DEK-Info), then base64 — not a marker inside a string literal
# (`"-----BEGIN PRIVATE KEY-----"` in source). A block cut short (a truncated tool output) ends with its base64.
_PEM_BLOCK = (
    rf"{_PEM_BEGIN}{_PEM_BREAK}{_PEM_HEADER}*{_PEM_BREAK}?[A-Za-z0-9+/=]{{16,}}"
    rf"(?:{_PEM_BREAK}?[A-Za-z0-9+/=]+)*(?:{_PEM_BREAK}?{PEM_END})?"
)
# A PuTTY key file: the private half is the base64 lines after "Private-Lines: N".
_PUTTY_PRIVATE = r"Private-Lines:[ \t]*\d+\r?\n(?P<v>[A-Za-z0-9+/=]{16,}(?:\r?\n[A-Za-z0-9+/=]+)*)"

# -- command lines ------------------------------------------------------------------------------------------------
# A value after a flag: quoted, or a bare word.
_ARG = r"(?:'(?P<v1>[^'\n]+)'|\"(?P<v2>[^\"\n]+)\"|(?P<v3>[^\s'\"\-][^\s'\"]*))"
# The rest of the command before the flag: no pipe, no next command.
_SAME_COMMAND = r"[^\n|;&]*?[ \t]"


def _command(commands: str, flags: str, *triggers: str) -> SecretPattern:
    """A password given to one of ``commands`` after one of ``flags`` (``mysql -pX``, ``redis-cli -a X``)."""
    return pattern("password", rf"\b(?:{commands})\b{_SAME_COMMAND}(?:{flags}){_ARG}", *triggers,
                   accept=accept_value)


# Long options that take a secret, as any command spells them (`mongosh --password X`, `app --api-key X`).
_SECRET_OPTION = (r"(?<![\w-])--(?:password|passwd|pass|db-password|api-key|apikey|auth-token|access-token|token"
                  r"|secret|client-secret|secret-key)[ \t]+" + _ARG)
_OPTION_NAMES = re.compile(r"[A-Z][A-Z0-9_\-]*\]?")


def _accept_option(m: re.Match[str]) -> bool:
    """A value that is not a usage line's metavariable (``--password PASSWORD``) nor a word of prose."""
    found = value_group(m)
    if found is None or is_placeholder(found[0]):
        return False
    value = found[0]
    return not _OPTION_NAMES.fullmatch(value) and (made_up(value) or len(value) >= 16)


_HTPASSWD = r"\bhtpasswd\b(?P<flags>(?:[ \t]+-[A-Za-z]+)*)[ \t]+[^\s-]\S*[ \t]+\S+[ \t]+" + _ARG


def _accept_htpasswd(m: re.Match[str]) -> bool:
    return "b" in m.group("flags") and accept_value(m)


# sqlplus user/password@service (Oracle's tools take the password inside the connect string).
_ORACLE_CONNECT = (r"\b(?:sqlplus|sqlldr|rman|expdp|impdp|dgmgrl)\b[^\n]*?[ \t]['\"]?[A-Za-z0-9_$#.]+/"
                   r"(?P<v>[^\s@/'\"]+)@")

# -- configuration file formats -------------------------------------------------------------------------------------
# .netrc: `machine host login user password secret`, on one line or several (login first: "the default password
# hasher" is prose).
_NETRC = (r"(?:\bmachine[ \t]+\S+|\bdefault)(?:\s+(?:account|port)\s+\S+)*\s+login\s+\S+"
          r"(?:\s+(?:account|port)\s+\S+)*\s+password\s+(?P<v>[^\s]+)")
# .pgpass: hostname:port:database:username:password, one entry a line.
_PGPASS = (r"(?m)^[ \t]*(?:[A-Za-z0-9_.\-*]+|\[[0-9A-Fa-f:]+\]):(?:\d{2,5}|\*):[A-Za-z_*][\w.\-*]*"
           r":[A-Za-z_*][\w.@\-*]*:(?P<v>\S+)[ \t]*\r?$")
_SOURCE_FILE = re.compile(r"\.(?:py|js|ts|go|rs|java|rb|php|c|h|cpp|cs|sh|yml|yaml|json|toml|cfg|ini|conf|log|txt)$")


def _accept_pgpass(m: re.Match[str]) -> bool:
    host = m.group().lstrip().split(":", 1)[0]
    value = m.group("v")
    return not _SOURCE_FILE.search(host) and not is_placeholder(value) and len(value) >= 4


# An XML element whose name ends in a secret's name: <password>, <keyStorePassword>, <apiKey>, Maven's <master>.
_XML_ELEMENT = (r"(?i)<(?P<tag>(?:[A-Za-z_][\w.\-]*:)?(?:[A-Za-z_][\w.\-]*?)?"
                r"(?:passw(?:or)?d|passphrase|pwd|secret|token"
                r"|(?:api|private|access|secret|signing|master|encryption|account|client)[_\-]?key|credentials?)"
                r"|master)(?:[ \t][^<>\n]*)?>(?P<v>[^<>\n]+)</(?P=tag)>")
# Cookies: each `name=value` of a Cookie or Set-Cookie header line.
_COOKIE = r"(?i)(?:cookie:|;)[ \t]*(?P<name>[A-Za-z0-9_.\-]+)=(?P<v>[^;\s\"',]+)"
_COOKIE_LOCATE = r"cook[i\u0131]e:|;"  # (where _COOKIE can match, in the lower-cased text)
_COOKIE_HEADER = re.compile(r"(?i)cookie:")
# What _COOKIE_HEADER matches becomes, lower-cased to the same length ("(?i)i" takes the dotless "ı"; "İ" lower-cases
# to two characters; the Kelvin sign, which "(?i)k" takes, to "k").
_COOKIE_HEADERS = ("cookie:", "cook\u0131e:")
_SESSION_COOKIE = re.compile(r"(?i)sess|sid|auth|token|jwt|csrf|xsrf|remember|login|secret|key|credential")


def _accept_cookie(m: re.Match[str]) -> bool:
    text = m.string
    line_start = text.rfind("\n", 0, m.start()) + 1
    if not _COOKIE_HEADER.search(text, line_start, m.start() + 7):
        return False  # a `; name=value` of something else (a connection string)
    value = m.group("v")
    if is_placeholder(value):
        return False
    return (bool(_SESSION_COOKIE.search(m.group("name"))) and len(value) >= 8) or (len(value) >= 16 and made_up(value))


# `Authorization: <scheme> <credentials>` for any scheme (Token, Bot, SSWS, ApiKey, Negotiate, …).
_AUTHORIZATION_SCHEME = (r"(?i)authorization[\"']?[ \t]*[:=][ \t]*[\"']?(?P<scheme>[A-Za-z][\w\-]*)[ \t]+"
                         r"(?P<v>[A-Za-z0-9\-._~+/:=]{12,})")


def _accept_authorization(m: re.Match[str]) -> bool:
    return m.group("scheme").lower() != "digest" and not is_placeholder(m.group("v"))


# A docker config.json `auth`, an .npmrc `_auth`: base64 of user:password.
_BASIC_CREDENTIALS = (r"(?i)(?<![A-Za-z0-9_])[\"']?(?P<key>_?auth)[\"']?[ \t]*[:=][ \t]*[\"']?"
                      r"(?P<v>[A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])")


def _accept_basic_credentials(m: re.Match[str]) -> bool:
    decoded = decoded_text(m.group("v").rstrip("="))
    if decoded is None or ":" not in decoded:
        return False
    user, _, password = decoded.partition(":")
    return bool(user.strip()) and bool(password.strip()) and not is_placeholder(password)


_MYSQL = r"mysql|mysqldump|mysqladmin|mysqlimport|mysqlsh|mariadb|mariadb-dump"

# A secret given as a name/value pair: Kubernetes and ECS env lists (`kubectl get deploy -o yaml` shows them),
# CloudFormation parameters, `aws ssm put-parameter --name .../password --value X`. The name says what the value
# is; bounded runs around the word keep a long run of name characters from being tried at every split.
_SECRET_NAME = (r"(?P<name>[A-Za-z0-9_./\-]{0,64}?(?:passw(?:or)?d|passphrase|pwd|secret|token|api[_-]?key"
                r"|private[_-]?key|credentials?)[A-Za-z0-9_./\-]{0,64})")
# The name must end in the word (`DB_PASSWORD`, `/prod/db/password`, `DbPassword`, `SECRET_KEY`): `TOKEN_TTL`'s value
# is a number of seconds.
_SECRET_NAME_END = re.compile(
    r"(?i)(?:.*?(?:[_\-./]|(?-i:(?<=[a-z])(?=[A-Z]))))?(?:passw(?:or)?d|passphrase|pwd|pass|secret|token|api[_-]?key"
    r"|private[_-]?key|secret[_-]?(?:access[_-]?)?key|access[_-]?key|credentials?)s?")


def _accept_name_value(m: re.Match[str]) -> bool:
    return bool(_SECRET_NAME_END.fullmatch(m.group("name"))) and accept_value(m)
_QUOTED_OR_BARE = r"(?:\"(?P<v1>[^\"\n]+)\"|'(?P<v2>[^'\n]+)'|(?P<v3>[^\s\"',}\]]+))"
_NAME_VALUE = (rf"(?i)[\"']?(?:name|key|parameterkey|parametername)[\"']?[ \t]*[:=][ \t]*[\"']?{_SECRET_NAME}[\"']?"
               r"[ \t]*,?[ \t]*(?:\r?\n[ \t]*)?(?:-[ \t]*)?[\"']?(?:value|parametervalue)[\"']?[ \t]*[:=][ \t]*"
               + _QUOTED_OR_BARE)
_SSM_PARAMETER = (rf"(?i)--name[ \t=]+[\"']?{_SECRET_NAME}[\"']?(?:[ \t]+--[A-Za-z][\w\-]*(?:[ \t=]+[^\s-]\S*)?){{0,4}}"
                  r"[ \t]+--value[ \t=]+" + _QUOTED_OR_BARE)

CONTEXT_PATTERNS: tuple[SecretPattern, ...] = (
    pattern("private_key", _PEM_BLOCK, "-----begin"),
    # The end of a block whose beginning is gone (a truncated output keeps head and tail lines): the key lines right
    # before the END line are still secret.
    pattern("private_key", rf"(?m)^(?:[A-Za-z0-9+/=]{{16,}}\r?\n)+{PEM_END}", "-----end"),
    pattern("private_key", _PUTTY_PRIVATE, "private-lines:"),
    pattern("password", rf"\b(?:{_MYSQL})\b{_SAME_COMMAND}-p{_ARG}", "mysql", "mariadb", accept=accept_value),
    pattern("password", r"\bcurl\b[^\n|;&]*?[ \t](?:-u|--user)[ =]?['\"]?[^\s:'\"]*:(?P<v>[^\s'\"]+)", "curl",
            accept=accept_value),
    pattern("password", r"\bsshpass\b[ \t]+-p[ \t]*['\"]?(?P<v>[^\s'\"]+)", "sshpass", accept=accept_value),
    _command(r"redis-cli", r"-a[ \t]+|--pass[ \t]+", "redis-cli"),
    _command(r"(?:docker|podman|helm|oras|skopeo|buildah|nerdctl|crane)[ \t]+(?:registry[ \t]+)?login",
             r"-p[ \t]+|--password[ \t=]+", "login"),
    _command(r"mongo|mongosh|mongodump|mongorestore|mongoexport|mongoimport", r"-p[ \t]+", "mongo"),
    _command(r"sqlcmd|bcp", r"-P[ \t]*", "sqlcmd", "bcp"),
    _command(r"ldapsearch|ldapadd|ldapmodify|ldapdelete|ldapwhoami|ldappasswd|ldapcompare", r"-w[ \t]+", "ldap"),
    _command(r"twine|nuget", r"-p[ \t]+|-k[ \t]+", "twine", "nuget"),
    pattern("password", r"-(?:passin|passout|pass|password|k)[ \t]+pass:(?P<v>[^\s'\"]+)", "pass:",
            accept=accept_value),
    pattern("password", r"\b(?:smbclient|rpcclient|smbmap|smbget|winexe)\b" + _SAME_COMMAND
            + r"-U[ \t]*['\"]?[^\s%'\"]+%(?P<v>[^\s'\"]+)", "smbclient", "rpcclient", "smbmap", "smbget", "winexe",
            accept=accept_value),
    pattern("password", _HTPASSWD, "htpasswd", accept=_accept_htpasswd),
    pattern("password", _ORACLE_CONNECT, "sqlplus", "sqlldr", "rman", "expdp", "impdp", "dgmgrl",
            accept=accept_value),
    pattern("password", _SECRET_OPTION, "--pass", "--api", "--auth-token", "--access-token", "--token", "--secret",
            "--client-secret", accept=_accept_option),
    pattern("password", _NETRC, "passw", accept=accept_value),
    # (Located by its name key, a literal in the lower-cased text: the case-insensitive regex, which may open with a
    # quote, was tried at every position of every text holding "value", issue 22.)
    SecretPattern("password", re.compile(_NAME_VALUE), ("value",), _accept_name_value,
                  re.compile(r"[\"']?(?:name|key|parameterkey|parametername)[\"']?[ \t]*[:=]"),
                  re.compile(r"value[\"']?[ \t]*[:=]")),  # (the value's key: what the bulk prefilter needs too)
    pattern("password", _SSM_PARAMETER, "--value", accept=_accept_name_value),
    # (No trigger: nearly every text holds a colon. What bulk redaction looks for instead is the port field.)
    pattern("password", _PGPASS, accept=_accept_pgpass, needs=r":(?:\d{2,5}|\*):[a-z_*]"),
    # (What the bulk prefilter looks for in a text holding these words, see ._gate: a secret's word in a tag, and
    # the element closed on its line. Under (?i) the tag's "s" may be a long s and its "i" a dotless one, which
    # lower-case to themselves; a Kelvin sign lowers to "k", a dotted capital I to two characters.)
    pattern("password", _XML_ELEMENT, "pass", "pwd", "secret", "token", "key", "credential", "master",
            accept=accept_value,
            needs=r"<[^<>\n]*(?:pa[s\u017f][s\u017f]|pwd|[s\u017f]ecret|token|key|credent[i\u0131]al|ma[s\u017f]ter)"
                  r"[^<>\n]*>[^<>\n]+</"),
    SecretPattern("basic_auth", re.compile(_BASIC_CREDENTIALS), accept=_accept_basic_credentials,
                  locate=re.compile(r"[\"']?_?auth[\"']?[ \t]*[:=]"),
                  needs=re.compile(r"auth[\"']?[ \t]*[:=][ \t]*[\"']?[a-z0-9+/]{8}")),
    # (Located in the lower-cased text: the case-insensitive regex, which opens with two choices, read every text
    # holding "cookie" at ~50 ns a character, a file listing with django/http/cookie.py in it too, issue 22. Its
    # "i" also takes the dotless "ı", which lower-cases to itself; "İ" lower-cases to two characters, and a text
    # that changes length so is searched by the regex itself. The regex is tried at every place, as the assignments'
    # rules are: a header starting inside another's value is a match of its own. As the regex's finditer, it was
    # not taken, and `Cookie: sessionid=Cookie: sessionid=<value>` (the first turned down: its value is
    # `Cookie:`) kept the real value in clear.)
    # (A match is taken only on a line with a "cookie:" header: Django's code says COOKIES and has a ";" on many
    # lines, each tried, issue 22.)
    SecretPattern("session_cookie", re.compile(_COOKIE), ("cookie",), _accept_cookie, re.compile(_COOKIE_LOCATE),
                  requires=_COOKIE_HEADERS),
    # A capital "Bearer" or an Authorization header: lower-case prose ("a bearer of news") is not a header.
    pattern("bearer_token", r"Bearer(?<![A-Za-z0-9_]Bearer)[ \t]+(?P<v>[A-Za-z0-9\-._~+/]{16,}=*)", "bearer"),
    pattern("bearer_token", r"(?i)authorization:[ \t]*bearer[ \t]+(?P<v>[A-Za-z0-9\-._~+/]{16,}=*)", "authorization"),
    pattern(
        "basic_auth",
        r"(?i)authorization[\"']?[ \t]*[:=][ \t]*[\"']?basic[ \t]+(?P<v>[A-Za-z0-9+/]{8,}={0,2})",
        "authorization",
    ),
    pattern("auth_token", _AUTHORIZATION_SCHEME, "authorization", accept=_accept_authorization),
)
