"""A GitHub token followed by a dash and more (``ghp_…-1``, as in a file name or a log's counter) is caught.

The prefixed patterns refuse a token that continues with another token character, so as not to match inside a
longer identifier; for a GitHub token a trailing ``-`` is a separator, not part of the token. On c2b40e8 the token
went out in clear; the review of the seventh session found it.
"""

from __future__ import annotations

import pytest

from contextfold.redact import Redactor

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.mark.parametrize("text", [f"{TOKEN}-1", f"export GH={TOKEN}-backup", f"saved to {TOKEN}-2.txt"])
def test_a_github_token_followed_by_a_dash_is_redacted(text: str) -> None:
    redacted = Redactor().redact_text(text)
    assert TOKEN not in redacted and TOKEN[4:20] not in redacted


def test_a_longer_identifier_with_the_prefix_is_still_left_alone() -> None:
    identifier = "ghp_" + "a" * 36 + "_suffix_of_a_name"
    assert Redactor().redact_text(identifier) == identifier
