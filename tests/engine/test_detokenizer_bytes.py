"""The byte-table detokenizer against the tokenizer's own ``decode``: for byte-level
tokenizers (SmolLM2, Llama 3.2) the streamed text of any id sequence (special tokens, ids
that split UTF-8 characters, random ids whose bytes are not UTF-8) equals
``tokenizer.decode(ids)`` once flushed, and never takes back text it showed. SentencePiece
(Gemma 3) keeps the window path."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formcast.engine.detokenizer import IncrementalDetokenizer, TokenTexts, token_texts

_SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _ids_strategy(tokenizer):
    special_ids = sorted(tokenizer.added_tokens_decoder)  # special and added tokens
    size = len(tokenizer)
    text_ids = st.text(
        alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12
    ).map(lambda text: tokenizer.encode(text, add_special_tokens=False))
    piece = st.one_of(
        st.integers(0, size - 1).map(lambda i: [i]),
        st.sampled_from(special_ids).map(lambda i: [i]),
        text_ids,
        st.sampled_from(["é", "日本", "🙂", "a\u0301"]).map(
            lambda text: tokenizer.encode(text, add_special_tokens=False)
        ),
    )
    return st.lists(piece, max_size=8).map(lambda parts: [i for part in parts for i in part])


def _stream(tokenizer, ids, skip):
    detokenizer = IncrementalDetokenizer(tokenizer, [], skip_special_tokens=skip)
    shown = []
    for token_id in ids:
        assert detokenizer.append(token_id) is None
        shown.append(detokenizer.text)
    detokenizer.flush()
    return detokenizer, shown


@pytest.mark.parametrize("name", ["smollm2_tokenizer", "llama_tokenizer"])
def test_byte_level_tokenizers_take_the_table(request, name):
    tokenizer = request.getfixturevalue(name)
    texts = token_texts(tokenizer)
    assert isinstance(texts, TokenTexts)
    assert token_texts(tokenizer) is texts  # built once per tokenizer
    assert IncrementalDetokenizer(tokenizer, []).table is texts.skipped


@pytest.mark.parametrize("name", ["smollm2_tokenizer", "llama_tokenizer"])
@pytest.mark.parametrize("skip", [True, False])
def test_streamed_text_equals_decode(request, name, skip):
    tokenizer = request.getfixturevalue(name)

    @_SETTINGS
    @given(ids=_ids_strategy(tokenizer))
    def check(ids):
        detokenizer, shown = _stream(tokenizer, ids, skip)
        expected = tokenizer.decode(ids, skip_special_tokens=skip)
        assert detokenizer.text == expected
        for text in shown:
            assert expected.startswith(text)  # nothing shown is taken back

    check()


def test_split_character_is_held_until_complete(smollm2_tokenizer):
    tok = smollm2_tokenizer
    ids = tok.encode("🙂", add_special_tokens=False)
    assert len(ids) > 1  # the emoji's four bytes span several tokens
    detokenizer = IncrementalDetokenizer(tok, [])
    for token_id in ids[:-1]:
        detokenizer.append(token_id)
        assert detokenizer.text == ""
    copy = detokenizer.fork()  # mid-character: the copy holds the same pending bytes
    detokenizer.append(ids[-1])
    copy.append(ids[-1])
    assert detokenizer.text == copy.text == "🙂"
    cut = IncrementalDetokenizer(tok, [])
    cut.append(ids[0])
    cut.flush()  # generation ended mid-character: the tokenizer's replacement character
    assert cut.text == tok.decode(ids[:1])


def test_stop_string_across_tokens_on_the_table(smollm2_tokenizer):
    tok = smollm2_tokenizer
    detokenizer = IncrementalDetokenizer(tok, [], stop=("END",))
    found = None
    for token_id in tok.encode("abc EN", add_special_tokens=False) + tok.encode(
        "Dxyz", add_special_tokens=False
    ):
        found = found or detokenizer.append(token_id)
    assert found == "END"
    assert detokenizer.text == "abc "


def test_sentencepiece_keeps_the_window(gemma_tokenizer):
    assert token_texts(gemma_tokenizer) is None
    detokenizer = IncrementalDetokenizer(gemma_tokenizer, [])
    assert detokenizer.table is None
    ids = gemma_tokenizer.encode("Hello world 🙂", add_special_tokens=False)
    for token_id in ids:
        detokenizer.append(token_id)
    detokenizer.flush()
    assert detokenizer.text == gemma_tokenizer.decode(ids)
