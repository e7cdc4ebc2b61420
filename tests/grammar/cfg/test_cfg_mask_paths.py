"""Masks along the runtime's shortcuts equal a brute-force read of the whole vocabulary.

The prefixes are chosen to reach each path of :mod:`formcast.grammar.cfg.runtime` and
:mod:`formcast.grammar.cfg.lexer`: lexer parts and ignored-text restarts inside tokens
(``RESTART`` groups), repeated terminals read through the fixed-point chain (``----``, ``((((``),
head sets with many heads (lexing ambiguity: ``notx`` = ``not x`` or the name ``notx``) whose
later heads are pruned, strings settled by their byte sets, GBNF terminals with bounded
whitespace, and the ambiguous grammar. Each grammar is compiled afresh twice and the prefixes
are visited in opposite orders (the memo tables, hence the paths taken, differ); both must give
the brute-force mask. Grammars with SLR(1) tables run on the LR parser by default; their
``earley`` cases force the Earley parser so its shortcuts stay covered.
"""

from __future__ import annotations

import numpy as np
import pytest

from formcast.grammar.cfg.compiled import DEFAULT_TUNING, CfgTuning
from formcast.grammar.cfg.gbnf_frontend import compile_gbnf
from formcast.grammar.cfg.lark_frontend import compile_lark
from tests.grammar._cfg_grammars import JSON_GBNF, LARK_GRAMMARS
from tests.grammar._cfg_oracle import brute_force_mask

CASES = {
    "pyexpr": [b"x or (((", b"notPGandnotFalseor", b"y  and  -", b"'ab"],
    "json": [b'{"a": [1, {"b":', b'[ "x\\', b'{"k" :  '],
    "json.gbnf": [b'{"a": 1 ', b'{"a": [\n  "x"'],
    "ambiguous": [b"ab+", b"aa"],
}


def _compile(name: str, vocab, tuning: CfgTuning = DEFAULT_TUNING):
    if name == "json.gbnf":
        return compile_gbnf(JSON_GBNF, vocab, cache=False, tuning=tuning)
    return compile_lark(LARK_GRAMMARS[name], vocab, cache=False, tuning=tuning)


def _mask_ids(grammar, prefix: bytes) -> set[int]:
    matcher = grammar.matcher()
    assert matcher.accept_bytes(prefix), prefix
    bits = np.unpackbits(matcher.packed_row().view(np.uint8), bitorder="little")
    return set(np.flatnonzero(bits[: grammar.vocab_size]).tolist())


@pytest.mark.parametrize("name", [*CASES, "pyexpr-earley"])
def test_masks_on_every_path_equal_brute_force(name, smollm2_vocab):
    is_earley_forced = name.endswith("-earley")
    name = name.removesuffix("-earley")
    tuning = CfgTuning(parser_kind="earley" if is_earley_forced else "auto")
    prefixes = CASES[name]
    forward = _compile(name, smollm2_vocab, tuning)
    backward = _compile(name, smollm2_vocab, tuning)
    got_forward = [_mask_ids(forward, p) for p in prefixes]
    got_backward = [_mask_ids(backward, p) for p in reversed(prefixes)][::-1]
    runtime = forward.runtime
    for prefix, mask_a, mask_b in zip(prefixes, got_forward, got_backward, strict=True):
        heads = runtime.advance(forward.initial_heads, prefix)
        assert mask_a == brute_force_mask(runtime, heads, smollm2_vocab), prefix
        assert mask_b == mask_a, prefix


# a small byte-level vocabulary whose tokens chain repeated terminals with others after them
# (side groups of a repetition), restart ignored text inside (``"  x"``) and mix both
_EXTRA_TOKENS = [
    b"--", b"---", b"----(", b"---(x", b"--x)", b"- -", b"- - -(", b"  x", b" -", b"((-",
    b"(((", b")))", b"x)", b"x))", b"-1", b"--1)", b"not", b"notnot", b"not -", b"or(",
    b"and-", b"++", b"+-+-", b"**-", b"-x*-", b"x,", b"[-", b"]]", b"lambda:",
]  # fmt: skip


@pytest.fixture(scope="module")
def small_vocab():
    from formcast.grammar.index.vocabulary import Vocabulary

    tokens = [bytes([b]) for b in range(256)] + _EXTRA_TOKENS + [b""]
    eos = len(tokens) - 1
    return Vocabulary(
        token_bytes=tuple(tokens),
        eos_token_ids=frozenset({eos}),
        special_token_ids=frozenset({eos}),
        vocab_size=len(tokens),
        kind="byte_level",
        num_tokenizer_tokens=len(tokens),
    )


