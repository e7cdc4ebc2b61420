"""Vocabulary: exact token bytes for byte-level BPE (real SmolLM2) and SentencePiece."""

from __future__ import annotations

import json
import pickle

import pytest
from tokenizers import Tokenizer, decoders, models, normalizers, trainers
from transformers import PreTrainedTokenizerFast

from formcast.errors import TokenizerError
from formcast.grammar.index.vocabulary import Vocabulary, byte_level_decoder_map

CORPUS = [
    "Hello, world!",
    "plain ascii with  double  spaces and\ttabs",
    "Accents: café, naïve, Ångström, señor, Łódź",
    "CJK: 你好，世界。日本語のテキスト、한국어 문장",
    "Emoji: 🎉🚀👩‍👩‍👧‍👦 and flags 🇫🇷🇯🇵",
    'def f(x):\n    return {"a": [1, 2.5e-3, null]}\n',
    "   leading spaces, trailing spaces   ",
    "\n\n\nnewline runs\r\n\r\nwindows\n",
    "mixed: Ελληνικά, русский, עברית, العربية, हिन्दी",
    "zero-width: a\u200bb, combining: e\u0301, math: ∑∫√∞",
    "",
]


def test_byte_level_map_is_a_bijection():
    table = byte_level_decoder_map()
    assert len(table) == 256
    assert sorted(table.values()) == list(range(256))


def test_smollm2_every_token_matches_tokenizer_decode(smollm2_tokenizer, smollm2_vocab):
    tok, vocab = smollm2_tokenizer, smollm2_vocab
    assert vocab.kind == "byte_level"
    assert vocab.vocab_size == len(tok) == 49152
    assert tok.eos_token_id in vocab.eos_token_ids
    num_checked = 0
    for token_id in range(vocab.vocab_size):
        if token_id in vocab.special_token_ids:
            assert vocab.token_bytes[token_id] == b""
            continue
        piece = vocab.token_bytes[token_id]
        assert piece, f"token {token_id} has no bytes"
        # HF decodes byte-level tokens with errors="replace": identical for valid UTF-8.
        assert tok.decode([token_id]) == piece.decode("utf-8", errors="replace"), token_id
        num_checked += 1
    assert num_checked > 49000


@pytest.mark.parametrize("text", CORPUS)
def test_smollm2_encode_roundtrips_to_exact_bytes(smollm2_tokenizer, smollm2_vocab, text):
    token_ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    assert smollm2_vocab.decode_bytes(token_ids) == text.encode("utf-8")


def test_padded_vocab_size_never_allows_padding(smollm2_tokenizer):
    vocab = Vocabulary.from_tokenizer(smollm2_tokenizer, vocab_size=49152 + 64)
    assert vocab.vocab_size == 49216
    assert all(vocab.token_bytes[i] == b"" for i in range(49152, 49216))
    assert not any(vocab.is_allowed_in_text(i) for i in range(49152, 49216))


def test_vocab_size_smaller_than_tokenizer_is_an_error(smollm2_tokenizer):
    with pytest.raises(TokenizerError, match="smaller"):
        Vocabulary.from_tokenizer(smollm2_tokenizer, vocab_size=100)


def test_hash_is_stable_and_sensitive(smollm2_tokenizer, smollm2_vocab):
    again = Vocabulary.from_tokenizer(smollm2_tokenizer)
    assert again.hash == smollm2_vocab.hash
    padded = Vocabulary.from_tokenizer(smollm2_tokenizer, vocab_size=49160)
    assert padded.hash != smollm2_vocab.hash
    other_eos = Vocabulary.from_tokenizer(smollm2_tokenizer, eos_token_ids=[0, 2])
    assert other_eos.hash != smollm2_vocab.hash
    restored = pickle.loads(pickle.dumps(smollm2_vocab))
    assert restored == smollm2_vocab and restored.hash == smollm2_vocab.hash


# -- SentencePiece-style tokenizer with byte fallback, trained here -----------------------------

_TRAIN_TEXT = [
    "the quick brown fox jumps over the lazy dog",
    "hello world, hello there, general kenobi",
    "structured generation with exact grammar masks",
    "café naïve señor",
] * 50


