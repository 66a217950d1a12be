"""SWE-agent text calls (``<function=NAME><parameter=P>…</parameter></function>``) read in linear time.

Found on afa4c7c (red team, session 19): ``parse_text_call`` searched for whole parameter elements anywhere in the
call's body, trying each ``<parameter=P>`` against the rest of the body; a hostile ``.traj`` whose assistant message
held 8,000 unclosed tags (100 KB) took ~2.9 s CPU to import, 80,000 (1 MB) minutes, in ``count``, ``convert`` and
``replay`` alike (figures: ``bench/bench_swe_text_calls.py``). The parameters are now read one after another. The
answers are those of the old parser, checked here against it.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from contextfold.importers.swe_agent import TextCall, parse_text_call

# The parser as it was on afa4c7c: the oracle for every answer.
_OPEN = re.compile(r"<function=([A-Za-z_][\w.\-]*)>")
_PARAMETER = re.compile(r"<parameter=([A-Za-z_][\w.\-]*)>(.*?)</parameter>", re.DOTALL)


def _oracle(content: str) -> TextCall | None:
    opened = _OPEN.search(content)
    if opened is None:
        return None
    end = content.find("</function>", opened.end())
    if end < 0:
        return None
    body = content[opened.end():end]
    parameters: dict[str, str] = {}
    position = 0
    for match in _PARAMETER.finditer(body):
        if body[position:match.start()].strip() or match.group(1) in parameters:
            return None
        parameters[match.group(1)] = match.group(2)
        position = match.end()
    if body[position:].strip():
        return None
    return TextCall(opened.group(1), parameters, content[:opened.start()], content[end + len("</function>"):])


_PIECES = st.sampled_from([
    "<function=bash>", "<function=str_replace>", "</function>", "<parameter=cmd>", "<parameter=path>",
    "<parameter=1bad>", "</parameter>", "<parameter=cmd", "ls -la", " ", "\n", "\t", "\u00a0", "\u2003", "x",
    "<", ">", "=", "</param", "</parameter", "é",
])


@settings(max_examples=2_000)
@given(st.lists(_PIECES, max_size=24).map("".join))
def test_the_same_answers_as_before(content: str) -> None:
    assert parse_text_call(content) == _oracle(content)


def test_well_formed_calls_are_read() -> None:
    text = ("I will look.\n<function=bash>\n<parameter=cmd>ls -la\n</parameter>\n<parameter=path>/src</parameter>"
            "\n</function>\nthen more")
    call = parse_text_call(text)
    assert call == TextCall("bash", {"cmd": "ls -la\n", "path": "/src"}, "I will look.\n", "\nthen more")
    assert call == _oracle(text)


def test_many_unclosed_tags_are_no_call() -> None:
    # (80,000 tags, 1 MB: minutes on afa4c7c; the bench measures it, the test checks the answer)
    hostile = "<function=bash>" + "<parameter=a>" * 80_000 + "</function>"
    assert parse_text_call(hostile) is None
    many = "<function=bash>" + "".join(f"<parameter=p{k}>v{k}</parameter>" for k in range(20_000)) + "</function>"
    parsed = parse_text_call(many)
    assert parsed is not None and len(parsed.parameters) == 20_000 and parsed.parameters["p19999"] == "v19999"
