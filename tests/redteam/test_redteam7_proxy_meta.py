"""A read-only view of the caller's dict is still the caller's: a Message must own what a MappingProxyType shows.

Pre-existing (also on c2b40e8), found while attacking the seventh session's copies (issue 22): ``Message`` copied
the nested dicts and lists of a ``meta``/``extra`` it was handed (the redteam6 fix), but took a ``MappingProxyType``
as its own, nested values and all. A caller who passed ``meta=MappingProxyType(ctx)`` and later wrote a credential
into ``ctx``'s nested list changed a message already found clean: the credential reached the archive in clear.

Owning every read-only view in ``Message.__post_init__`` (tried first) cost 28 MB of peak memory at 100,000 recorded
messages (bench/bench_scale.py --only recorded: 288 vs 260 MB): the importer's nested ``source_extra`` of ~5,400
messages was copied while the caller still held the originals. Fixed in the thirteenth session: the views contextfold
makes are over a dict of its own kind (``messages._OwnDict``), kept as they are; a caller's view is copied like a dict.
"""

from __future__ import annotations

import json
from types import MappingProxyType

from contextfold.manager import ContextManager
from contextfold.messages import Message
from contextfold.redact import Redactor

SECRET = "hunter2-Kx9vQ7mZ"


def test_a_message_owns_the_nested_values_of_a_read_only_view_it_was_handed() -> None:
    ctx = {"source": "chat", "trail": ["read"], "deep": {"k": "v"}}
    m = Message("user", "hi", meta=MappingProxyType(ctx), extra=MappingProxyType(ctx))
    ctx["trail"].append("changed")
    ctx["deep"]["k"] = "changed"
    ctx["source"] = "changed"
    for frozen in (m.meta, m.extra):
        assert dict(frozen) == {"source": "chat", "trail": ["read"], "deep": {"k": "v"}}


def test_a_clean_message_stays_clean_when_the_dict_behind_its_read_only_meta_changes() -> None:
    ctx = {"source": "chat", "trail": ["read"]}
    m = Message("user", "hi", meta=MappingProxyType(ctx))
    redactor = Redactor()
    assert redactor.redact_message(m) is m
    ctx["trail"].append(f"password={SECRET}")
    assert SECRET not in repr(redactor.redact_message(m).meta)


def test_the_archive_never_gets_what_the_caller_wrote_behind_a_read_only_meta() -> None:
    ctx = {"source": "chat", "trail": ["read"]}
    cm = ContextManager(model="gpt-4o", store="memory", archive="memory", session_id="rt7-proxy-meta",
                        redact=Redactor(apply_to_model=True))
    cm.add([Message("user", "What failed?", meta=MappingProxyType(ctx)), Message("assistant", "The build.")])
    cm.prepare()
    ctx["trail"].append(f"password={SECRET}")
    cm.add([Message("user", "next")])
    cm.prepare()
    cm.compact(force=True)
    cm.close()
    assert cm.archive is not None
    archived = [m for _, messages in cm.archive.transcripts(cm.session_id) for m in messages]
    assert "What failed?" in [m.text for m in archived]
    assert SECRET not in json.dumps([dict(m.meta) for m in archived], default=str)
