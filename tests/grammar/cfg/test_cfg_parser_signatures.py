"""Earley behaviour signatures are sound, converge on left-recursive ambiguous rules, and the
masks memoised under them stay exact; repeated ``fill_bitmask`` into one bitmask is exact.

Soundness: nodes with equal ``signature`` must accept the same terminal continuations; checked
on every pair of nodes met on random terminal walks, for all continuations of up to 3
terminals. Convergence: on ``e: e "+" e | e "*" e`` the signatures of the sets after
``x (+ x)*`` stop growing with the sentence (memo hits in new sentences). Masks: along long
random sentences of the ambiguous and SQL grammars (Earley only), each mask equals a
brute-force read of the vocabulary, with memo entries made by earlier sentences.
"""

from __future__ import annotations

import random
from collections import defaultdict

import numpy as np
import pytest
import torch

from formcast.grammar.cfg.earley import EarleyParser
from formcast.grammar.cfg.lark_frontend import compile_lark, lark_to_cfg
from formcast.grammar.cfg.rules import prepare_grammar
from tests.grammar._cfg_grammars import LARK_GRAMMARS
from tests.grammar._cfg_oracle import brute_force_mask, random_sentence

_AMBIGUOUS_LEFT = r"""
start: e
e: e "+" e | e "*" e | e e | "x" | "(" e ")"
"""


def _future(parser: EarleyParser, node, depth: int) -> tuple:
    """Everything the parser says about continuations of up to ``depth`` terminals."""
    if depth == 0:
        return (node.is_accepting,)
    return (
        node.is_accepting,
        tuple(
            (t, _future(parser, parser.advance(node, t), depth - 1)) for t in sorted(node.expected)
        ),
    )


@pytest.mark.parametrize("name", ["ambiguous", "sql", "pyexpr", "left"])
def test_equal_signatures_have_equal_futures(name):
    text = _AMBIGUOUS_LEFT if name == "left" else LARK_GRAMMARS[name]
    parser = EarleyParser(prepare_grammar(lark_to_cfg(text)))
    rng = random.Random(3)
    by_signature = defaultdict(list)
    for _ in range(30):
        node = parser.root
        for _ in range(rng.randrange(1, 25)):
            if not node.expected:
                break
            node = parser.advance(node, rng.choice(sorted(node.expected)))
            by_signature[node.signature].append(node)
    shared = 0
    depth = 2 if name == "pyexpr" else 3  # (pyexpr has 40 terminals)
    for nodes in by_signature.values():
        distinct = list({id(n): n for n in nodes}.values())
        if len(distinct) > 1:
            shared += 1
            first = _future(parser, distinct[0], depth)
            for other in distinct[1:4]:
                assert _future(parser, other, depth) == first
    assert shared > 0  # the check compared something


@pytest.mark.parametrize("text", [LARK_GRAMMARS["ambiguous"], _AMBIGUOUS_LEFT])
def test_signatures_of_left_recursive_ambiguous_rules_converge(text):
    prepared = prepare_grammar(lark_to_cfg(text))
    parser = EarleyParser(prepared)
    names = prepared.terminal_names
    plus = names.index(next(n for n in names if "PLUS" in n))
    atom = names.index(next(n for n in names if n in ("NAME", "X")))
    node = parser.root
    signatures = []
    for _ in range(12):
        node = parser.advance(parser.advance(node, atom), plus)
        signatures.append(node.signature)
    assert len(set(signatures[2:])) == 1, signatures


@pytest.fixture(scope="module")
def small_vocab():
    from formcast.grammar.index.vocabulary import Vocabulary

    extra = [b"a+", b"+b", b"ab*", b"*c", b"aa", b"aaa", b"cab+", b"+a*b", b"b b", b" FROM",
             b"SELECT", b" WHERE", b" AND", b" OR", b"NOT ", b" = ", b"a.b", b"(a", b"')"]  # fmt: skip
    tokens = [bytes([b]) for b in range(256)] + extra + [b""]
    return Vocabulary(
        token_bytes=tuple(tokens),
        eos_token_ids=frozenset({len(tokens) - 1}),
        special_token_ids=frozenset({len(tokens) - 1}),
        vocab_size=len(tokens),
        kind="byte_level",
        num_tokenizer_tokens=len(tokens),
    )


