"""A provider counting the request several times ours still recovers in one retry (issue 17; review of s20g).

The provider counts what we do not (images, tool schemas, a gateway's own prompt): its error states the request's
count and its limit, both FACTOR times ours. s20g read a count over 2.5x ours as no figure at all, and the
figureless floors then refused to shrink the session far enough: RecoveryFailed where a9a74c5 recovered in two
requests. The stated figures drive this session's retry again; only what is shared is bounded (no other session of
the model learns a limit from such a count).
"""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest
from _rec_history import history, session

from contextfold.recovery import call_with_recovery
from contextfold.stores import MemoryBlobStore
from contextfold.testing.server import RecordedRequest, ScriptedLLMServer
from contextfold.testing.wire import ErrorReply, Reply

# The provider's limit: a tenth of what the first request carried (by its own count).
LIMIT_SHARE = 0.1


class UncountingProvider:
    """Counts every request ``factor`` times its bytes / 4 and refuses those over its limit with both figures."""

    def __init__(self, factor: float) -> None:
        self.factor = factor
        self.limit: int | None = None

    def __call__(self, request: RecordedRequest) -> ErrorReply | Reply:
        ours = len(json.dumps(request.body["messages"])) // 4
        prompt = int(ours * self.factor)
        if self.limit is None:
            self.limit = int(prompt * LIMIT_SHARE)
        if prompt > self.limit:
            return ErrorReply("context_overflow", prompt_tokens=prompt, limit=self.limit)
        return Reply("ok")


@pytest.mark.parametrize("factor", [4, 6, 8, 10, 20])
def test_a_provider_counting_more_than_we_do_is_recovered_in_one_retry(tmp_path: Path, factor: int) -> None:
    store = MemoryBlobStore()
    cm = session(tmp_path, store, window=128_000)
    cm.add(history(60, lines=60))
    with ScriptedLLMServer([], handler=UncountingProvider(factor)) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        # (s20g: RecoveryFailed, "refused ... as too long without saying its limit"; a9a74c5: two requests)
        reply = call_with_recovery(cm, lambda view: client.chat.completions.create(model="gpt-4o", messages=view))
    assert reply.choices[0].message.content == "ok"
    assert [r.status for r in server.requests] == [400, 200]
    # What such a count teaches is this session's: no other session of the model is kept under it.
    assert session(tmp_path, store, sid="other", window=128_000).learned_limit is None
