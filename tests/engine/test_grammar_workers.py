"""Grammar worker processes: hard time and memory budgets, errors rebuilt with their details,
results loaded from the disk cache with the same masks, and the engine keeps serving while a
worker compiles."""

from __future__ import annotations

import numpy as np
import pytest

from formcast.engine.grammar_workers import GrammarWorkers
from formcast.engine.llm_engine import LLM
from formcast.errors import CompileBudgetError, GrammarError, GrammarLimitError, SchemaError
from formcast.grammar import allocate_token_bitmask
from formcast.grammar.index.compile import compile_regex
from formcast.grammar.limits import GrammarLimits
from formcast.grammar.spec import GrammarSpec
from formcast.samplers import SamplingParams

# minutes to compile here (3,000 optional properties: ~25 s already for 1,500), far past the
# budgets the tests set, on any machine
SLOW_SCHEMA = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(3000)}}


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("FORMCAST_CACHE", str(tmp_path))
    return tmp_path


@pytest.fixture(scope="module")
def workers(smollm2_vocab):
    """A pool whose time budget is the one that ends a slow compile: SLOW_SCHEMA grows by
    ~50 MiB/s here (a faster machine grows faster), far below 4 GiB within 4 s."""
    pool = GrammarWorkers(
        smollm2_vocab, 1, GrammarLimits(compile_timeout_s=4.0, compile_memory_bytes=4 << 30)
    )
    pool.start_all()
    yield pool
    pool.shutdown()


@pytest.fixture(scope="module")
def memory_workers(smollm2_vocab):
    """A pool whose memory budget is the one that ends a large compile, however slow the
    machine (the time budget is a minute)."""
    pool = GrammarWorkers(
        smollm2_vocab, 1, GrammarLimits(compile_timeout_s=60.0, compile_memory_bytes=300 << 20)
    )
    pool.start_all()
    yield pool
    pool.shutdown()


def masks(grammar, text: bytes, vocab_size: int) -> list[np.ndarray]:
    """The token bitmask after each prefix of ``text``."""
    matcher = grammar.matcher()
    rows = []
    for end in range(len(text) + 1):
        bitmask = allocate_token_bitmask(1, vocab_size)
        matcher.fill_bitmask(bitmask, 0)
        rows.append(bitmask.numpy().copy())
        if end < len(text):
            assert matcher.accept_bytes(text[end : end + 1])
    return rows


def test_worker_result_loads_from_disk_with_the_same_masks(workers, smollm2_vocab, cache_dir):
    spec = GrammarSpec.regex(r"[A-Z]{2}-\d{3}( [a-z]+)?")
    seconds = workers.compile(spec.recipe)
    assert seconds > 0
    assert any((cache_dir / "grammars").iterdir())  # the worker left it on disk
    loaded = spec.compile_fn(smollm2_vocab)
    fresh = compile_regex(r"[A-Z]{2}-\d{3}( [a-z]+)?", smollm2_vocab, cache=False)
    text = b"AB-123 xy"
    vocab_size = smollm2_vocab.vocab_size
    for got, want in zip(
        masks(loaded, text, vocab_size), masks(fresh, text, vocab_size), strict=True
    ):
        assert np.array_equal(got, want)


def test_errors_come_back_with_their_details(workers, cache_dir):
    with pytest.raises(SchemaError) as schema_info:
        workers.compile(GrammarSpec.json_schema({"properties": {"a": {"minimum": "x"}}}).recipe)
    assert schema_info.value.pointer == "/properties/a"
    assert schema_info.value.keyword == "minimum"
    with pytest.raises(GrammarError) as regex_info:
        workers.compile(GrammarSpec.regex("ab(c").recipe)
    assert regex_info.value.position == 2


