"""Refs: the content-addressed ids of cached tool outputs, and what the model needs to page through one.

Everything else in the cache package names outputs by these; this module imports nothing from it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

__all__ = ["REF_DIGEST_BYTES", "REF_PATTERN", "REF_PREFIX", "ToolOutputRef", "is_ref_id", "ref_id_for"]

# Ref ids are content addresses: a fixed prefix and 64 bits of BLAKE2b (collisions need ~4 billion outputs).
REF_PREFIX = "tout_"
REF_DIGEST_BYTES = 8
REF_PATTERN = re.compile(r"tout_[0-9a-f]{16}")
_REF_FULL = re.compile(r"\Atout_[0-9a-f]{16}\Z")


def ref_id_for(data: bytes) -> str:
    """The content-addressed ref id of ``data``: the same bytes give the same id in every run."""
    return REF_PREFIX + hashlib.blake2b(data, digest_size=REF_DIGEST_BYTES).hexdigest()


def is_ref_id(value: object) -> bool:
    """Whether ``value`` has the shape of a ref id (``tout_`` and 16 lowercase hex digits)."""
    return isinstance(value, str) and _REF_FULL.match(value) is not None


@dataclass(frozen=True, slots=True)
class ToolOutputRef:
    """A cached tool output: its id and what the model needs to page through it."""

    id: str
    byte_size: int
    line_count: int