@pytest.fixture(scope="module")
def sentencepiece_tokenizer():
    """A Llama-2-style tokenizer: BPE over ▁-joined text, <0xNN> byte fallback, trained here.

    As in Llama's tokenizer.json, the 256 byte tokens live in the model vocabulary (not as
    added special tokens), so characters never seen in training fall back to bytes.
    """
    specials = ["<unk>", "<s>", "</s>"]
    normalizer = normalizers.Sequence(
        [normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")]
    )
    trained = Tokenizer(models.BPE(unk_token="<unk>"))
    trained.normalizer = normalizer
    trained.train_from_iterator(
        _TRAIN_TEXT,
        trainers.BpeTrainer(vocab_size=300, special_tokens=specials, show_progress=False),
    )
    spec = json.loads(trained.to_str())["model"]
    pieces = [
        p for p, _ in sorted(spec["vocab"].items(), key=lambda kv: kv[1]) if p not in specials
    ]
    ordered = specials + [f"<0x{b:02X}>" for b in range(256)] + pieces
    vocab = {piece: i for i, piece in enumerate(ordered)}
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in spec["merges"]]
    backend = Tokenizer(
        models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True)
    )
    backend.normalizer = normalizer
    backend.decoder = decoders.Sequence(
        [
            decoders.Replace("\u2581", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]
    )
    backend.add_special_tokens(specials)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )


def test_sentencepiece_vocabulary_kind_and_bytes(sentencepiece_tokenizer):
    vocab = Vocabulary.from_tokenizer(sentencepiece_tokenizer)
    assert vocab.kind == "sentencepiece"
    assert vocab.eos_token_ids == frozenset({sentencepiece_tokenizer.eos_token_id})
    byte_fallback_id = sentencepiece_tokenizer.convert_tokens_to_ids("<0xE4>")
    assert vocab.token_bytes[byte_fallback_id] == b"\xe4"
    for token_id in range(len(sentencepiece_tokenizer)):
        if token_id in vocab.special_token_ids:
            continue
        piece = sentencepiece_tokenizer.convert_ids_to_tokens(token_id)
        expected = piece.replace("\u2581", " ").encode()
        if piece.startswith("<0x") and len(piece) == 6:
            expected = bytes([int(piece[3:5], 16)])
        assert vocab.token_bytes[token_id] == expected


@pytest.mark.parametrize("text", [t for t in CORPUS if t])
def test_sentencepiece_encode_roundtrips_to_exact_bytes(sentencepiece_tokenizer, text):
    vocab = Vocabulary.from_tokenizer(sentencepiece_tokenizer)
    token_ids = sentencepiece_tokenizer.encode(text, add_special_tokens=False)
    # The normalizer prepends "▁": the first token carries the leading space the decoder strips.
    assert vocab.decode_bytes(token_ids) == b" " + text.encode("utf-8")
    assert sentencepiece_tokenizer.decode(token_ids) == text


def test_slow_tokenizer_is_refused():
    class NotFast:
        pass

    with pytest.raises(TokenizerError, match="fast"):
        Vocabulary.from_tokenizer(NotFast())


def test_special_token_texts_and_control_tokens(smollm2_tokenizer, smollm2_vocab):
    """Special (non-EOS) tokens are listed with their text; ``with_control_tokens`` lets the
    named ones write that text (and only them), keeps EOS, and refuses other ids."""
    texts = dict(smollm2_vocab.special_token_texts)
    im_start = smollm2_tokenizer.convert_tokens_to_ids("<|im_start|>")
    assert texts["<|im_start|>"] == im_start
    assert smollm2_vocab.control_token_id("<|im_start|>") == im_start
    assert smollm2_vocab.control_token_id("<|not a token|>") is None
    assert all(i not in smollm2_vocab.eos_token_ids for i in texts.values())
    derived = smollm2_vocab.with_control_tokens([im_start])
    assert derived.token_bytes[im_start] == b"<|im_start|>"
    assert im_start not in derived.special_token_ids
    assert derived.eos_token_ids == smollm2_vocab.eos_token_ids
    pairs = zip(smollm2_vocab.token_bytes, derived.token_bytes, strict=True)
    changed = [i for i, (a, b) in enumerate(pairs) if a != b]
    assert changed == [im_start]
    assert derived.hash != smollm2_vocab.hash
    assert smollm2_vocab.with_control_tokens([im_start]) is derived  # memoised
    assert smollm2_vocab.with_control_tokens([]) is smollm2_vocab
    assert pickle.loads(pickle.dumps(derived)) == derived
    for bad in (next(iter(smollm2_vocab.eos_token_ids)), 100):
        with pytest.raises(TokenizerError, match="not special"):
            smollm2_vocab.with_control_tokens([bad])