def test_time_budget_ends_the_worker_and_the_next_compile_works(workers, cache_dir):
    (pid_before,) = workers.worker_pids
    killed_before = workers.num_killed
    with pytest.raises(CompileBudgetError, match="compile_timeout_s=4 s"):
        workers.compile(GrammarSpec.json_schema(SLOW_SCHEMA).recipe)
    assert workers.num_killed == killed_before + 1
    assert workers.worker_pids == []  # the slot restarts on next use
    assert workers.compile(GrammarSpec.regex("[ab]+").recipe) > 0
    (pid_after,) = workers.worker_pids
    assert pid_after != pid_before


def test_memory_budget_ends_the_worker(memory_workers, cache_dir):
    # 350k copies of a non-prefix-code item: an NFA of 1.75M states in Python lists, ~700 MB
    # over seconds (past the memory budget long before determinisation meets its state cap)
    with pytest.raises(CompileBudgetError, match="compile_memory_bytes=314,572,800"):
        memory_workers.compile(GrammarSpec.regex("(?:a|ab){0,350000}").recipe)


def test_engine_serves_a_plain_request_while_a_worker_compiles(tiny_folders, cache_dir):
    limits = GrammarLimits(compile_timeout_s=6.0)
    llm = LLM(
        tiny_folders["llama"],
        max_num_seqs=4,
        num_kv_blocks=64,
        block_size=4,
        num_grammar_workers=1,
        grammar_limits=limits,
    )
    try:
        llm.structured_output.compiler.workers.start_all()
        params = SamplingParams(temperature=0, max_tokens=8, ignore_eos=True)
        slow_id = llm.add_request("Write:", params, grammar={"json_schema": SLOW_SCHEMA})
        plain_id = llm.add_request("Hello", params)
        (future,) = llm.structured_output.compiler._futures.values()
        while not llm.get_output(plain_id).finished:
            llm.step()
        # the plain request ran to the end while the worker was still compiling
        assert not future.done()
        assert len(llm.take_output(plain_id).outputs[0].token_ids) == 8
        with pytest.raises(CompileBudgetError, match="compile_timeout_s=6 s"):
            while llm.has_unfinished_requests():
                llm.step()
        assert llm.get_output(slow_id).finished
        # over-limit input is refused at once, before any compile
        with pytest.raises(GrammarLimitError, match="max_repeat_count"):
            llm.add_request("x", params, grammar={"regex": "a{1,1000000}"})
    finally:
        llm.structured_output.shutdown()


def test_compiled_grammars_kept_for_reuse_are_bounded_by_bytes(smollm2_vocab):
    from formcast.engine.structured import GrammarCompiler
    from formcast.grammar.caches import held_bytes
    from formcast.grammar.index.token_index import VocabTable, vocab_table
    from formcast.grammar.index.vocabulary import Vocabulary

    # compiled here, not loaded from the disk cache: its index keeps the trie kernel's
    # arguments, which point into the vocabulary's table without going through it
    one = compile_regex("[a-z]{1,300}", smollm2_vocab, cache=False)
    one.index.row(0)
    size = held_bytes(one, shared=(Vocabulary, VocabTable))
    assert size >= one.dfa.transitions.nbytes  # the grammar's own arrays are counted
    # the vocabulary's table, which every grammar points to, is not
    assert held_bytes(one, shared=(Vocabulary,)) >= size + held_bytes(vocab_table(smollm2_vocab))
    compiler = GrammarCompiler(smollm2_vocab, 1, max_bytes=int(size * 2.5))
    try:
        specs = [GrammarSpec.regex(f"[a-z]{{1,{300 + k}}}") for k in range(4)]
        for spec in specs:
            compiler.submit(spec).result()
        kept = list(compiler._futures)
        assert len(kept) in (2, 3) and kept[-1] == specs[-1].key  # the newest stays
        assert compiler.num_held_bytes <= compiler.max_bytes
        assert compiler.num_held_bytes == sum(compiler._sizes.values())
        assert set(compiler._sizes) == set(kept)
        again = compiler.submit(specs[0])  # forgotten: compiled again (a disk-cache hit)
        assert again.result().matcher().accept_bytes(b"abc")
    finally:
        compiler.shutdown()
