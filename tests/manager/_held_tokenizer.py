"""A tokenizer whose arrival a test decides (the manager's lazy counter counts byte bounds until it arrives)."""

from __future__ import annotations

from contextfold.tokens import TiktokenCounter


class HeldTokenizer(TiktokenCounter):
    """o200k whose arrival the test decides: not ready until ``arrive()`` (or a wait for it)."""

    def __init__(self) -> None:
        super().__init__("o200k_base")
        self.arrived = False

    @property
    def ready(self) -> bool:
        return self.arrived

    def preload(self) -> None:
        pass  # (the test plays the background thread)

    def wait_ready(self) -> None:
        super().wait_ready()
        self.arrived = True

    def arrive(self) -> None:
        self.wait_ready()
