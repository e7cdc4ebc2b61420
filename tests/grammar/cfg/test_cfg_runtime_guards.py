"""CFG guard rails and sharing: the nesting-depth option, the disk cache, thread safety.

- ``max_depth``: nesting deeper than the bound raises ``GrammarError`` naming the depth and the
  output byte offset, leaves the matcher unchanged, and counts nesting rather than length.
- Disk cache: a second compile in a fresh in-memory cache is served from disk (building is
  forbidden by monkeypatching the grammar loader and the automaton builder) with equal masks.
- Threads: several threads stepping matchers of one compiled grammar concurrently produce
  exactly the masks a sequential run of a separately compiled copy produces.
"""

from __future__ import annotations

import random
import sys
import threading

import numpy as np
import pytest

from formcast.errors import GrammarError
from formcast.grammar.cfg import compiled as cfg_compiled
from formcast.grammar.cfg import lark_frontend as lark_grammar
from formcast.grammar.cfg.gbnf_frontend import compile_gbnf
from formcast.grammar.cfg.lark_frontend import compile_lark
from tests.grammar._cfg_grammars import ARITHMETIC_LARK, JSON_LARK, PYEXPR_LARK
from tests.grammar._cfg_oracle import random_sentence


@pytest.fixture(scope="module")
def json_unbounded(smollm2_vocab):
    return compile_lark(JSON_LARK, smollm2_vocab)


def _nested(n: int) -> bytes:
    return b"[" * n + b"1" + b"]" * n


def _accepts_bytes(grammar, data: bytes) -> bool:
    matcher = grammar.matcher()
    return all(matcher.accept_bytes(bytes([b])) for b in data) and matcher.is_accepting()


def _min_bound(smollm2_vocab, data: bytes, limit: int = 64) -> int:
    """Smallest ``max_depth`` under which ``data`` is accepted without a depth error."""
    for bound in range(1, limit):
        grammar = compile_lark(JSON_LARK, smollm2_vocab, max_depth=bound)
        try:
            if _accepts_bytes(grammar, data):
                return bound
        except GrammarError:
            continue
    raise AssertionError(f"{data!r} not accepted with max_depth < {limit}")


def test_depth_counts_nesting_not_length(json_unbounded, smollm2_vocab):
    assert _accepts_bytes(json_unbounded, _nested(300))  # default: no bound
    # each '[' opens one `array` rule; the list helper rules do not count
    assert [_min_bound(smollm2_vocab, _nested(n)) for n in range(1, 6)] == [1, 2, 3, 4, 5]
    flat = b"[" + b",".join(b"%d" % k for k in range(60)) + b"]"
    assert _min_bound(smollm2_vocab, flat) == 1  # a long flat list is shallow
    assert _min_bound(smollm2_vocab, b'{"a": [1]}') == 3  # object, pair, array


def test_depth_error_names_depth_and_position(smollm2_vocab, smollm2_tokenizer):
    depth_of_two = _min_bound(smollm2_vocab, _nested(2))
    grammar = compile_lark(JSON_LARK, smollm2_vocab, max_depth=depth_of_two)
    assert _accepts_bytes(grammar, b"[[1], [2, 3], [], 4]")
    matcher = grammar.matcher()
    assert matcher.accept_bytes(b"[[")
    before = matcher.packed_row().copy()
    with pytest.raises(GrammarError) as info:
        matcher.accept_bytes(b" [")
    message = str(info.value)
    assert f"max_depth={depth_of_two}" in message and "nesting depth" in message
    assert info.value.position == 3  # the third '[' is output byte 3 (0-based)
    assert "output byte 3" in message
    assert matcher.num_accepted == 1 and np.array_equal(matcher.packed_row(), before)
    # the same through accept_token, with real tokens
    matcher = grammar.matcher()
    ids = smollm2_tokenizer.encode("[[[", add_special_tokens=False)
    with pytest.raises(GrammarError, match="nesting depth"):
        matcher.accept_tokens(ids)


