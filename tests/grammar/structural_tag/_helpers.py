"""Shared checks for structural tag tests: token walks and brute-force masks vs the reference."""

from __future__ import annotations

import functools

from tests.grammar.structural_tag._reference import Reference


@functools.lru_cache(maxsize=2)
def _token_texts(vocab) -> tuple[str | None, ...]:
    out = []
    for data in vocab.token_bytes:
        try:
            out.append(data.decode("utf-8") if data else None)
        except UnicodeDecodeError:
            out.append(None)  # a partial UTF-8 sequence: not a text on its own
    return tuple(out)


def mask_mismatches(grammar, request: dict, prefix: str) -> list[str]:
    """Tokens (as text) whose mask bit at ``prefix`` disagrees with the reference's prefix
    oracle: allowed iff ``prefix + token`` is a prefix of some valid output. Tokens that are
    not whole UTF-8 text are left out; EOS is checked against ``is_sentence``."""
    reference = Reference(request)
    matcher = grammar.matcher()
    assert matcher.accept_bytes(prefix.encode()), prefix
    allowed = set(matcher.allowed_token_ids().tolist())
    bad = []
    for token_id, text in enumerate(_token_texts(grammar.vocab)):
        if text is None:
            continue
        if reference.is_prefix(prefix + text) != (token_id in allowed):
            bad.append(text)
    for eos in grammar.vocab.eos_token_ids:
        if reference.is_sentence(prefix) != (int(eos) in allowed):
            bad.append("<EOS>")
    return bad


def walk(grammar, tokenizer, text: str) -> tuple[bool, bool]:
    """Feed ``text`` as the tokenizer tokenizes it; (every token accepted and allowed by the
    mask before it, the matcher accepting at the end)."""
    matcher = grammar.matcher()
    for token_id in tokenizer.encode(text, add_special_tokens=False):
        if token_id not in set(matcher.allowed_token_ids().tolist()):
            assert not matcher.accept_token(token_id)
            return False, False
        assert matcher.accept_token(token_id)
    return True, matcher.is_accepting()


def straddles(tokenizer, text: str, offset: int) -> bool:
    """True if one token of ``tokenizer.encode(text)`` covers both ``offset - 1`` and
    ``offset`` (it straddles a boundary there)."""
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    return any(start < offset < end for start, end in encoded["offset_mapping"])
