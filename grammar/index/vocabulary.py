"""Vocabulary: token id -> the exact bytes that token contributes to the output.

Byte-level BPE tokenizers (GPT-2, Llama 3, SmolLM2) store each byte as a printable unicode
character; SentencePiece-style tokenizers write a space as ``▁`` and fall back to ``<0xNN>``
tokens for bytes outside the vocabulary. Grammar masks work on bytes, so both are mapped back
here, once, exactly. Special tokens (EOS, chat markers) contribute no bytes and are never
allowed by a grammar; EOS is allowed separately where the grammar accepts.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any

from formcast.errors import TokenizerError
from formcast.grammar import caches

_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")
_SPIECE_SPACE = "\u2581"  # ▁


@cache
def byte_level_decoder_map() -> dict[str, int]:
    """The inverse of GPT-2's ``bytes_to_unicode``: printable char -> byte value.

    Bytes that are printable latin-1 map to themselves; the remaining 68 bytes are shifted to
    code points 256.. in increasing byte order.
    """
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    byte_values = printable[:]
    code_points = printable[:]
    shift = 0
    for b in range(256):
        if b not in printable:
            byte_values.append(b)
            code_points.append(256 + shift)
            shift += 1
    return {chr(c): b for b, c in zip(byte_values, code_points, strict=True)}


@dataclass(frozen=True)
class Vocabulary:
    """Exact bytes of every token id, plus the ids grammars treat specially.

    Attributes
    ----------
    token_bytes:
        ``token_bytes[i]`` is what token ``i`` appends to the output, for every id below
        ``vocab_size``. Special and padding ids have ``b""``.
    eos_token_ids:
        Ids that end a sequence; allowed by a grammar exactly where it accepts.
    special_token_ids:
        Control tokens (including EOS) that never appear inside constrained text.
    vocab_size:
        Width of the logits. Ids in ``[len(tokenizer), vocab_size)`` are padding and never allowed.
    kind:
        ``"byte_level"`` or ``"sentencepiece"``: how token strings were mapped to bytes.
    special_token_texts:
        ``(text, id)`` of the tokenizer's special tokens other than EOS (``"[TOOL_CALLS]"``,
        ``"<|python_tag|>"``): what :meth:`with_control_tokens` looks control tokens up in.
    """

    token_bytes: tuple[bytes, ...]
    eos_token_ids: frozenset[int]
    special_token_ids: frozenset[int]
    vocab_size: int
    kind: str
    num_tokenizer_tokens: int
    special_token_texts: tuple[tuple[str, int], ...] = ()
    _hash: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        if len(self.token_bytes) != self.vocab_size:
            raise TokenizerError(
                f"token_bytes has {len(self.token_bytes)} entries but vocab_size={self.vocab_size}"
            )
        bad = [i for i in self.eos_token_ids if not 0 <= i < self.num_tokenizer_tokens]
        if bad:
            raise TokenizerError(f"EOS token ids {bad} are outside the tokenizer's vocabulary")
        if not self._hash:
            object.__setattr__(self, "_hash", self._compute_hash())

    # -- construction -----------------------------------------------------------------------

    @classmethod
    def from_tokenizer(
        cls,
        tokenizer: Any,
        vocab_size: int | None = None,
        eos_token_ids: Iterable[int] | None = None,
    ) -> Vocabulary:
        """Build the vocabulary of a Hugging Face tokenizer.

        Parameters
        ----------
        tokenizer:
            A ``transformers`` fast tokenizer or a ``tokenizers.Tokenizer``.
        vocab_size:
            The model's logits width; defaults to the tokenizer's length. Must not be smaller.
        eos_token_ids:
            Ids that end generation; defaults to the tokenizer's ``eos_token_id``.

        Raises
        ------
        TokenizerError
            If the tokenizer is not byte-level BPE or SentencePiece-style, or ``vocab_size``
            is smaller than the tokenizer.
        """
        backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
        if not hasattr(backend, "to_str"):
            raise TokenizerError(
                f"{type(tokenizer).__name__} is not a fast (Rust `tokenizers`) tokenizer; "
                "load it with use_fast=True"
            )
        spec = json.loads(backend.to_str())
        kind = _tokenizer_kind(spec)
        pieces = _id_to_piece(spec)
        num_tokens = max(pieces) + 1 if pieces else 0
        size = num_tokens if vocab_size is None else int(vocab_size)
        if size < num_tokens:
            raise TokenizerError(
                f"vocab_size={size} is smaller than the tokenizer's {num_tokens} tokens"
            )
        special_ids = {t["id"] for t in spec.get("added_tokens", []) if t.get("special")}
        added_ids = {t["id"] for t in spec.get("added_tokens", [])}
        byte_fallback = bool(spec.get("model", {}).get("byte_fallback", False))

        if eos_token_ids is None:
            eos = getattr(tokenizer, "eos_token_id", None)
            eos_ids = {eos} if isinstance(eos, int) else set()
        else:
            eos_ids = set(eos_token_ids)
        special_ids |= eos_ids

        table: list[bytes] = [b""] * size
        for token_id, piece in pieces.items():
            if token_id in special_ids:
                continue
            if token_id in added_ids:
                table[token_id] = piece.encode("utf-8")  # added tokens are stored verbatim
            elif kind == "byte_level":
                table[token_id] = _byte_level_bytes(piece, token_id)
            else:
                table[token_id] = _sentencepiece_bytes(piece, byte_fallback)
        special_texts = sorted(
            (pieces[i], i) for i in special_ids - eos_ids if i in pieces and pieces[i]
        )
        return cls(
            token_bytes=tuple(table),
            eos_token_ids=frozenset(eos_ids),
            special_token_ids=frozenset(special_ids),
            vocab_size=size,
            kind=kind,
            num_tokenizer_tokens=num_tokens,
            special_token_texts=tuple(special_texts),
        )

    # -- queries ------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self.vocab_size

    def __getitem__(self, token_id: int) -> bytes:
        return self.token_bytes[token_id]

    @property
    def hash(self) -> str:
        """A stable hex digest of everything a compiled grammar depends on."""
        return self._hash

    def is_allowed_in_text(self, token_id: int) -> bool:
        """True if the token contributes bytes (not special, not padding, not empty)."""
        return bool(self.token_bytes[token_id])

    def control_token_id(self, text: str) -> int | None:
        """The id of the special (non-EOS) token whose text is ``text``, if there is one."""
        return self._special_id_of.get(text)

    @cached_property
    def _special_id_of(self) -> dict[str, int]:
        return dict(self.special_token_texts)

    def with_control_tokens(self, token_ids: Iterable[int]) -> Vocabulary:
        """This vocabulary with the special tokens ``token_ids`` writing their text.

        A grammar compiled over it allows such a token wherever its text may come (a tool
        call's ``[TOOL_CALLS]`` trigger), besides the same text written by ordinary tokens;
        the text is what the token decodes to with special tokens shown. EOS ids cannot be
        chosen (EOS is allowed where the grammar accepts). Memoised per vocabulary and ids.

        Raises
        ------
        TokenizerError
            An id that is not a special non-EOS token of this vocabulary.
        """
        ids = frozenset(int(i) for i in token_ids)
        if not ids:
            return self
        return _with_control_tokens(self, ids)

    def decode_bytes(self, token_ids: Sequence[int]) -> bytes:
        """Concatenate the exact bytes of ``token_ids`` (special tokens contribute nothing)."""
        return b"".join(self.token_bytes[i] for i in token_ids)

    def _compute_hash(self) -> str:
        digest = hashlib.sha256()
        digest.update(f"{self.kind}|{self.vocab_size}|{self.num_tokenizer_tokens}|".encode())
        digest.update(repr(sorted(self.eos_token_ids)).encode())
        digest.update(repr(sorted(self.special_token_ids)).encode())
        digest.update(repr(self.special_token_texts).encode())
        for piece in self.token_bytes:
            digest.update(len(piece).to_bytes(4, "little"))
            digest.update(piece)
        return digest.hexdigest()

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (
                self.token_bytes,
                self.eos_token_ids,
                self.special_token_ids,
                self.vocab_size,
                self.kind,
                self.num_tokenizer_tokens,
                self.special_token_texts,
                self._hash,
            ),
        )


def _rebuild(*args: Any) -> Vocabulary:
    return Vocabulary(*args)


# derived vocabularies by (base vocabulary hash, control ids): an LRU of 16 (a server meets
# one base vocabulary and one or two sets of control tokens)
_CONTROL_MEMO: OrderedDict[tuple[str, frozenset[int]], Vocabulary] = OrderedDict()
_CONTROL_MEMO_SIZE = 16
_CONTROL_LOCK = threading.Lock()


def _with_control_tokens(vocab: Vocabulary, ids: frozenset[int]) -> Vocabulary:
    key = (vocab.hash, ids)
    with _CONTROL_LOCK:
        found = _CONTROL_MEMO.get(key)
        if found is not None:
            _CONTROL_MEMO.move_to_end(key)
            return found
    text_of = {i: t for t, i in vocab.special_token_texts}
    bad = sorted(i for i in ids if i not in text_of)
    if bad:
        raise TokenizerError(
            f"token ids {bad} are not special (non-EOS) tokens of this vocabulary; "
            "control tokens must be special tokens with a text"
        )
    table = list(vocab.token_bytes)
    for i in ids:
        table[i] = text_of[i].encode("utf-8")
    derived = Vocabulary(
        token_bytes=tuple(table),
        eos_token_ids=vocab.eos_token_ids,
        special_token_ids=vocab.special_token_ids - ids,
        vocab_size=vocab.vocab_size,
        kind=vocab.kind,
        num_tokenizer_tokens=vocab.num_tokenizer_tokens,
        special_token_texts=vocab.special_token_texts,
    )
    with _CONTROL_LOCK:
        _CONTROL_MEMO[key] = derived
        while len(_CONTROL_MEMO) > _CONTROL_MEMO_SIZE:
            _CONTROL_MEMO.popitem(last=False)
    return derived


def _clear_control_memo() -> None:
    with _CONTROL_LOCK:
        _CONTROL_MEMO.clear()


caches.register("index.control_vocabularies", "LRU: 16 derived vocabularies", _clear_control_memo)


def _tokenizer_kind(spec: dict[str, Any]) -> str:
    """Classify a tokenizer.json: byte-level BPE or SentencePiece-style (▁ + byte fallback)."""

    def types(node: Any) -> list[str]:
        if not isinstance(node, dict):
            return []
        found = [node.get("type", "")]
        for key in ("decoders", "pretokenizers", "normalizers"):
            for child in node.get(key, []) or []:
                found += types(child)
        return found

    decoder_types = types(spec.get("decoder"))
    pre_types = types(spec.get("pre_tokenizer"))
    if "ByteLevel" in decoder_types or "ByteLevel" in pre_types:
        return "byte_level"
    model_type = spec.get("model", {}).get("type")
    if model_type in ("BPE", "Unigram") and (
        "Metaspace" in decoder_types
        or "Metaspace" in pre_types
        or "ByteFallback" in decoder_types
        or "Replace" in decoder_types
    ):
        return "sentencepiece"
    raise TokenizerError(
        f"unsupported tokenizer: model={model_type!r}, decoder={decoder_types}, "
        f"pre_tokenizer={pre_types}; formcast maps byte-level BPE and SentencePiece-style "
        "vocabularies to bytes"
    )


def _id_to_piece(spec: dict[str, Any]) -> dict[int, str]:
    model = spec.get("model", {})
    vocab = model.get("vocab", {})
    if isinstance(vocab, dict):
        pieces = {int(i): p for p, i in vocab.items()}
    else:  # Unigram: list of [piece, score]
        pieces = {i: entry[0] for i, entry in enumerate(vocab)}
    for added in spec.get("added_tokens", []):
        pieces[int(added["id"])] = added["content"]
    return pieces


def _byte_level_bytes(piece: str, token_id: int) -> bytes:
    table = byte_level_decoder_map()
    try:
        return bytes(table[ch] for ch in piece)
    except KeyError as exc:
        raise TokenizerError(
            f"token {token_id} ({piece!r}) has a character outside the byte-level alphabet"
        ) from exc


def _sentencepiece_bytes(piece: str, byte_fallback: bool) -> bytes:
    match = _BYTE_FALLBACK.match(piece)
    if byte_fallback and match:
        return bytes([int(match.group(1), 16)])
    return piece.replace(_SPIECE_SPACE, " ").encode("utf-8")
