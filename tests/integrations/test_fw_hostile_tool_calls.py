"""Hostile tool calls to every tool contextfold gives the model (issue 21 §4: "6 of 166 hostile tool calls escape as
exceptions instead of tool results"; the issue's corpus is not ours, so hypothesis builds one).

``tool_output_cache``, ``tool_output_cache_grep``, ``history_search`` and ``compact_context`` answered the way every
adapter answers them (``integrations._retrieval.answer``: arguments as the JSON text a provider sends, or as the
mapping LangChain and pydantic-ai hand over) with wrong types, huge values, regex bombs, odd unicode, deep nesting,
extra keys and values JSON cannot hold. Each call gets a tool result the model can read; none reaches the last line
of defence (``answer_safely``'s "failed (SomeError: …)"), none raises.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextfold.integrations._retrieval import AGENT_TOOL_NAMES, answer
from contextfold.manager import ContextManager

PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LOG = "\n".join(f"line {n}: compiling module {n}, checksum {n * 7919 % 10_007}" for n in range(2_000))


def _nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = {"k": [value]}
    return value


class Opaque:
    """A value no JSON encoder knows (a framework could hand over any object)."""


PATTERNS = st.sampled_from([
    "(a+)+$", "(a|a)*b", "(.*)*x", "(?:x+x+)+y", "[", "(?P<n>", "a{1000000}", "\\", "(?R)", "\\p{L}+", "*",
    "(?i)" + "a" * 900, "x" * 5_000, "\u202e", "\x00", "\ud800", "line 1.*", "",
])
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(), st.text(max_size=16), PATTERNS, st.just([]), st.just({}), st.just(_nested(5)),
    st.lists(st.integers(), max_size=3), st.just("tout_0123456789abcdef"), st.just("tout_" + "f" * 64),
    st.just("../../etc/passwd"),
)
KEYS = st.sampled_from(["ref_id", "offset", "limit", "pattern", "context", "max_matches", "role", "ignore_case",
                        "max_results", "instructions", "zz_extra", "", "ref_id\x00"])
OBJECTS = st.dictionaries(KEYS, VALUES, max_size=4)
JSON_TEXTS = st.one_of(
    OBJECTS.map(json.dumps), st.text(max_size=40),
    st.sampled_from(["", "null", "[]", "5", '"x"', "{", "{}" * 1_000, "[" * 50_000 + "]" * 50_000,
                     json.dumps({"pattern": "x", "ref_id": "y" * 300_000}),
                     '{"instructions": ' + '{"k": [' * 3_000 + "1" + "]}" * 3_000 + "}"]),
)
MAPPINGS = st.one_of(
    OBJECTS,
    st.just({"pattern": b"bytes"}), st.just({"ref_id": {1, 2}}), st.just({"pattern": Opaque()}),
    st.just({"instructions": _nested(3_000)}), st.just({1: "non-string key"}), st.just({"limit": float("inf")}),
)


@pytest.fixture(scope="module")
def cm() -> Any:
    manager = ContextManager("gpt-4o", max_context_tokens=16_000, store="memory", archive="memory",
                             session_id="hostile")
    manager.add([{"role": "user", "content": "The deploy key is K-7731."}, {"role": "assistant", "content": "Ok."}])
    for n in range(6):
        manager.add([{"role": "user", "content": f"step {n}"}, {"role": "assistant", "content": "done"}])
    manager.compact()
    manager.add([{"role": "user", "content": "build"},
                 {"role": "assistant", "content": None, "tool_calls": [
                     {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": "c1", "content": LOG}])
    yield manager
    manager.close()


def _readable(result: object, name: str) -> None:
    assert isinstance(result, str) and result, (name, result)
    assert " failed (" not in result, f"{name}: an exception reached the last line of defence: {result[:300]}"


@pytest.mark.parametrize("name", AGENT_TOOL_NAMES)
def test_the_tools_answer_a_well_formed_call(cm: ContextManager, name: str) -> None:
    ref = next(str(m.meta["ref"]) for m in cm.messages() if "ref" in m.meta)
    arguments = {"tool_output_cache": {"ref_id": ref, "offset": 10, "limit": 2},
                 "tool_output_cache_grep": {"pattern": "^line 7:", "ref_id": ref},
                 "history_search": {"pattern": "deploy key"}, "compact_context": {}}[name]
    result = answer(cm, name, arguments)
    _readable(result, name)
    assert not result.startswith("error"), result


@PROPERTY
@given(name=st.sampled_from(AGENT_TOOL_NAMES), arguments=JSON_TEXTS)
def test_hostile_argument_texts_get_a_tool_result(cm: ContextManager, name: str, arguments: str) -> None:
    _readable(answer(cm, name, arguments), name)


@PROPERTY
@given(name=st.sampled_from(AGENT_TOOL_NAMES), arguments=MAPPINGS)
def test_hostile_argument_mappings_get_a_tool_result(cm: ContextManager, name: str, arguments: Any) -> None:
    _readable(answer(cm, name, arguments), name)
