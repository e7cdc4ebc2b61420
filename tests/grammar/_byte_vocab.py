"""A byte-level vocabulary for tests: every single byte, chosen multi-byte tokens, EOS."""

from __future__ import annotations

from formcast.grammar.index.vocabulary import Vocabulary


def byte_vocab(extra: list[bytes]) -> Vocabulary:
    """Token ``b`` is byte ``b`` (0-255), then the tokens of ``extra`` in order, then EOS."""
    token_bytes = tuple(bytes([b]) for b in range(256)) + tuple(extra) + (b"",)
    eos = len(token_bytes) - 1
    return Vocabulary(
        token_bytes=token_bytes,
        eos_token_ids=frozenset({eos}),
        special_token_ids=frozenset({eos}),
        vocab_size=len(token_bytes),
        kind="byte_level",
        num_tokenizer_tokens=len(token_bytes),
    )
