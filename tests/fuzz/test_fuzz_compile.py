"""Fuzzing the compile API: generated schemas, regexes, Lark grammars and choice lists.

Each input goes through the public route the engine uses: ``GrammarSpec.<kind>(source)``, its
recipe's size check (`GrammarLimits`), then ``compile_fn(vocab)`` on the real SmolLM2
vocabulary. Asserted for every input:

- the outcome is a compiled grammar or a typed input error (a `FormcastError` that is also a
  `ValueError`), never another exception;
- a compiled grammar is usable: a random walk of up to `WALK_STEPS` tokens through its masks
  never reaches a state with no allowed token, and a walk that ends (EOS) produced text the
  input accepts: valid JSON that ``jsonschema`` validates, a Python ``re`` full match, a parse
  by Lark's own Earley parser, one of the choices;
- nothing is left behind: no thread, file descriptor or changed recursion limit after the run.

Each test prints ``FUZZ {...}`` (``pytest -s``): inputs tried, outcomes by class, crashes,
leaks. Examples are derandomized (the same inputs every run) and the Hypothesis database is
off; ``max_examples`` keeps each test near a minute on a 2-core machine (`fuzz_settings`:
``FORMCAST_FUZZ_SCALE`` / ``FORMCAST_FUZZ_RANDOM`` run longer or fresh campaigns;
``FORMCAST_FUZZ_TRACE=1`` prints each input to stderr before compiling it).
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from formcast.grammar.limits import GrammarLimits
from formcast.grammar.spec import GrammarSpec
from tests.fuzz.strategies import UNWRITABLE, json_schemas, lark_grammars, regexes
from tests.fuzz.tally import FuzzTally, ProcessSnapshot, fuzz_settings, is_typed_input_error

WALK_STEPS = 24
TRACE = bool(os.environ.get("FORMCAST_FUZZ_TRACE"))
LIMITS = GrammarLimits()


def walk(grammar: Any, rng: random.Random) -> bytes | None:
    """Random walk through ``grammar``'s masks; the bytes if it ended with EOS, else None.

    Raises AssertionError at a dead end (no allowed token, not terminated).
    """
    matcher = grammar.matcher()
    vocab = grammar.vocab
    token_ids: list[int] = []
    for _ in range(WALK_STEPS):
        if matcher.is_terminated():
            return vocab.decode_bytes(token_ids)
        allowed = matcher.allowed_token_ids()
        assert len(allowed) > 0, f"dead end after {vocab.decode_bytes(token_ids)!r}"
        eos = [int(t) for t in allowed if int(t) in vocab.eos_token_ids]
        if eos and rng.random() < 0.5:
            assert matcher.is_accepting(), "EOS allowed in a state that is not accepting"
            assert matcher.accept_token(eos[0])
            return vocab.decode_bytes(token_ids)
        token_id = int(allowed[rng.randrange(len(allowed))])
        assert matcher.accept_token(token_id), f"allowed token {token_id} was refused"
        if token_id not in vocab.eos_token_ids:
            token_ids.append(token_id)
    return None


def fuzz_compile(
    tally: FuzzTally,
    vocab: Any,
    make_spec: Callable[[], GrammarSpec],
    seed: int,
    is_accepted: Callable[[str], bool | None],
) -> None:
    """Compile one input and check the outcome; count it in ``tally``.

    ``is_accepted(text)`` is the input's own oracle for a finished walk (None: no oracle).
    """
    began = time.monotonic()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # lenient notes, lark's warnings: not outcomes
            spec = make_spec()
            if TRACE:  # the input about to compile, for a campaign that hangs or runs out
                print(f"FUZZ-INPUT {spec.recipe!r:.2000}", file=sys.stderr, flush=True)
            if spec.recipe is not None:
                spec.recipe.check_size(LIMITS)
            grammar = spec.compile_fn(vocab)
    except Exception as exc:
        seconds = time.monotonic() - began
        if is_typed_input_error(exc):
            tally.record(type(exc).__name__, seconds)
            return
        tally.crash(f"{type(exc).__name__}: {exc}")
        raise
    data = walk(grammar, random.Random(seed))
    tally.record("ok", time.monotonic() - began)  # (seconds: compile and walk)
    if data is None:
        return
    text = data.decode("utf-8")  # a finished output is UTF-8 (raises otherwise)
    verdict = is_accepted(text)
    assert verdict in (True, None), f"{spec} produced {text!r}, which its input refuses"
    tally.checks["walks_checked_by_oracle"] += verdict is True


def run_fuzzer(name: str, body: Callable[[FuzzTally], None]) -> None:
    """Run ``body(tally)`` (a Hypothesis test), then check for leaks and print the counts."""
    tally = FuzzTally(name)
    before = ProcessSnapshot.take()
    body(tally)
    leaks = ProcessSnapshot.take().leaks_since(before)
    tally.num_leaks = len(leaks)
    tally.report()
    assert tally.crashes == [] and leaks == [], (tally.crashes, leaks)
    assert tally.outcomes["ok"] > 0 and tally.num_tried > tally.outcomes["ok"]


@pytest.fixture(autouse=True)
def _private_grammar_cache(tmp_path, monkeypatch):
    """Compiled fuzz grammars go to a temporary disk cache, not the user's."""
    monkeypatch.setenv("FORMCAST_CACHE", str(tmp_path))


