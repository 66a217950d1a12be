"""A stored output's digest material, read with one session's secrets blanked, is not handed to another state.

Found by review9 (pre-existing on e20fd56): ``ref_material`` remembers the material of a stored output by its ref
(``("ref-blanked", ref_id)``), process-wide, whatever secrets blanked it. Refs are content hashes, so two sessions
holding the same output share the entry: the material blanked with the first session's secrets (or with none,
before a secret was learned) was what every later digest of that output was built from. The digests then differed
from the uncached path (items around a secret another session knew were dropped or kept), and a session relied on
its item filter alone for a value its blanking would have taken out.
"""

from __future__ import annotations

import uuid

from contextfold.cache._digest import ref_material
from contextfold.redact import Redactor


def _output(secret: str, nonce: str) -> str:
    rows = [f"row {i}: host=db{i}.internal user=svc_{nonce}_{i} status=ok" for i in range(30)]
    return "\n".join([*rows, f"token {secret} appended", f"url=https://x.example/{secret}/path"])


def _fresh(text: str, redactor: Redactor) -> tuple[str, ...]:
    return tuple(ref_material(f"fresh-{uuid.uuid4().hex}", lambda: text, redactor.blank,
                              state=redactor.digest_state()).items)


def test_material_read_by_a_session_that_did_not_know_the_secret_is_not_used_by_one_that_does() -> None:
    nonce = uuid.uuid4().hex[:8]
    secret = f"Hq{nonce}Zt5Wn"
    text, ref = _output(secret, nonce), f"ref-{nonce}"
    ignorant, knowing = Redactor(), Redactor()
    knowing.learn(secret, "password")
    ref_material(ref, lambda: text, ignorant.blank, state=ignorant.digest_state())
    shared = ref_material(ref, lambda: text, knowing.blank, state=knowing.digest_state())
    assert tuple(shared.items) == _fresh(text, knowing)
    assert not [item for item in shared.items if secret in item]


def test_material_read_before_a_secret_was_learned_is_read_again_after() -> None:
    nonce = uuid.uuid4().hex[:8]
    secret = f"Kp{nonce}Yw3Rm"
    text, ref = _output(secret, nonce), f"ref-{nonce}"
    redactor = Redactor()
    before = ref_material(ref, lambda: text, redactor.blank, state=redactor.digest_state())
    assert [item for item in before.items if secret in item]  # (not known yet: read as it is)
    redactor.learn(secret, "password")
    after = ref_material(ref, lambda: text, redactor.blank, state=redactor.digest_state())
    assert tuple(after.items) == _fresh(text, redactor)
    assert not [item for item in after.items if secret in item]


def test_the_remembered_material_keeps_no_session_memory_alive() -> None:
    import gc
    import weakref

    nonce = uuid.uuid4().hex[:8]
    redactor = Redactor()
    redactor.learn(f"Vb{nonce}Qe8Lc", "password")
    memory = weakref.ref(redactor.memory)
    ref_material(f"ref-{nonce}", lambda: _output(f"Vb{nonce}Qe8Lc", nonce), redactor.blank,
                 state=redactor.digest_state())
    del redactor
    gc.collect()
    assert memory() is None
