"""CfgMatcher interface: rollback/fork equal replay, forced bytes, EOS, bitmask filling, pickling."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from formcast.bitmask import allocate_token_bitmask
from formcast.errors import GrammarError
from formcast.grammar.cfg.lark_frontend import compile_lark
from tests.grammar._cfg_grammars import JSON_LARK

TEXT = '{"a": [1, 2.5, {"b": null}], "c": "x\\"y"}'


@pytest.fixture(scope="module")
def grammar(smollm2_vocab):
    return compile_lark(JSON_LARK, smollm2_vocab)


@pytest.fixture(scope="module")
def token_ids(smollm2_tokenizer):
    return smollm2_tokenizer.encode(TEXT, add_special_tokens=False)


def test_rollback_and_fork_equal_replay(grammar, token_ids):
    matcher = grammar.matcher()
    rows = []
    for token_id in token_ids:
        rows.append(matcher.packed_row().copy())
        assert matcher.accept_token(token_id)
    assert matcher.is_accepting()
    for n in (1, 5, 17, len(token_ids)):
        other = matcher.fork()
        other.rollback(n)
        assert np.array_equal(other.packed_row(), rows[len(token_ids) - n])
        replay = grammar.matcher()
        assert replay.accept_tokens(token_ids[: len(token_ids) - n]) == len(token_ids) - n
        assert np.array_equal(replay.packed_row(), other.packed_row())
        assert other.accept_tokens(token_ids[len(token_ids) - n :]) == n
        assert other.is_accepting()
    assert matcher.num_accepted == len(token_ids)  # forks are independent
    with pytest.raises(GrammarError):
        matcher.rollback(len(token_ids) + 1)


def test_masks_for_several_positions_by_accept_then_rollback(grammar, token_ids):
    """Speculative decoding: one mask row per draft position, then roll back."""
    matcher = grammar.matcher()
    matcher.accept_tokens(token_ids[:3])
    draft = token_ids[3:8]
    bitmask = allocate_token_bitmask(len(draft) + 1, grammar.vocab_size)
    for k, token_id in enumerate(draft):
        matcher.fill_bitmask(bitmask, k)
        assert matcher.accept_token(token_id)
    matcher.fill_bitmask(bitmask, len(draft))
    matcher.rollback(len(draft))
    replay = grammar.matcher()
    replay.accept_tokens(token_ids[:3])
    for k, token_id in enumerate(draft):
        assert np.array_equal(bitmask[k].numpy(), replay.packed_row())
        replay.accept_token(token_id)
    assert np.array_equal(bitmask[len(draft)].numpy(), replay.packed_row())


def test_rejected_token_changes_nothing_and_eos(grammar, smollm2_vocab, token_ids):
    matcher = grammar.matcher()
    before = matcher.packed_row().copy()
    bad = smollm2_vocab.token_bytes.index(b"}")
    assert not matcher.accept_token(bad)
    assert not matcher.accept_token(2)  # EOS before a complete value
    assert not matcher.accept_token(10**9)
    assert matcher.num_accepted == 0
    assert np.array_equal(matcher.packed_row(), before)
    matcher.accept_tokens(token_ids)
    assert 2 in matcher.allowed_token_ids()
    assert matcher.accept_token(2) and matcher.is_terminated()
    assert matcher.allowed_token_ids().tolist() == [2]
    assert not matcher.accept_token(token_ids[0])
    matcher.rollback(1)
    assert not matcher.is_terminated()


def test_forced_bytes(smollm2_vocab):
    grammar = compile_lark('start: "hello" NAME "," "world" \nNAME: /[a-z]+/', smollm2_vocab)
    matcher = grammar.matcher()
    assert matcher.forced_bytes() == b"hello"
    assert matcher.accept_bytes(b"hellox")
    assert matcher.forced_bytes() == b""  # NAME may continue or ","
    assert matcher.accept_bytes(b",")
    assert matcher.forced_bytes() == b"world"
    assert matcher.accept_bytes(b"world")
    assert matcher.is_terminated()


def test_fill_bitmask_strided_and_wide(grammar):
    matcher = grammar.matcher()
    wide = torch.full((2, grammar.vocab_size // 32 + 4), -1, dtype=torch.int32)
    matcher.fill_bitmask(wide, 1)
    num_words = len(matcher.packed_row())
    assert np.array_equal(wide[1, :num_words].numpy(), matcher.packed_row())
    assert (wide[1, num_words:] == 0).all()
    with pytest.raises(GrammarError):
        matcher.fill_bitmask(torch.zeros((1, 3), dtype=torch.int32), 0)
    with pytest.raises(GrammarError):
        matcher.fill_bitmask(torch.zeros((1, num_words), dtype=torch.int64), 0)


def test_pickle_round_trip(grammar, token_ids):
    clone = pickle.loads(pickle.dumps(grammar))
    a, b = grammar.matcher(), clone.matcher()
    for token_id in token_ids[:10]:
        assert np.array_equal(a.packed_row(), b.packed_row())
        assert a.accept_token(token_id) and b.accept_token(token_id)
