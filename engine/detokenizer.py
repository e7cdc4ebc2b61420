"""IncrementalDetokenizer: turn a growing list of token ids into text deltas, and find stops.

Two ways to the same text:

- **Byte table** (byte-level BPE tokenizers whose decode is "concatenate the tokens' bytes,
  then UTF-8 with replacement": SmolLM2, Llama 3, Qwen): each token's bytes
  (:class:`TokenTexts`) go through one incremental UTF-8 decoder, which holds back the bytes
  of an incomplete character until the next token completes it. O(1) per token, no call into
  the tokenizer.
- **Window** (every other tokenizer): the text of new tokens depends on their neighbours
  (SentencePiece drops a leading space at the start of a string), so each step decodes a short
  window ``ids[prefix_offset:]`` and emits what it adds to ``ids[prefix_offset:read_offset]``,
  holding back text that ends in an incomplete character (U+FFFD) until the next token
  completes it. The window starts on the last prompt tokens so the first output token is
  decoded in context.

Stop strings: the text is searched around each new delta; on a match the text is cut before
the stop string. While running, the last ``max(len(stop)) - 1`` characters are held back from
streaming, so a stream never shows a prefix of a stop string that later matches.
"""

from __future__ import annotations

import codecs
import copy
import json
import weakref
from dataclasses import dataclass
from typing import Any

from formcast.errors import TokenizerError
from formcast.grammar import Vocabulary

_CONTEXT_TOKENS = 5


@dataclass(frozen=True)
class TokenTexts:
    """The bytes each token adds to a byte-level tokenizer's decoded text.

    ``tokenizer.decode(ids, skip_special_tokens=s)`` equals
    ``b"".join(table[i] for i in ids).decode("utf-8", "replace")`` with ``table`` =
    ``skipped`` if ``s`` else ``shown`` (ids past the tokenizer write nothing).

    Attributes
    ----------
    shown : tuple[bytes, ...]
        Special tokens write their text.
    skipped : tuple[bytes, ...]
        Special tokens write nothing.
    """

    shown: tuple[bytes, ...]
    skipped: tuple[bytes, ...]

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> TokenTexts | None:
        """The table of ``tokenizer``, or None where its decode is not a byte concatenation
        (SentencePiece decoders strip a leading space; ``clean_up_tokenization_spaces``
        rewrites text; decoder chains beyond ``ByteLevel``)."""
        backend = getattr(tokenizer, "backend_tokenizer", None)
        if backend is None or getattr(tokenizer, "clean_up_tokenization_spaces", False):
            return None
        decoder = json.loads(backend.to_str()).get("decoder") or {}
        if decoder.get("type") != "ByteLevel":
            return None
        try:
            vocab = Vocabulary.from_tokenizer(tokenizer)
        except TokenizerError:
            return None
        skipped = vocab.token_bytes  # special tokens (EOS included) hold b""
        shown = list(skipped)
        for token_id in vocab.special_token_ids:
            if token_id < len(shown):
                piece = tokenizer.convert_ids_to_tokens(token_id)
                shown[token_id] = piece.encode("utf-8") if isinstance(piece, str) else b""
        return cls(shown=tuple(shown), skipped=tuple(skipped))


_TEXTS_OF: weakref.WeakKeyDictionary[Any, TokenTexts | None] = weakref.WeakKeyDictionary()


def token_texts(tokenizer: Any) -> TokenTexts | None:
    """`TokenTexts.from_tokenizer`, built once per live tokenizer object (weakly held)."""
    try:
        return _TEXTS_OF[tokenizer]
    except KeyError:
        pass
    except TypeError:  # not weakly referenceable: build each time
        return TokenTexts.from_tokenizer(tokenizer)
    texts = TokenTexts.from_tokenizer(tokenizer)
    _TEXTS_OF[tokenizer] = texts
    return texts


def _utf8_decoder() -> codecs.IncrementalDecoder:
    return codecs.getincrementaldecoder("utf-8")("replace")


class IncrementalDetokenizer:
    """Per-sequence incremental decoding state.

    Parameters
    ----------
    tokenizer : Any
        A transformers tokenizer (``decode``).
    prompt_token_ids : list[int]
        The prompt, for context of the first output tokens (window decoding only).
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
        texts = token_texts(tokenizer)
        # byte table path: the table for this setting and one UTF-8 decoder
        self.table: tuple[bytes, ...] | None = (
            None if texts is None else texts.skipped if skip_special_tokens else texts.shown
        )
        self.utf8 = _utf8_decoder()
        # window path
        self.ids: list[int] = (
            [] if self.table is not None else list(prompt_token_ids[-_CONTEXT_TOKENS:])
        )
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
        if self.table is not None:
            piece = self.table[token_id] if token_id < len(self.table) else b""
            added = self.utf8.decode(piece) if piece else ""
            if not added:
                return None
            previous_len = len(self.text)
            self.text += added
            return self._find_stop(previous_len) if check_stop else None
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
        if self.table is not None:
            self.text += self.utf8.decode(b"", final=True)
            return
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
        other.utf8 = _utf8_decoder()
        other.utf8.setstate(self.utf8.getstate())
        return other

    def take_delta(self, is_finished: bool) -> str:
        """Text not yet streamed (minus the stop-string hold-back while running)."""
        end = len(self.text) if is_finished else max(0, len(self.text) - self.hold_back)
        end = max(end, self.num_streamed_chars)
        delta = self.text[self.num_streamed_chars : end]
        self.num_streamed_chars = end
        return delta
