"""A provider limit below the manager's window: learned from the first error, kept, never exceeded again (issue 21).

Before, recovery compacted, then the next ``prepare()`` widened the answered output back up to the manager's own
threshold, so the same rejected request went out turn after turn (44 overflows in a 45-turn Chat run at a 16K
provider limit under gpt-4o's 128K window).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest
from _rec_history import history

from contextfold.compaction import Action, Plan
from contextfold.errors import ConfigError
from contextfold.manager import ContextManager
from contextfold.provider_context import anthropic_settings
from contextfold.recovery import OverflowInfo, call_with_recovery, counted_tokens, learned_ceiling, shared_ceiling
from contextfold.telemetry import RecordingTelemetry, RecoveryLimitLearned, RecoveryOverflow
from contextfold.testing.agent_run import chat_tools, page, reading_script, responses_tools
from contextfold.testing.server import ScriptedLLMServer
from contextfold.testing.wire import ErrorReply

PROVIDER_LIMIT = 16_000
TURNS = 14
# Pages long enough to be cut at write time (gpt-4o's window caps an output at 6,666 tokens): the answered one is
# then shown wider, which is what pushed every retry back over the limit.
LINES = 400


def run(cm: ContextManager, server: ScriptedLLMServer, api: str, turns: int = TURNS) -> None:
    """The agent loop of a user calling prepare() through call_with_recovery, tools passed to both."""
    client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
    cm.add({"role": "user", "content": "Read the build log page by page and tell me where it fails."})
    for _ in range(turns + 1):
        if api == "chat":
            reply = call_with_recovery(cm, lambda view: client.chat.completions.create(
                model="gpt-4o", messages=view, tools=chat_tools()))
            cm.record_usage(reply.usage)
            message = reply.choices[0].message
            cm.add(message.model_dump(exclude_none=True))
            calls = [(c.id, c.function.arguments) for c in message.tool_calls or ()]
            cm.add([{"role": "tool", "tool_call_id": i, "content": page(_offset(a), LINES)} for i, a in calls])
        else:
            reply = call_with_recovery(cm, lambda view: client.responses.create(
                model="gpt-4o", input=view, tools=responses_tools()), format="openai_responses")
            cm.record_usage(reply.usage)
            items = [item.model_dump(exclude_none=True) for item in reply.output]
            cm.add(items, format="openai_responses")
            calls = [(item.call_id, item.arguments) for item in reply.output if item.type == "function_call"]
            cm.add([{"type": "function_call_output", "call_id": i, "output": page(_offset(a), LINES)}
                    for i, a in calls], format="openai_responses")
        if not calls:
            return


def _offset(arguments: str) -> int:
    import json

    return int(json.loads(arguments)["offset"])


def manager(tmp_path: Path, api: str, **kw: Any) -> tuple[ContextManager, RecordingTelemetry]:
    events = RecordingTelemetry()
    tools = chat_tools() if api == "chat" else responses_tools()
    kw.setdefault("store", "memory")
    kw.setdefault("session_id", "s")
    return ContextManager("gpt-4o", archive=str(tmp_path / "archive"), telemetry=events, tools=tools, **kw), events


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_run_under_a_smaller_provider_limit_overflows_once_per_learned_limit(tmp_path: Path, api: str) -> None:
    cm, events = manager(tmp_path, api)
    with ScriptedLLMServer(reading_script(TURNS), context_window=PROVIDER_LIMIT, validator="formats") as server:
        run(cm, server, api)
    statuses = [r.status for r in server.requests]
    overflows = statuses.count(400)
    learned = events.of_type(RecoveryLimitLearned)
    assert server.pending == 0 and statuses[-1] == 200 and not server.invalid_requests
    assert overflows == len(learned) == len(events.of_type(RecoveryOverflow))
    # Chat's error gives the provider's figures: one error teaches the limit. Responses' says only "too long":
    # the limit is narrowed from the rejected size, one error each time.
    assert overflows == 1 if api == "chat" else 1 <= overflows <= 2
    limit = learned[-1].tokens
    assert cm.learned_limit == limit and cm.budgets.hard <= limit < cm.budgets.window < 128_000
    rejected = [r.input_tokens for r in server.requests if r.status == 400]
    after_first = [r.input_tokens for r in server.requests[statuses.index(400) + 1:]]
    assert max(after_first) < min(rejected)  # widening never brings a request back over a rejected size
    assert max(after_first) <= PROVIDER_LIMIT


def test_each_retry_is_strictly_smaller_than_the_request_it_follows(tmp_path: Path) -> None:
    # Errors without figures, one after another: each retry goes out smaller than the request just rejected. (A
    # window of 32K: under gpt-4o's 128K the first compaction lands under 1/16 of the window, where figureless
    # answers no longer shrink the session: test_rec_figureless_floor.)
    cm, events = manager(tmp_path, "chat", max_context_tokens=32_000)
    cm.add(history(30, lines=60))
    refused = ErrorReply("context_overflow", message="Your input exceeds the context window of this model.")
    with ScriptedLLMServer([refused, refused, "done"]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        call_with_recovery(cm, lambda view: client.chat.completions.create(model="gpt-4o", messages=view))
    sizes = [r.input_tokens for r in server.requests]
    assert [r.status for r in server.requests] == [400, 400, 200]
    assert sizes[0] > sizes[1] > sizes[2]
    first, second = (e.tokens for e in events.of_type(RecoveryLimitLearned))
    assert first < sizes[0] and second < first


def test_a_new_manager_on_the_same_store_starts_under_the_learned_limit(tmp_path: Path) -> None:
    store = f"local://{tmp_path / 'store'}"
    cm, _ = manager(tmp_path, "chat", store=store)
    with ScriptedLLMServer(reading_script(TURNS), context_window=PROVIDER_LIMIT) as server:
        run(cm, server, "chat")
    learned = cm.learned_limit
    assert learned is not None and [r.status for r in server.requests].count(400) == 1
    cm.close()
    # A restarted process (a new manager on the same store) knows the limit before any error.
    again, events = manager(tmp_path, "chat", store=store)
    with ScriptedLLMServer(reading_script(TURNS), context_window=PROVIDER_LIMIT) as server:
        run(again, server, "chat")
    assert [r.status for r in server.requests] == [200] * (TURNS + 1)
    stored, = events.of_type(RecoveryLimitLearned)
    assert (stored.source, stored.tokens) == ("store", learned)
    assert again.budgets.hard <= learned


def test_learned_limits_only_go_down_and_can_be_forgotten(tmp_path: Path) -> None:
    cm, events = manager(tmp_path, "chat")
    window = cm.budgets
    assert cm.learned_limit is None
    assert cm.learn_limit(20_000) and cm.budgets.hard <= 20_000 < window.hard
    assert not cm.learn_limit(30_000) and cm.learned_limit == 20_000  # a higher figure teaches nothing
    assert cm.learn_limit(12_000) and cm.budgets.hard <= 12_000
    assert [e.tokens for e in events.of_type(RecoveryLimitLearned)] == [20_000, 12_000]
    cm.forget_learned_limit()
    assert cm.learned_limit is None and cm.budgets == window
    for bad in (0, -5, 1.5, True, "100"):
        with pytest.raises(ConfigError, match=r"learn_limit\.tokens"):
            cm.learn_limit(bad)  # type: ignore[arg-type]


def test_the_answered_output_is_never_widened_past_the_learned_limit(tmp_path: Path) -> None:
    cm, _ = manager(tmp_path, "chat")
    cm.add([{"role": "user", "content": "read the log"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": page(1, 1_200)}])
    cm.prepare()
    widened = counted_tokens(cm)
    cm.learn_limit(widened - 1_000)
    cm.prepare()
    assert counted_tokens(cm) <= widened - 1_000


@pytest.mark.parametrize(("limit", "prompt", "max_tokens", "expected_below"), [
    (16_000, 16_917, None, 16_000), (200_000, 210_000, None, 200_000), (8_000, 7_000, 2_000, 6_000)])
def test_learned_ceiling_with_the_providers_figures(limit: int, prompt: int, max_tokens: int | None,
                                                    expected_below: int) -> None:
    from contextfold.compaction import Policy

    info = OverflowInfo("too long", prompt_tokens=prompt, limit=limit, max_tokens=max_tokens)
    for ratio in (0.8, 1.0, 1.25):
        rejected = int(prompt / ratio)
        ceiling = learned_ceiling(info, rejected, ratio=ratio, reply_tokens=0, attempt=1, policy=Policy())
        assert ceiling < rejected * 0.95 + 1
        # below the limit by both counts (ours, and the provider's = ours × ratio)
        assert ceiling < expected_below and ceiling * ratio < expected_below


def test_a_requests_own_max_tokens_is_not_shared_with_the_models_other_callers() -> None:
    """Red team: one request asking for nearly the whole window taught every caller of the store ~75 tokens."""
    from contextfold.compaction import Policy

    info = OverflowInfo("too long", prompt_tokens=1_000, limit=8_000, max_tokens=7_500)
    own = learned_ceiling(info, 1_000, ratio=1.0, reply_tokens=0, attempt=1, policy=Policy())
    shared = shared_ceiling(info, 1_000, ratio=1.0, attempt=1, policy=Policy())
    assert own < 500  # this caller's next request with the same max_tokens must fit beside it
    assert shared == Policy().budgets(7_600).hard  # the window's limit less the margin, the policy's reply reserve
    # An input over the window's own thresholds is shared as it is (below the rejected request).
    big = OverflowInfo("too long", prompt_tokens=9_000, limit=8_000)
    assert shared_ceiling(big, 9_000, ratio=1.0, attempt=1, policy=Policy()) == \
        learned_ceiling(big, 9_000, ratio=1.0, reply_tokens=0, attempt=1, policy=Policy())
    # Without the provider's figure nothing is known of other callers' requests: nothing is shared (red team 16).
    bare = OverflowInfo("Your input exceeds the context window of this model.")
    assert shared_ceiling(bare, 9_000, ratio=1.0, attempt=1, policy=Policy()) == 0


def test_the_store_keeps_only_the_shared_part_of_a_learned_limit(tmp_path: Path) -> None:
    store = f"local://{tmp_path / 'store'}"
    cm, _ = manager(tmp_path, "chat", store=store)
    assert cm.learn_limit(300, shared=9_000)
    assert cm.learned_limit == 300 and cm.budgets.hard <= 300
    other, _ = manager(tmp_path, "chat", store=store, session_id="s2")
    assert other.learned_limit == 9_000
    assert cm.learn_limit(250, shared=8_000)  # both go down
    assert (cm.learned_limit, manager(tmp_path, "chat", store=store, session_id="s3")[0].learned_limit) == \
        (250, 8_000)
    with pytest.raises(ConfigError, match=r"learn_limit\.shared"):
        cm.learn_limit(100, shared=-1)


def test_learned_ceiling_without_figures_narrows_faster_on_each_retry() -> None:
    from contextfold.compaction import Policy

    info = OverflowInfo("Your input exceeds the context window of this model.")
    shares = [1 - learned_ceiling(info, 10_000, ratio=1.0, reply_tokens=0, attempt=a, policy=Policy()) / 10_000
              for a in (1, 2, 3, 4)]
    assert shares == pytest.approx([0.15, 0.30, 0.50, 0.50])


@pytest.mark.redis
def test_another_worker_on_the_same_redis_knows_the_learned_limit(tmp_path: Path) -> None:
    from conftest import require_binary

    from contextfold.testing.services import RedisServer

    require_binary("redis-server")
    with RedisServer(tmp_path) as redis_server:
        first, _ = manager(tmp_path, "chat", store=redis_server.url)
        with ScriptedLLMServer(reading_script(TURNS), context_window=PROVIDER_LIMIT) as server:
            run(first, server, "chat")
        assert [r.status for r in server.requests].count(400) == 1
        learned = first.learned_limit
        first.close()
        # Another worker: a fresh manager on the same Redis store, another session of the same model.
        other, events = manager(tmp_path, "chat", store=redis_server.url, session_id="s2")
        with ScriptedLLMServer(reading_script(TURNS), context_window=PROVIDER_LIMIT) as server:
            run(other, server, "chat")
        other.close()
    assert [r.status for r in server.requests] == [200] * (TURNS + 1)
    assert [(e.source, e.tokens) for e in events.of_type(RecoveryLimitLearned)] == [("store", learned)]


def test_a_learned_limit_sizes_the_provider_context_too() -> None:
    # review of lanes T and N: the provider context kept the configured window's thresholds, so with "both" a plan
    # over the learned hard threshold became "the provider clears old tool results first", and Anthropic's clearing
    # and compaction triggers stayed sized to the configured window
    manager = ContextManager("claude-sonnet-4", max_context_tokens=100_000, store="memory", archive=False,
                             policy={"compactor": "both"}, message_id_prefix="rev18tn-pc")
    manager.learn_limit(30_000, provider_limit=32_000)
    assert manager.budgets.hard < 32_000
    settings = manager.provider_context.settings("anthropic")
    assert settings is not None
    assert settings.params == anthropic_settings(manager.policy, manager.budgets).params
    plan = manager.provider_context.gate(Plan(Action.HARD, "over the learned hard threshold rev18tn"),
                                         manager.budgets.hard + 2_000)
    assert plan.action is Action.HARD, plan.reason
    manager.forget_learned_limit()
    assert manager.provider_context.budgets is manager.budgets
