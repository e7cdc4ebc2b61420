"""IncrementalDetokenizer: turn a growing list of token ids into text deltas, and find stops.

The text of new tokens depends on their neighbours (byte-level BPE splits UTF-8 characters
across tokens; SentencePiece drops a leading space at the start of a string). So each step
decodes a short window ``ids[prefix_offset:]`` and emits what it adds to
``ids[prefix_offset:read_offset]``, holding back text that ends in an incomplete character
(U+FFFD) until the next token completes it. The window starts on the last prompt tokens so
the first output token is decoded in context.

Stop strings: the text is searched around each new delta; on a match the text is cut before
the stop string. While running, the last ``max(len(stop)) - 1`` characters are held back from
streaming, so a stream never shows a prefix of a stop string that later matches.
"""

from __future__ import annotations

import copy
from typing import Any

_CONTEXT_TOKENS = 5


class IncrementalDetokenizer:
    """Per-sequence incremental decoding state.

    Parameters
    ----------
    tokenizer : Any
        A transformers tokenizer (``decode``).
    prompt_token_ids : list[int]
        The prompt, for context of the first output tokens.
    stop : tuple[str, ...]
        Stop strings.
    skip_special_tokens : bool
        Leave special tokens out of the text (else their text is shown).
    """

    def __init__(
        self,
        tokenizer: Any,
        prompt_token_ids: list[int],
        stop: tuple[str, ...] = (),
        skip_special_tokens: bool = True,
    ):
        self.tokenizer = tokenizer
        self.skip_special_tokens = skip_special_tokens
        self.ids: list[int] = list(prompt_token_ids[-_CONTEXT_TOKENS:])
        self.prefix_offset = 0
        self.read_offset = len(self.ids)
        self.text = ""
        self.stop = stop
        self.hold_back = max((len(s) for s in stop), default=1) - 1
        self.num_streamed_chars = 0

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=self.skip_special_tokens)

    def append(self, token_id: int, check_stop: bool = True) -> str | None:
        """Add one token; return the stop string if the text now contains one (text is cut)."""
        self.ids.append(token_id)
        prefix_text = self._decode(self.ids[self.prefix_offset : self.read_offset])
        new_text = self._decode(self.ids[self.prefix_offset :])
        if len(new_text) <= len(prefix_text) or new_text.endswith("\ufffd"):
            return None
        previous_len = len(self.text)
        self.text += new_text[len(prefix_text) :]
        self.prefix_offset = self.read_offset
        self.read_offset = len(self.ids)
        return self._find_stop(previous_len) if check_stop else None

    def flush(self) -> None:
        """Emit whatever is held back (an incomplete character at the end of generation)."""
        prefix_text = self._decode(self.ids[self.prefix_offset : self.read_offset])
        new_text = self._decode(self.ids[self.prefix_offset :])
        if len(new_text) > len(prefix_text):
            self.text += new_text[len(prefix_text) :]
            self.prefix_offset = self.read_offset = len(self.ids)

    def _find_stop(self, previous_len: int) -> str | None:
        # the earliest match wins; a match must end inside the new text
        best: tuple[int, str] | None = None
        for stop in self.stop:
            index = self.text.find(stop, max(0, previous_len - len(stop) + 1))
            if index >= 0 and (best is None or index < best[0]):
                best = (index, stop)
        if best is None:
            return None
        self.text = self.text[: best[0]]
        return best[1]

    def fork(self) -> IncrementalDetokenizer:
        """An independent copy (for a sequence forked from this one's sequence)."""
        other = copy.copy(self)
        other.ids = list(self.ids)
        return other

    def take_delta(self, is_finished: bool) -> str:
        """Text not yet streamed (minus the stop-string hold-back while running)."""
        end = len(self.text) if is_finished else max(0, len(self.text) - self.hold_back)
        end = max(end, self.num_streamed_chars)
        delta = self.text[self.num_streamed_chars : end]
        self.num_streamed_chars = end
        return delta
