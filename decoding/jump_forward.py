"""Jump-forward: turn the bytes a grammar forces into the tokens the tokenizer would produce.

When every valid continuation starts with the same bytes (``{"name": "`` after ``{`` in a
JSON object with one required property), sampling them one token at a time wastes forward
passes. We append them at once, but as the tokenizer would have tokenized them *in context*,
so the model sees the token boundaries it was trained on:

1. Re-tokenize the last ``k`` context tokens' text followed by the forced text. Accept the
   result only if it reproduces those ``k`` tokens exactly (the forced text does not merge
   backwards into tokens already emitted); try ``k = max_context_tokens .. 0``.
2. Drop the last forced token unless nothing can follow it: later text could still merge with
   it (``"J`` becomes one token once the grammar lets ``J`` follow ``"``). Boundaries before
   it are kept: byte-level BPE's pre-tokenizer makes them independent of what follows.

Invariant: the returned tokens' bytes are exactly a prefix of the forced bytes, so a matcher
accepts all of them. An empty result means "sample normally".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from formcast.grammar import Matcher, Vocabulary


def longest_utf8_prefix(data: bytes) -> int:
    """Length of the longest prefix of ``data`` that is complete, valid UTF-8."""
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            data[:cut].decode("utf-8")
            return cut
        except UnicodeDecodeError:
            continue
    # The invalid byte sits earlier than the last character: fall back to a strict scan.
    for cut in range(len(data), -1, -1):
        try:
            data[:cut].decode("utf-8")
            return cut
        except UnicodeDecodeError:
            continue
    return 0


def forced_token_ids(
    forced: bytes,
    context_token_ids: Sequence[int],
    vocab: Vocabulary,
    encode: Callable[[str], list[int]],
    *,
    is_final: bool = False,
    max_context_tokens: int = 4,
) -> list[int]:
    """Tokens to append for ``forced`` bytes, tokenized canonically in context.

    Parameters
    ----------
    forced:
        Bytes the grammar forces next (``Matcher.forced_bytes()``).
    context_token_ids:
        Tokens already in the sequence (prompt and output), oldest first.
    vocab:
        The vocabulary, for token bytes.
    encode:
        ``text -> token ids`` without special tokens (e.g. ``tokenizer.encode(text,
        add_special_tokens=False)``).
    is_final:
        True if nothing can follow the forced bytes (the grammar terminates after them); then
        the last token is kept, since no later text can merge with it.
    max_context_tokens:
        How many trailing context tokens to re-tokenize with the forced text.

    Returns
    -------
    list[int]
        Token ids whose concatenated bytes are a prefix of ``forced``; possibly empty.
    """
    cut = longest_utf8_prefix(forced)
    if cut == 0:
        return []
    if cut < len(forced):
        is_final = False  # the remaining bytes of a character follow the cut
    forced_text = forced[:cut]
    num_context = min(max_context_tokens, len(context_token_ids))
    for k in range(num_context, -1, -1):
        context = list(context_token_ids[len(context_token_ids) - k :])
        context_bytes = vocab.decode_bytes(context)
        if len(context_bytes) != sum(len(vocab.token_bytes[i]) for i in context) or any(
            not vocab.token_bytes[i] for i in context
        ):
            continue  # a special token in the window: its text is not re-tokenizable
        try:
            text = (context_bytes + forced_text).decode("utf-8")
            if context_bytes:
                context_bytes.decode("utf-8")
        except UnicodeDecodeError:
            continue  # the window starts or ends inside a character
        token_ids = encode(text)
        if token_ids[:k] != context:
            continue
        new_ids = token_ids[k:]
        if vocab.decode_bytes(new_ids) != forced_text or any(
            not vocab.token_bytes[i] for i in new_ids
        ):
            continue
        return new_ids if is_final else new_ids[:-1]
    return []


def jump_forward_token_ids(
    matcher: Matcher,
    context_token_ids: Sequence[int],
    vocab: Vocabulary,
    encode: Callable[[str], list[int]],
    *,
    max_tokens: int | None = None,
    max_context_tokens: int = 4,
) -> list[int]:
    """Tokens to append now because ``matcher``'s grammar forces them (not yet accepted).

    The one jump-forward decision shared by the reference loop and the engine: the forced
    bytes of ``matcher`` (``Matcher.forced_bytes()``) tokenized canonically in context by
    `forced_token_ids`; ``is_final`` is whether the grammar terminates once the forced bytes
    are written (checked on a fork, so ``matcher`` is not moved).

    Parameters
    ----------
    matcher:
        The sequence's grammar cursor (``forced_bytes``, ``fork``, ``accept_bytes``,
        ``is_terminated``).
    context_token_ids:
        Prompt and output so far, oldest first.
    vocab, encode:
        As in `forced_token_ids`.
    max_tokens:
        Return at most this many tokens (the sequence's remaining ``max_tokens`` budget).

    Returns
    -------
    list[int]
        Possibly empty; the caller appends them and advances ``matcher`` over them.
    """
    if max_tokens is not None and max_tokens <= 0:
        return []
    forced = matcher.forced_bytes()
    if not forced:
        return []
    probe = matcher.fork()
    is_final = bool(probe.accept_bytes(forced)) and probe.is_terminated()
    token_ids = forced_token_ids(
        forced,
        context_token_ids,
        vocab,
        encode,
        is_final=is_final,
        max_context_tokens=max_context_tokens,
    )
    return token_ids if max_tokens is None else token_ids[:max_tokens]
