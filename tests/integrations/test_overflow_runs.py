"""Every framework and client wrapper, against a provider limit below the window, with twelve ordinary tools.

Real SDKs over loopback HTTP to the scripted server, which enforces the limit as a provider does (tools and
instructions counted) and answers with the provider's real error body. Before issue 21 the same rejected request
went out turn after turn (``bench/bench_overflow.py`` prints the whole table at 45 turns).
"""

from __future__ import annotations

import pytest

pytest.importorskip("agents")
pytest.importorskip("langchain")
pytest.importorskip("pydantic_ai")

from _overflow_runs import CASES, PROVIDER_LIMIT, run_case

# Enough turns to overflow (at the second or third) and then to run on under the learned limit.
TURNS = 4
# A manager told the provider's real window: what the adapters send beside the messages must fit in it.
SMALL_WINDOW = 8_000


def _id(case: tuple[str, str, bool]) -> str:
    framework, api, stream = case
    return f"{framework.replace(' ', '-')}-{api}-{'stream' if stream else 'plain'}"


@pytest.mark.parametrize(("framework", "api", "stream"), CASES, ids=[_id(c) for c in CASES])
def test_the_run_completes_with_one_overflow_error_per_learned_limit(framework: str, api: str,
                                                                      stream: bool) -> None:
    outcome = run_case(framework, api, stream, turns=TURNS)
    assert outcome.error == "" and outcome.completed, outcome
    # Chat and Messages errors carry the provider's figures: one error teaches the limit. The Responses error says
    # only "too long": each error teaches a lower limit, and the run may need a second.
    assert outcome.overflows == outcome.learned, outcome
    assert outcome.overflows == 1 if api != "responses" else 1 <= outcome.overflows <= 2, outcome
    assert outcome.largest_after_overflow <= PROVIDER_LIMIT, outcome
    assert outcome.streamed == (outcome.requests if stream else 0)  # the streaming path was the one taken


@pytest.mark.parametrize(("framework", "api", "stream"), [c for c in CASES if not c[2]],
                         ids=[_id(c) for c in CASES if not c[2]])
def test_what_the_adapter_sends_beside_the_messages_is_counted(framework: str, api: str, stream: bool) -> None:
    # The manager knows the real window; the tool schemas the framework sends (about 1,500 tokens) must be counted
    # for its views to fit: no overflow error at all.
    outcome = run_case(framework, api, stream, turns=TURNS, window=SMALL_WINDOW, limit=SMALL_WINDOW)
    assert outcome.error == "" and outcome.completed, outcome
    assert len(outcome.sent_tools) >= 12 and outcome.counted_tools == outcome.sent_tools
    assert outcome.overflows == 0, outcome
