"""Runs the ``encoded_secret`` rule turns down by their opening and length are passed over as they are found (issue 22).

A path is a base64 run ("/testbed/django/db/models/" is 26 characters of ``[A-Za-z0-9+/]``): 94% of the runs of the
stored outputs the read-ahead scans whole, each handed to Python, checked and turned down (a run opening with "/" or
"g"-"v" does not decode to text, and only an AWS key's 40 characters is read without decoding). ``ClassRuns`` now
leaves such runs out where it finds them; the rule's findings must stay those of its regex run plainly.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.redact.rules import BUILTIN_PATTERNS

_ENCODED = next(p for p in BUILTIN_PATTERNS if p.name == "encoded_secret")
_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_NONCE = "p4ssedoverq9"
# (random-looking, so that a 40-character run may be an AWS key; and a base64 secret, sk-proj-abcdefghijklmnopqrstuvwx)
_BODY = "Xk9mQ3hR7tB2vN8pL4wZ6cF1jD5gH0sKa8Yq" + _NONCE + "Zr4Tb8Nc2Vx6Mq1Pw5Ls9Kd3Jf7Hg0"
_ENCODED_SECRET = "c2stcHJvai1hYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3g="


def _regex_findings(text: str) -> list[tuple[int, int, str]]:
    found = [m for m in _ENCODED.regex.finditer(text) if _ENCODED.accept is None or _ENCODED.accept(m)]
    return [(m.start(), m.end(), m.group()) for m in found]


def _findings(text: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), m.group()) for m, _ in _ENCODED.findings(text)]


def test_a_path_is_not_handed_over_as_a_run() -> None:
    path = f"/testbed/django/db/models/{_NONCE}/fields/"
    assert len(path) >= 24 and not _ENCODED.starts.runs(f"open {path}__init__.py")  # type: ignore[union-attr]
    # (an AWS key's length is still read, as is a run opening with a letter that decodes to text)
    aws = "/" + _BODY[:39]
    assert _ENCODED.starts.runs(f"key {aws} end") == [(4, 44)]  # type: ignore[union-attr]
    assert _ENCODED.starts.runs(f"data {_ENCODED_SECRET} end") == [(5, 48)]  # type: ignore[union-attr]
    assert [f[2] for f in _findings(f"data {_ENCODED_SECRET} end")] == [_ENCODED_SECRET]
    for opening in "/+gv":  # (40 characters with their "=" padding: read, and found as the regex finds them)
        for padding in ("", "=", "=="):
            text = f"key {opening}{_BODY[: 39 - len(padding)]}{padding} end"
            assert _findings(text) == _regex_findings(text) != [], text


_runs = st.builds(lambda opening, size, padding: opening + _BODY[:size] + padding,
                  st.sampled_from(_ALPHABET), st.integers(20, 44), st.sampled_from(["", "=", "==", "==="]))
_pieces = _runs | st.sampled_from([" ", "\n", "_", "-", "=", ".", "é", "/", "/testbed/src/", _ENCODED_SECRET,
                                   "/" + _ENCODED_SECRET, "g" + _ENCODED_SECRET])


@settings(max_examples=120, deadline=None)
@given(st.lists(_pieces, max_size=8).map("".join))
def test_the_rule_finds_what_its_regex_finds(text: str) -> None:
    assert _findings(text) == _regex_findings(text)