@pytest.mark.parametrize("num_exact_heads", [0, None])
@pytest.mark.parametrize(
    "name", ["pyexpr", "arithmetic", "ambiguous", "sql", "pyexpr-earley", "arithmetic-earley"]
)
def test_small_vocabulary_chains_restarts_and_pruned_heads(name, num_exact_heads, small_vocab):
    """Repetition chains with other terminals after them (side groups), ignored text inside
    tokens; with ``num_exact_heads=0`` every head of every set takes the pruned path."""
    import random

    from formcast.grammar.cfg.runtime import NUM_EXACT_HEADS
    from tests.grammar._cfg_oracle import random_sentence

    is_earley_forced = name.endswith("-earley")
    name = name.removesuffix("-earley")
    tuning = CfgTuning(
        parser_kind="earley" if is_earley_forced else "auto",
        num_exact_heads=NUM_EXACT_HEADS if num_exact_heads is None else num_exact_heads,
    )
    grammar = compile_lark(LARK_GRAMMARS[name], small_vocab, cache=False, tuning=tuning)
    runtime = grammar.runtime
    assert runtime.is_lr == (name in ("pyexpr", "arithmetic") and not is_earley_forced)
    rng = random.Random(7)
    prefixes = [b"", b"-", b"- -", b"x or -", b"(", b"x * -", b"((", b"not not", b"notxandnot"]
    prefixes += [b"ab", b"aa+", b"SELECT a FROM b WHERE not"]
    for _ in range(16):
        text = random_sentence(grammar.prepared, rng, max_depth=6)
        prefixes.append(text[: rng.randrange(len(text) + 1)])
    for prefix in prefixes:
        heads = runtime.advance(grammar.initial_heads, prefix)
        if not heads:
            continue
        assert _mask_ids(grammar, prefix) == brute_force_mask(runtime, heads, small_vocab), prefix


@pytest.mark.parametrize("name", list(CASES))
def test_single_byte_steps_equal_full_rows(name, smollm2_vocab):
    """``CfgLexer.step`` computes one successor where no row is built; every such successor
    is the entry of the state's full row (the same interned state), on grammars with and
    without ignored text, for every byte of every state the prefixes reach."""
    grammar = _compile(name, smollm2_vocab)
    lexer = grammar.runtime.lexer
    stepped = [sid for _, sid in grammar.runtime.advance(grammar.initial_heads, b"")]
    for prefix in CASES[name]:
        stepped += [sid for _, sid in grammar.runtime.advance(grammar.initial_heads, prefix)]
    seen: set[int] = set()
    while stepped:
        sid = stepped.pop()
        if sid in seen or len(seen) > 400:
            continue
        seen.add(sid)
        singles = (
            [lexer.step(sid, byte) for byte in range(256)] if lexer.rows[sid] is None else None
        )
        row = lexer.row(sid)
        if singles is not None:
            assert singles == row, (name, sid)
        stepped += [nxt for nxt in row if nxt >= 0]
    assert len(seen) >= 5


@pytest.mark.parametrize("name", ["pyexpr", "pyexpr-earley"])
def test_masks_with_tiny_memo_tables_equal_brute_force(name, small_vocab, monkeypatch):
    """Memo tables that share equal rows after 2 entries, hold 3 distinct shared rows and 6
    entries (so entries are evicted and shared rows dropped all along the walk) give the
    brute-force masks, on the LR and the Earley parser; the bounds hold."""
    import random

    from formcast.grammar.cfg import runtime as runtime_module
    from tests.grammar._cfg_oracle import random_sentence

    monkeypatch.setattr(runtime_module, "_MAX_PLAIN_ROWS", 2)
    monkeypatch.setattr(runtime_module, "_MAX_MEMO_ROWS", 3)
    monkeypatch.setattr(runtime_module, "_MAX_MEMO", 6)
    is_earley_forced = name.endswith("-earley")
    tuning = CfgTuning(parser_kind="earley" if is_earley_forced else "auto")
    grammar = compile_lark(LARK_GRAMMARS["pyexpr"], small_vocab, cache=False, tuning=tuning)
    runtime = grammar.runtime
    rng = random.Random(11)
    prefixes = [b"", b"-", b"x or (((", b"notx and -", b"(x) * -"]
    for _ in range(12):
        text = random_sentence(grammar.prepared, rng, max_depth=5)
        prefixes.append(text[: rng.randrange(len(text) + 1)])
    for prefix in prefixes + prefixes[::-1]:
        heads = runtime.advance(grammar.initial_heads, prefix)
        if heads:
            assert _mask_ids(grammar, prefix) == brute_force_mask(runtime, heads, small_vocab)
    tables = (runtime._head_masks, runtime._group_masks, runtime._masks)
    for table in tables:
        assert len(table) <= 6 and len(table._pool) <= 3
    assert all(table.is_sharing for table in tables[::2])


def test_row_memo_shares_equal_rows_and_evicts_oldest(monkeypatch):
    from formcast.grammar.cfg import runtime as runtime_module

    monkeypatch.setattr(runtime_module, "_MAX_PLAIN_ROWS", 1)
    monkeypatch.setattr(runtime_module, "_MAX_MEMO_ROWS", 2)
    monkeypatch.setattr(runtime_module, "_MAX_MEMO", 4)
    table = runtime_module._RowLru()
    rows = [np.full(3, k, dtype=np.int32) for k in range(4)]
    assert table.put_row("a", rows[0]) is rows[0]  # the first entry keeps its own row
    shared = table.put_row("b", rows[1].copy(), 5)
    assert table.put_row("c", rows[1].copy()) is shared  # equal rows: one object
    assert table["b"] == (shared, 5) and table["c"] is shared
    assert table.put_row("c", rows[2]) is rows[2]  # a key stored again releases its old row
    assert len(table._pool) == 2
    table.put_row("d", rows[3])  # a third distinct row: the oldest entries go until 2 hold
    assert list(table) == ["c", "d"] and len(table._pool) == 2
    for k in "efgh":
        table.put_row(k, rows[3].copy())
    assert list(table) == ["e", "f", "g", "h"]  # at most 4 entries
    assert len(table._pool) == 1 and all(table[k] is table["e"] for k in "fgh")
