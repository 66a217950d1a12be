"""The cookie rule is not tried in a text without a "cookie:" header (issue 22): its accept takes nothing there.

``session_cookie`` locates its matches at every ``;`` of a text holding its trigger ``cookie`` (Django's code, with
``request.COOKIES`` and many semicolons), and its accept turns each down unless a ``cookie:`` header opens the line
(case-insensitively: ``(?i)i`` takes a dotless ``ı``, ``(?i)k`` the Kelvin sign). ``SecretPattern.requires`` says so,
and the scan and the prefilter's gate skip such a text. The findings must be those of the rule without it.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.redact import Redactor
from contextfold.redact.rules import BUILTIN_PATTERNS

_COOKIE = next(p for p in BUILTIN_PATTERNS if p.name == "session_cookie")
_NONCE = "c00kq7"


def test_semicolons_without_a_header_are_not_tried() -> None:
    asked: list[str] = []
    accept = _COOKIE.accept
    assert accept is not None

    def counting(m: object) -> bool | str:
        asked.append(str(m))
        return accept(m)  # type: ignore[arg-type]

    redactor = Redactor(builtin=False, patterns=[replace(_COOKIE, accept=counting)], remember=False)
    code = "".join(f"response.set_cookie('k{i}', v); x = request.COOKIES[{i}]; sessionid={_NONCE}{i}abcdef;\n"
                   for i in range(20))
    assert redactor.scan(code) == []
    assert asked == []
    header = f"Cookie: theme=dark; sessionid={_NONCE}abcdef0123456789\n"
    assert [f.name for f in redactor.scan(code + header)] == ["session_cookie"]


_pieces = st.sampled_from(["cookie", "Cookie: ", "COOKıE:", "COOKİE:", "cooKie:", "coo\u212aie:", "; ", ";",
                           "sessionid=", "auth_token=", f"{_NONCE}Xk9mQ3hR7tB2", "abcdef0123456789", "\n", " ",
                           "set_cookie(", "theme=dark", "=", "é"])


@settings(max_examples=100, deadline=None)
@given(st.lists(_pieces, max_size=14).map("".join))
def test_the_findings_are_the_rules_without_the_header_check(text: str) -> None:
    with_check = Redactor(builtin=False, patterns=[_COOKIE], remember=False)
    without = Redactor(builtin=False, patterns=[replace(_COOKIE, requires=())], remember=False)
    found = with_check._scanner.scan(text)
    assert found == without._scanner.scan(text)
    suspects: set[int] = set()
    assert with_check.patterns  # (resolves the prefilter)
    with_check._scanner.suspect_texts([text, "plain"], suspects)
    assert bool(found) <= (0 in suspects)