@pytest.mark.parametrize("name", ["ambiguous", "sql"])
def test_memoised_masks_along_long_sentences_equal_brute_force(name, small_vocab):
    grammar = compile_lark(LARK_GRAMMARS[name], small_vocab, cache=False)
    runtime = grammar.runtime
    assert not runtime.is_lr
    rng = random.Random(11)
    checked = 0
    for _ in range(6):
        text = random_sentence(grammar.prepared, rng, max_depth=9, terminal_max_len=4)
        heads = grammar.initial_heads
        for k in range(len(text) + 1):
            if k:
                heads = runtime.advance(heads, text[k - 1 : k])
            if k % 3 and k != len(text):
                continue
            row = runtime.mask(heads)
            got = set(np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little")))
            assert got == brute_force_mask(runtime, heads, small_vocab), text[:k]
            checked += 1
    assert checked > 20


def test_repeated_fill_into_one_bitmask_is_exact(small_vocab):
    grammar = compile_lark(LARK_GRAMMARS["ambiguous"], small_vocab, cache=False)
    matcher = grammar.matcher()
    words = (small_vocab.vocab_size + 31) // 32
    bitmask = torch.full((3, words + 2), -1, dtype=torch.int32)
    other = torch.full((3, words), -1, dtype=torch.int32)
    for k, data in enumerate([b"a", b"b", b"+", b"c", b"*", b"a"]):
        expected = np.concatenate([matcher.packed_row(), [0, 0]]).astype(np.int32)
        for row in (k % 3, -1):
            matcher.fill_bitmask(bitmask, row)  # the first call per row fills the slow way
            matcher.fill_bitmask(bitmask, row)
            assert np.array_equal(bitmask[row].numpy(), expected)
        matcher.fill_bitmask(other, 0)  # another tensor in between
        assert np.array_equal(other[0].numpy(), expected[:words])
        assert matcher.accept_bytes(data)
    bitmask.resize_(2, words + 2)  # same tensor object, new shape: validated again
    with pytest.raises(Exception, match="out of range"):
        matcher.fill_bitmask(bitmask, 2)


def _random_grammar(rng: random.Random):
    """A small random grammar with empty rules, left/right recursion and shared prefixes."""
    from formcast.grammar.cfg.rules import CfgGrammar

    num_nt, num_t = rng.randint(2, 5), 3
    rules = []
    for n in range(num_nt):
        rules.append((n, (rng.randrange(num_t),)))  # every nonterminal is productive
        for _ in range(rng.randint(1, 3)):
            rhs = tuple(
                rng.randrange(num_t) if rng.random() < 0.4 else ~rng.randrange(num_nt)
                for _ in range(rng.randint(0, 3))
            )
            rules.append((n, rhs))
    rules += [(0, (~n,)) for n in range(1, num_nt)]  # every nonterminal is reachable
    return CfgGrammar(
        terminal_names=["A", "B", "C"],
        terminal_regexes=["a", "b", "c"],
        nonterminal_names=[f"n{n}" for n in range(num_nt)],
        rules=rules,
        start=0,
    )


def test_equal_signatures_have_equal_futures_on_random_grammars():
    rng = random.Random(5)
    compared = 0
    for _ in range(60):
        parser = EarleyParser(prepare_grammar(_random_grammar(rng)))
        by_signature = defaultdict(dict)
        for _ in range(20):
            node = parser.root
            for _ in range(rng.randrange(1, 12)):
                if not node.expected:
                    break
                node = parser.advance(node, rng.choice(sorted(node.expected)))
                by_signature[node.signature][id(node)] = node
        for nodes in by_signature.values():
            nodes = list(nodes.values())
            if len(nodes) > 1:
                first = _future(parser, nodes[0], 3)
                for other in nodes[1:3]:
                    assert _future(parser, other, 3) == first
                    compared += 1
    assert compared > 30
