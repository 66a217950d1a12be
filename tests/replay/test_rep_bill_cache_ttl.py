"""A replay bills its calls at the prompt cache its decisions weigh (``policy.prompt_cache_ttl``, ``cache_pricing``).

Left by lane s19g: with ``prompt_cache_ttl="1h"`` the decisions priced Anthropic's 1-hour cache (2x writes, kept an
hour) while the replay's meter billed the 5-minute one (``cache_rates(model)``): with calls 360 s apart the bill said
every waiting call rewrote the whole view (the cache expired) while the decisions waited because it was kept.
"""

from __future__ import annotations

import pytest

from contextfold.importers._session import RecordedSession
from contextfold.messages import Message
from contextfold.replay.harness import ReplayOptions, SessionReplayer


@pytest.mark.parametrize(("policy", "ttl", "lifetime_s", "write_price"),
                         [({"prompt_cache_ttl": "1h"}, "1h", 3_600.0, 6.0), ({}, "5m", 300.0, 3.75)])
def test_the_bill_uses_the_cache_the_decisions_use(policy: dict[str, str], ttl: str, lifetime_s: float,
                                                    write_price: float) -> None:
    session = RecordedSession("s19g1-bill", "jsonl", [Message.system("s"), Message.user("u"), Message.assistant("a")])
    replayer = SessionReplayer(session, ReplayOptions(model="claude-sonnet-4", window=16_000, policy=policy,
                                                      call_interval_s=360))
    try:
        decided = replayer.manager._economics.rates
        billed = replayer._meter.rates["model"]
        assert (decided.ttl, decided.lifetime_s, decided.cache_write_price) == (ttl, lifetime_s, write_price)
        assert billed is decided  # s19g: ("5m", 300.0, 3.75) under the 1-hour policy
        assert replayer._unmanaged_meter.rates["model"] is decided
    finally:
        replayer.manager.close()