def test_max_depth_is_validated_and_in_the_cache_key(smollm2_vocab):
    with pytest.raises(GrammarError, match="max_depth"):
        compile_lark(JSON_LARK, smollm2_vocab, max_depth=0)
    with pytest.raises(GrammarError, match="max_depth"):
        compile_gbnf('root ::= "a"', smollm2_vocab, max_depth=-3)
    assert compile_lark(JSON_LARK, smollm2_vocab, max_depth=4).max_depth == 4
    assert compile_lark(JSON_LARK, smollm2_vocab, max_depth=5).max_depth == 5


def test_second_compile_is_served_from_disk(
    smollm2_vocab, smollm2_tokenizer, tmp_path, monkeypatch
):
    monkeypatch.setenv("FORMCAST_CACHE", str(tmp_path))
    text = JSON_LARK + "\n// disk cache test\n"
    first = compile_lark(text, smollm2_vocab, max_depth=50)
    assert len(list((tmp_path / "grammars").glob("*.fcg"))) == 1
    cfg_compiled.clear_memory_cache()

    def forbidden(*args, **kwargs):
        raise AssertionError("the grammar was rebuilt instead of read from disk")

    monkeypatch.setattr(lark_grammar, "lark_to_cfg", forbidden)
    monkeypatch.setattr(cfg_compiled, "prepare_grammar", forbidden)
    second = compile_lark(text, smollm2_vocab, max_depth=50)
    assert second is not first and second.max_depth == 50
    ids = smollm2_tokenizer.encode('{"k": [1, {"x": "y"}], "n": null}', add_special_tokens=False)
    a, b = first.matcher(), second.matcher()
    for token_id in ids:
        assert np.array_equal(a.packed_row(), b.packed_row())
        assert a.accept_token(token_id) and b.accept_token(token_id)
    assert b.is_accepting()
    with pytest.raises(AssertionError, match="rebuilt"):  # other options: another key
        compile_lark(text, smollm2_vocab, max_depth=51)


def test_corrupt_disk_entry_is_a_miss(smollm2_vocab, tmp_path, monkeypatch):
    monkeypatch.setenv("FORMCAST_CACHE", str(tmp_path))
    text = 'start: "x" start | "y"\n'
    compile_lark(text, smollm2_vocab)
    (path,) = (tmp_path / "grammars").glob("*.fcg")
    path.write_bytes(b"not a grammar file")
    cfg_compiled.clear_memory_cache()
    again = compile_lark(text, smollm2_vocab)
    assert _accepts_bytes(again, b"xxy") and not _accepts_bytes(again, b"xx")


def _sentences(grammar, tokenizer, seed: int, num: int) -> list[list[int]]:
    rng = random.Random(seed)
    out = []
    for _ in range(num):
        text = random_sentence(grammar.prepared, rng, max_depth=5, terminal_max_len=6)
        out.append(tokenizer.encode(text.decode(), add_special_tokens=False))
    return out


def _masks(grammar, sequences) -> list[list[bytes]]:
    out = []
    for ids in sequences:
        matcher = grammar.matcher()
        rows = []
        for token_id in ids:
            rows.append(matcher.packed_row().tobytes())
            assert matcher.accept_token(token_id)
        rows.append(matcher.packed_row().tobytes())
        out.append(rows)
    return out


@pytest.mark.parametrize("text", [ARITHMETIC_LARK, PYEXPR_LARK], ids=["arithmetic", "pyexpr"])
def test_threads_share_one_grammar(text, smollm2_vocab, smollm2_tokenizer):
    shared = compile_lark(text, smollm2_vocab, cache=False)
    num_threads = 4
    work = [_sentences(shared, smollm2_tokenizer, seed, 4) for seed in range(num_threads)]
    results: list = [None] * num_threads
    errors: list[BaseException] = []
    barrier = threading.Barrier(num_threads)

    def run(k: int) -> None:
        try:
            barrier.wait()
            results[k] = _masks(shared, work[k])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, inside the memo updates
    try:
        threads = [threading.Thread(target=run, args=(k,)) for k in range(num_threads)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors
    sequential = compile_lark(text, smollm2_vocab, cache=False)
    for k in range(num_threads):
        assert results[k] == _masks(sequential, work[k])