# ------------------------------------------------------------------------------ JSON Schema


def _schema_oracle(schema: Any) -> Callable[[str], bool | None]:
    from tests.grammar.schema_oracle import validator

    def is_accepted(text: str) -> bool | None:
        try:
            check = validator(schema)
            check.check_schema(schema)
        except Exception:  # noqa: BLE001 - jsonschema cannot judge this schema: no oracle
            return None
        try:
            return check.is_valid(json.loads(text))
        except (RecursionError, OverflowError, ValueError):
            return None  # beyond what jsonschema / json can evaluate

    return is_accepted


@pytest.mark.slow
def test_fuzz_json_schema_compile(smollm2_vocab):
    def body(tally: FuzzTally) -> None:
        @fuzz_settings(160)
        @given(json_schemas(), st.integers(0, 2**32))
        def one(schema: Any, seed: int) -> None:
            fuzz_compile(
                tally,
                smollm2_vocab,
                lambda: GrammarSpec.json_schema(schema),
                seed,
                _schema_oracle(schema),
            )

        one()

    run_fuzzer("json_schema_compile", body)


# ----------------------------------------------------------------------------------- regexes


def _regex_oracle(pattern: str) -> Callable[[str], bool | None]:
    def is_accepted(text: str) -> bool | None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # re's FutureWarning on "[[" and the like
                compiled = re.compile(pattern)
        except (re.error, OverflowError, RecursionError):
            return None
        return compiled.fullmatch(text) is not None

    return is_accepted


@pytest.mark.slow
def test_fuzz_regex_compile(smollm2_vocab):
    def body(tally: FuzzTally) -> None:
        @fuzz_settings(200)
        @given(regexes(), st.integers(0, 2**32))
        def one(pattern: str, seed: int) -> None:
            fuzz_compile(
                tally,
                smollm2_vocab,
                lambda: GrammarSpec.regex(pattern),
                seed,
                _regex_oracle(pattern),
            )

        one()

    run_fuzzer("regex_compile", body)


# ------------------------------------------------------------------------------ Lark grammars


def _lark_oracle(grammar_text: str) -> Callable[[str], bool | None]:
    def is_accepted(text: str) -> bool | None:
        import lark

        if "/a|ab/" in grammar_text:  # leftmost-greedy terminal: documented to differ
            return None
        # %ignore: lark's dynamic lexer is no oracle where an ignored terminal overlaps the
        # grammar's (with `start: ["a"] "\n"` and `%ignore WS` it parses "\n\n" but not
        # " \n", and `start: ["\n"]` ends in its "Earley should not generate multiple start
        # symbol items" RuntimeError); formcast allows ignored text between any two terminals
        if "%ignore" in grammar_text:
            return None
        try:
            parser = lark.Lark(grammar_text, parser="earley", lexer="dynamic_complete")
        except Exception:  # noqa: BLE001 - lark cannot build its own parser: no oracle
            return None
        try:
            parser.parse(text)
        except lark.exceptions.LarkError:
            return False
        return True

    return is_accepted


@pytest.mark.slow
def test_fuzz_lark_compile(smollm2_vocab):
    def body(tally: FuzzTally) -> None:
        @fuzz_settings(120)
        @given(lark_grammars(), st.integers(0, 2**32))
        def one(text: str, seed: int) -> None:
            fuzz_compile(
                tally, smollm2_vocab, lambda: GrammarSpec.lark(text), seed, _lark_oracle(text)
            )

        one()

    run_fuzzer("lark_compile", body)


# ----------------------------------------------------------------------------------- choices

CHOICE_ITEMS = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["", "yes", "y", "yes!", "\ud800", "a\x00", "键盘", *UNWRITABLE]),
    st.sampled_from([None, 1, b"bytes", ["nested"]]),
)


@pytest.mark.slow
def test_fuzz_choice_compile(smollm2_vocab):
    def body(tally: FuzzTally) -> None:
        @fuzz_settings(150)
        @given(st.one_of(st.lists(CHOICE_ITEMS, max_size=5), st.text(max_size=4)), st.integers())
        def one(choices: Any, seed: int) -> None:
            def is_accepted(text: str) -> bool:
                return text in choices

            fuzz_compile(
                tally, smollm2_vocab, lambda: GrammarSpec.choice(choices), seed, is_accepted
            )

        one()

    run_fuzzer("choice_compile", body)
