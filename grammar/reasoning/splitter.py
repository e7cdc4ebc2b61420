"""ReasoningSplitter: a generated text split into thoughts and answer as it arrives."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from formcast.grammar.reasoning.config import ReasoningConfig


class ReasoningSplitter:
    """Splits a streamed output into reasoning and answer pieces as it arrives.

    The start tag is dropped (an output that does not begin with it did not think: all of it
    is answer); a piece that may be the beginning of the end tag is held back until the next
    text shows whether it is. Everything after the end tag is answer.
    """

    def __init__(self, config: ReasoningConfig) -> None:
        self.config = config
        self._pending = ""  # text not yet handed out (a possible start of a tag)
        self._phase = "start" if config.start else "thinking"

    def feed(self, text: str) -> tuple[str, str]:
        """``(reasoning piece, answer piece)`` that ``text`` completes."""
        if self._phase == "answer":
            return "", text
        self._pending += text
        if self._phase == "start":
            start = self.config.start
            if len(self._pending) < len(start) and start.startswith(self._pending):
                return "", ""
            if not self._pending.startswith(start):  # the model did not think: all answer
                answer, self._pending = self._pending, ""
                self._phase = "answer"
                return "", answer
            self._pending = self._pending[len(start) :]
            self._phase = "thinking"
        end = self.config.end
        cut = self._pending.find(end)
        if cut >= 0:
            thoughts, answer = self._pending[:cut], self._pending[cut + len(end) :]
            self._pending = ""
            self._phase = "answer"
            return thoughts, answer
        keep = next(
            (k for k in range(min(len(end) - 1, len(self._pending)), 0, -1)
             if self._pending.endswith(end[:k])),
            0,
        )  # fmt: skip
        thoughts = self._pending[: len(self._pending) - keep]
        self._pending = self._pending[len(thoughts) :]
        return thoughts, ""

    def finish(self) -> str:
        """The reasoning held back at the end of the output (a cut end tag)."""
        rest, self._pending = self._pending, ""
        return rest if self._phase != "answer" else ""
