"""warm_all_kernels: load (or JIT-compile) every numba kernel of the grammar package at once.

The kernels (``automaton_kernels``, ``token_index_kernels``, ``cfg_walk_kernels``,
``any_value_frames``) are compiled by numba on first use and cached on disk next to their
modules. A cold cache (fresh checkout, or after ``make relink``) costs ~30 s of JIT once; a warm
one ~0.1-0.6 s per process. ``make install`` calls this once so that neither tests nor the first
request pay the JIT, and compile entry points call :func:`formcast.grammar.index.compile.warm_kernels`
(the automaton and index kernels) before their budget clocks start.
"""

from __future__ import annotations

from formcast.grammar.index.vocabulary import Vocabulary

_LARK_WITH_IGNORE = """
start: item ("," item)*
item: WORD | "[" start "]"
%import common.WORD
%ignore " "
"""


def warm_all_kernels(vocab: Vocabulary) -> None:
    """Run every grammar kernel once on small inputs over ``vocab``.

    Exercises: regex determinisation/minimisation and the eager token index (a regex),
    the CFG lexer walks of both paths (a Lark grammar with ``%ignore``, a GBNF-like grammar
    without it, masks across split tokens; set walks over many key terminals), and the
    unbounded-value frames of JSON Schema (an open object with nested containers), the
    matcher-side checks of `uniqueItems` (their per-vocabulary tables), and the counted-chain
    walks of bounded strings (shared by every ``maxLength``).
    """
    import numpy as np

    from formcast.bitmask import allocate_token_bitmask
    from formcast.grammar.automata import byte_dfa
    from formcast.grammar.automata import kernels as automata_kernels
    from formcast.grammar.cfg.lark_frontend import compile_lark
    from formcast.grammar.index.compile import compile_regex, warm_kernels
    from formcast.grammar.json_schema.compile import compile_json_schema
    from formcast.grammar.json_schema.structural import compile_json_schema_cfg

    warm_kernels(vocab)
    # a DFA table's cycle check (the lexer's set-walk eligibility of wide terminals)
    automata_kernels.is_acyclic(np.array([[1, -1], [-1, -1]], dtype=np.int32))
    # key-language products (patternProperties classes, `format` with `pattern`)
    automata_kernels.product_rows(
        np.array([[1, 0], [1, 1], [0, 0]], dtype=np.int32), np.array([0, 2, 3]), 16
    )
    # length-guard intersections (pattern with minLength / maxLength)
    automata_kernels.pair_product(
        np.array([[0, -1]], dtype=np.int32), np.array([[0, 0]], dtype=np.int32), 4
    )
    # trimming called from Python (the minimiser's quotient): `determinize` reaches the same
    # kernels only from inside numba, which does not load their Python-level dispatch
    byte_dfa.trim(
        np.array([[1], [-1]], dtype=np.int32), np.zeros(256, dtype=np.uint8), np.array([0, 1]) > 0
    )
    # the minimiser's quotient (called from Python after Hopcroft's blocks)
    automata_kernels.quotient(
        np.array([[1], [-1]], dtype=np.int32), np.array([0, 1]) > 0, np.array([0, 1]), 2
    )
    compile_regex(r"[a-z]{1,4}(,[0-9]+)?", vocab, cache=False)
    bitmask = allocate_token_bitmask(1, vocab.vocab_size)
    for text, prefix in (
        (_LARK_WITH_IGNORE, b"ab, [cd ,ef], g"),
        ('start: "[" NUM ("," NUM)* "]"\nNUM: /[0-9]+/', b"[12,3"),
    ):
        matcher = compile_lark(text, vocab, cache=False).matcher()
        for byte in prefix:
            matcher.fill_bitmask(bitmask, 0)
            matcher.accept_bytes(bytes([byte]))
    grammar = compile_json_schema({"type": "object"}, vocab, strict=False, cache=False)
    matcher = grammar.matcher()
    for byte in b'{"a":[{"b":[1]}],"c":{}}':
        matcher.fill_bitmask(bitmask, 0)
        matcher.accept_bytes(bytes([byte]))
    # the matcher-side checks (uniqueItems, counted strings): their per-vocabulary tables
    unique = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    unique_objects = {
        "type": "array",
        "items": {"type": "object", "properties": {"a": {"type": "string"}}},
        "uniqueItems": True,
    }  # (items read through an item automaton: its candidate filters)
    for schema, text in ((unique, b'["a","b"]'), (unique_objects, b'[{"a":"x"},{"a":"y"}]')):
        matcher = compile_json_schema(schema, vocab, cache=False).matcher()
        for byte in text:
            matcher.fill_bitmask(bitmask, 0)
            matcher.accept_bytes(bytes([byte]))
    # a bounded string's counted chain: its vocabulary walks are keyed by the chain's code, not
    # its length, so every later maxLength string of any grammar reads them (a first string
    # value otherwise costs a grammar's first visit 1-3 ms)
    bounded = {"properties": {"s": {"type": "string", "maxLength": 64}}, "required": ["s"]}
    matcher = compile_json_schema_cfg(bounded, vocab, cache=False).matcher()
    for byte in b'{"s":"ab':
        matcher.fill_bitmask(bitmask, 0)
        matcher.accept_bytes(bytes([byte]))
    # one terminal per member: the lexer's set walks (many key terminals at once)
    keys = {f"k{i}": {"type": "integer"} for i in range(10)}
    grammar = compile_json_schema_cfg({"properties": keys}, vocab, cut_chars=1, cache=False)
    matcher = grammar.matcher()
    for byte in b'{"k0":1,"k9":2}':
        matcher.fill_bitmask(bitmask, 0)
        matcher.accept_bytes(bytes([byte]))
