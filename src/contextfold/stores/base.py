"""The :class:`BlobStore` protocol, re-exported from the core (:mod:`contextfold.cache.blobs`) where it lives.

Backends import it from here or from :mod:`contextfold.cache.blobs`; both names are the same objects.
"""

from __future__ import annotations

from ..cache import BlobInfo, BlobStore

__all__ = ["BlobInfo", "BlobStore"]
