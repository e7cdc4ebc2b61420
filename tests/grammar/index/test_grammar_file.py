"""Grammar files (the grammar cache's on-disk format, data only) and the cache built on them.

- Real grammars over the SmolLM2 vocabulary (a JSON Schema on the regex route, the same
  schema on the structural route, a Lark grammar) compiled into a temporary
  ``FORMCAST_CACHE``, every in-memory cache cleared, compiled again with every builder
  forbidden: the grammar comes from disk and gives the same masks on every step.
- Truncated files, random bytes, a foreign magic, other format versions, flipped bits and a
  file naming a class outside the allowlist: each is logged, recompiled and overwritten.
- A planted pickle whose unpickling creates a marker file, under the old ``.pkl`` name and
  the new ``.fcg`` name of a grammar's key: compiling that grammar never creates the marker.
- Writing a value outside the format fails loudly; a Hypothesis round trip of nested values
  (types kept exactly, sharing and object cycles kept, arrays bit-exact).
"""

from __future__ import annotations

import json
import logging
import math
import pickle
import random
import struct
import sys
import zlib
from pathlib import Path

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formcast.grammar import caches
from formcast.grammar.automata.byte_dfa import ByteDFA
from formcast.grammar.automata.chain_keys import ChainKeys
from formcast.grammar.cfg import compiled as cfg_compiled
from formcast.grammar.cfg import lark_frontend
from formcast.grammar.cfg.compiled import CfgTuning
from formcast.grammar.cfg.lark_frontend import compile_lark
from formcast.grammar.cfg.rules import CfgGrammar
from formcast.grammar.index import compile as index_compile
from formcast.grammar.index import grammar_cache, grammar_file
from formcast.grammar.index.compile import compile_regex
from formcast.grammar.index.compiled_grammar import CompiledGrammar
from formcast.grammar.index.grammar_cache import GrammarCache, cache_key
from formcast.grammar.index.grammar_file import GrammarFileError, UnsupportedValueError
from formcast.grammar.json_schema.compile import compile_json_schema
from formcast.grammar.regex.syntax_tree import CharSet, Concat, Repeat
from tests.grammar._cfg_grammars import JSON_LARK

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 0},
        "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3},
        "ratio": {"type": "number"},
    },
    "required": ["name", "age"],
}
INSTANCES = [
    '{"name": "Ada", "age": 36, "tags": ["red", "blue"], "ratio": 0.5}',
    '{"name":"","age":0}',
    '{"name": "grammar file", "age": 1234567, "tags": []}',
]
JSON_TEXTS = ['{"k": [1, {"x": "y"}], "n": null}', '[true, false, -1.5e3, "\\u00e9"]']


def _forbidden(*args, **kwargs):
    raise AssertionError("the grammar was rebuilt instead of read from disk")


def _rows_along(grammar, token_ids: list[int]) -> list[bytes]:
    """The packed mask before every token and after the last (the text must be accepted)."""
    matcher = grammar.matcher()
    rows = []
    for token_id in token_ids:
        rows.append(matcher.packed_row().tobytes())
        assert matcher.accept_token(token_id)
    rows.append(matcher.packed_row().tobytes())
    assert matcher.is_accepting()
    return rows


def _files(folder: Path, pattern: str) -> list[Path]:
    return sorted((folder / "grammars").glob(pattern))


# ------------------------------------------------------------------ real grammars, reloaded


@pytest.mark.parametrize("route", ["regex", "cfg"])
def test_json_schema_grammar_reloads_from_disk_with_same_masks(
    route, smollm2_vocab, smollm2_tokenizer, tmp_path, monkeypatch
):
    monkeypatch.setenv("FORMCAST_CACHE", str(tmp_path))
    first = compile_json_schema(SCHEMA, smollm2_vocab, route=route)
    assert type(first) is (CompiledGrammar if route == "regex" else cfg_compiled.CompiledCFG)
    assert len(_files(tmp_path, "*.fcg")) == 1 and not _files(tmp_path, "*.pkl")
    caches.clear_all()
    monkeypatch.setattr(index_compile, "regex_to_dfa", _forbidden)
    monkeypatch.setattr(cfg_compiled, "prepare_grammar", _forbidden)
    second = compile_json_schema(SCHEMA, smollm2_vocab, route=route)
    assert second is not first
    for text in INSTANCES:
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        assert _rows_along(first, ids) == _rows_along(second, ids)
    if route == "regex":  # every state's row, not only those along the instances
        assert second.index.is_eager
        for state in range(first.dfa.num_states):
            assert np.array_equal(first.index.row(state), second.index.row(state))
    else:  # the terminals are syntax trees: slotted objects shared between terminals
        assert any(not isinstance(regex, str) for regex in second.cfg.terminal_regexes)
        assert second.prepared.terminal_names == first.prepared.terminal_names


def test_lark_grammar_reloads_from_disk_with_same_masks(
    smollm2_vocab, smollm2_tokenizer, tmp_path, monkeypatch
):
    monkeypatch.setenv("FORMCAST_CACHE", str(tmp_path))
    text = JSON_LARK + "\n// grammar file test\n"
    first = compile_lark(text, smollm2_vocab)
    assert len(_files(tmp_path, "*.fcg")) == 1
    caches.clear_all()
    monkeypatch.setattr(lark_frontend, "lark_to_cfg", _forbidden)
    monkeypatch.setattr(cfg_compiled, "prepare_grammar", _forbidden)
    second = compile_lark(text, smollm2_vocab)
    assert second is not first
    # the lexer's walks came back with the file: the same split groups, shared the same way
    assert second.lexer.num_states == first.lexer.num_states
    assert len(second.lexer._groups) == len(first.lexer._groups)
    for text_value in JSON_TEXTS:
        ids = smollm2_tokenizer.encode(text_value, add_special_tokens=False)
        assert _rows_along(first, ids) == _rows_along(second, ids)


# ------------------------------------------------------------------ damaged files are misses


def _rewrite(data: bytes, edit_text) -> bytes:
    """``data`` (a grammar file) with its JSON edited by ``edit_text`` and the header (lengths
    and checksums) made consistent again, so only the edit itself is wrong."""
    header = grammar_file._HEADER
    magic, version, flags, text_size, values_size, tables_size, _, _ = header.unpack(
        data[: header.size]
    )
    text = data[header.size : header.size + text_size]
    region = data[len(data) - values_size - tables_size :]
    text = edit_text(text.decode("ascii")).encode("ascii")
    words = int(np.frombuffer(region, dtype="<u8").sum(dtype=np.uint64))
    fields = (magic, version, flags, len(text), values_size, tables_size, zlib.crc32(text), words)
    return header.pack(*fields) + text + bytes(-len(text) % 64) + region


def _set_version(data: bytes, version: int) -> bytes:
    return data[:8] + struct.pack("<I", version) + data[12:]


def _buffer_past_the_end(text: str) -> str:
    document = json.loads(text)
    document["buffers"][0][2] = 1 << 30  # the offset of the first buffer
    return json.dumps(document)


def _flip_bit(data: bytes, offset: int) -> bytes:
    return data[:offset] + bytes([data[offset] ^ 0x10]) + data[offset + 1 :]


DAMAGE = {
    "truncated": lambda data: data[: len(data) // 2],
    "truncated header": lambda data: data[:40],
    "empty": lambda data: b"",
    "random bytes": lambda data: random.Random(0).randbytes(len(data)),
    "foreign magic": lambda data: b"PK\x03\x04\x14\x00\x00\x00" + data[8:],
    "newer version": lambda data: _set_version(data, grammar_file.FORMAT_VERSION + 1),
    "version 0": lambda data: _set_version(data, 0),
    "flipped bit in JSON": lambda data: _flip_bit(data, 70),
    "flipped bit in data": lambda data: _flip_bit(data, len(data) - 100),
    "trailing bytes": lambda data: data + b"\0" * 64,
    "class outside the allowlist": lambda data: _rewrite(
        data,
        edit_text=lambda text: text.replace(
            "formcast.grammar.automata.byte_dfa.ByteDFA", "subprocess.Popen"
        ),
    ),
    "special attribute name": lambda data: _rewrite(
        data, edit_text=lambda text: text.replace('"walk_keys"', '"__class__"')
    ),
    "JSON that is not a document": lambda data: _rewrite(data, edit_text=lambda text: "[1, 2]"),
    "classes of another version": lambda data: _rewrite(
        data, edit_text=lambda text: text.replace(grammar_file.class_layouts(), "0" * 16)
    ),
    "buffer past the data region": lambda data: _rewrite(data, edit_text=_buffer_past_the_end),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_file_is_logged_recompiled_and_overwritten(
    damage, smollm2_vocab, tmp_path, monkeypatch, caplog
):
    monkeypatch.setenv("FORMCAST_CACHE", str(tmp_path))
    cache = GrammarCache()
    calls = []

    def build():
        calls.append(1)
        return compile_regex(r"[a-c]{2,5}x?", smollm2_vocab, cache=False)

    key = cache_key("regex", r"[a-c]{2,5}x?", {"dialect": "python"}, smollm2_vocab)
    first = cache.get_or_compile(key, smollm2_vocab, build)
    (path,) = _files(tmp_path, "*.fcg")
    good = path.read_bytes()
    damaged = DAMAGE[damage](good)
    assert damaged != good
    with pytest.raises(GrammarFileError):
        grammar_file.loads(damaged)
    path.write_bytes(damaged)
    cache.clear_memory()
    with caplog.at_level(logging.WARNING, logger=grammar_cache.__name__):
        second = cache.get_or_compile(key, smollm2_vocab, build)
    assert len(calls) == 2  # recompiled
    assert any(str(path) in record.getMessage() for record in caplog.records)
    assert path.read_bytes() != damaged  # overwritten with a good file
    assert isinstance(grammar_file.load(path), dict)
    for state in range(first.dfa.num_states):
        assert np.array_equal(first.index.row(state), second.index.row(state))


def test_stale_payload_version_is_logged_and_recompiled(
    smollm2_vocab, tmp_path, monkeypatch, caplog
):
    monkeypatch.setenv("FORMCAST_CACHE", str(tmp_path))
    text = 'start: "a" start | "b"\n'
    compile_lark(text, smollm2_vocab)
    (path,) = _files(tmp_path, "*.fcg")
    payload = grammar_file.load(path)
    payload["cfg_version"] -= 1  # written by an older layout of the lexer state
    path.write_bytes(grammar_file.dumps(payload))
    cfg_compiled.clear_memory_cache()
    with caplog.at_level(logging.WARNING, logger=cfg_compiled.__name__):
        again = compile_lark(text, smollm2_vocab)
    assert any("version" in record.getMessage() for record in caplog.records)
    matcher = again.matcher()
    assert matcher.accept_bytes(b"aab") and matcher.is_accepting()
    assert grammar_file.load(path)["cfg_version"] == payload["cfg_version"] + 1


# ------------------------------------------------------------------ planted pickles


class _CreatesMarker:
    """Unpickling this calls ``open(marker, "w")``: the file appears."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def _planted_pickle(marker: Path) -> bytes:
    blob = pickle.dumps({"version": 5, "cfg_version": 8, "dfa": _CreatesMarker(marker)})
    assert not marker.exists()
    pickle.loads(blob).get("dfa").close()  # the payload works: unpickling creates the marker
    assert marker.exists()
    marker.unlink()
    return blob


@pytest.mark.parametrize("kind", ["regex", "lark"])
def test_planted_pickle_is_never_unpickled(
    kind, smollm2_vocab, smollm2_tokenizer, tmp_path, monkeypatch, caplog
):
    def compile_it():
        if kind == "regex":
            return compile_regex(r"(?:ab|cd)+e?", smollm2_vocab)
        return compile_lark(JSON_LARK + "\n// planted pickle\n", smollm2_vocab)

    # the key's file names, from a compile into another folder
    monkeypatch.setenv("FORMCAST_CACHE", str(tmp_path / "probe"))
    reference = compile_it()
    (probe,) = _files(tmp_path / "probe", "*.fcg")
    caches.clear_all()
    cache_dir = tmp_path / "cache"
    (cache_dir / "grammars").mkdir(parents=True)
    monkeypatch.setenv("FORMCAST_CACHE", str(cache_dir))
    marker = tmp_path / "marker"
    blob = _planted_pickle(marker)
    planted = [cache_dir / "grammars" / f"{probe.stem}{suffix}" for suffix in (".pkl", ".fcg")]
    for path in planted:
        path.write_bytes(blob)
    with caplog.at_level(logging.WARNING, logger=grammar_cache.__name__):
        grammar = compile_it()
    assert not marker.exists()
    assert any("not a formcast grammar file" in record.getMessage() for record in caplog.records)
    assert planted[0].read_bytes() == blob  # the old name is left alone
    assert planted[1].read_bytes() != blob  # the new name now holds the recompiled grammar
    text = "abcde" if kind == "regex" else JSON_TEXTS[0]
    ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
    assert _rows_along(grammar, ids) == _rows_along(reference, ids)
    caches.clear_all()
    compile_it()  # and that file is read back
    assert not marker.exists()


def test_class_named_by_a_file_is_never_imported(tmp_path, monkeypatch):
    marker = tmp_path / "imported"
    (tmp_path / "planted_module.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    data = grammar_file.dumps({"keys": ChainKeys("a", 2, 0, 3)})
    name = "formcast.grammar.automata.chain_keys.ChainKeys"
    damaged = _rewrite(data, edit_text=lambda text: text.replace(name, "planted_module.Evil"))
    with pytest.raises(GrammarFileError, match="planted_module.Evil"):
        grammar_file.loads(damaged)
    assert not marker.exists() and "planted_module" not in sys.modules


# ------------------------------------------------------------------ what cannot be written


class _NotAllowed:
    def __init__(self) -> None:
        self.value = 1


class _ByteDfaSubclass(ByteDFA):
    pass


@pytest.mark.parametrize(
    "value, message",
    [
        ({"x": [_NotAllowed()]}, "_NotAllowed"),
        (
            _ByteDfaSubclass(np.zeros((1, 1), np.int32), np.zeros(256, np.uint8), np.ones(1, bool)),
            "_ByteDfaSubclass",
        ),
        ({"x": np.array([object()])}, "dtype object"),
        ({"x": np.array(["text"])}, "dtype <U4"),
        (lambda: None, "function"),
        ({"x": range(3)}, "range"),
    ],
)
def test_writing_what_the_format_cannot_hold_fails_loudly(value, message):
    with pytest.raises(UnsupportedValueError, match=message):
        grammar_file.dumps(value)


def test_a_list_containing_itself_is_refused():
    loop: list = [1]
    loop.append([loop])
    with pytest.raises(UnsupportedValueError, match="reachable from itself"):
        grammar_file.dumps(loop)


def test_store_payload_fails_loudly_and_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.setenv("FORMCAST_CACHE", str(tmp_path))
    with pytest.raises(UnsupportedValueError):
        grammar_cache.store_payload("k" * 64, {"version": 5, "dfa": _NotAllowed()})
    assert not list(tmp_path.rglob("*.*"))


# ------------------------------------------------------------------ round trips of values


def _same(a, b, seen: set[tuple[int, int]] | None = None) -> None:
    """Assert ``b`` equals ``a`` with the same types everywhere (bool is not int, tuple is not
    list), arrays bit-exact with the same dtype, shape and writeable flag."""
    seen = set() if seen is None else seen
    if (id(a), id(b)) in seen:
        return
    seen.add((id(a), id(b)))
    assert type(a) is type(b), (type(a), type(b))
    if type(a) is np.ndarray:
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes(order="A") == b.tobytes(order="A")
        assert a.flags.writeable == b.flags.writeable
        assert a.flags.f_contiguous == b.flags.f_contiguous or a.ndim < 2
    elif type(a) is float:
        assert struct.pack("<d", a) == struct.pack("<d", b) or (math.isnan(a) and math.isnan(b))
    elif isinstance(a, np.generic):
        assert a.tobytes() == b.tobytes()
    elif type(a) in (list, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y, seen)
    elif type(a) is dict:
        assert list(map(_canonical, a)) == list(map(_canonical, b))
        for x, y in zip(a.values(), b.values(), strict=True):
            _same(x, y, seen)
    elif type(a) in (set, frozenset):
        assert sorted(map(_canonical, a)) == sorted(map(_canonical, b))
    elif type(a) in (int, bool, str, bytes, type(None)):
        assert a == b
    else:
        codec = grammar_file._codec_of(type(a))
        _same(codec.state(a), codec.state(b), seen)


def _canonical(value) -> str:
    """A text that tells apart hashable values of different types (1, True, 1.0)."""
    if type(value) in (tuple, frozenset):
        parts = (
            sorted(map(_canonical, value)) if type(value) is frozenset else map(_canonical, value)
        )
        return f"{type(value).__name__}({','.join(parts)})"
    if type(value) is float:
        return f"float({struct.pack('<d', value).hex()})"
    return f"{type(value).__name__}({value!r})"


_dtypes = st.sampled_from(
    ["bool", "int8", "<i2", ">i4", "int64", "uint8", "<u4", "float16", "float32", ">f8"]
)
_arrays = hnp.arrays(_dtypes, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(st.characters(), max_size=8)
    | st.binary(max_size=8)
)
_hashables = (
    _scalars
    | st.tuples(_scalars, _scalars)
    | st.frozensets(_scalars, max_size=3)
    | st.tuples(_scalars, st.frozensets(st.tuples(_scalars, _scalars), max_size=3))
)
_objects = st.builds(
    ChainKeys, st.text(max_size=4), st.integers(1, 9), st.integers(0, 5), st.integers(5, 9)
)
_values = st.recursive(
    _hashables
    | st.floats()
    | _arrays
    | _arrays.map(lambda array: array[()] if array.ndim == 0 else array.T)
    | _objects
    | st.builds(CfgTuning, st.sampled_from(["auto", "lr"]), st.integers(0, 9)),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(_hashables, inner, max_size=4)
        | st.sets(_hashables, max_size=4)
        | st.builds(
            CfgGrammar,
            st.lists(st.text(max_size=3), max_size=2),
            st.lists(st.text(max_size=3), max_size=2),
            st.lists(st.text(max_size=3), max_size=2),
            st.lists(st.tuples(st.integers(0, 3), st.tuples(st.integers(-3, 3))), max_size=2),
            st.integers(0, 3),
            st.lists(inner, max_size=2),
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_values)
def test_nested_values_round_trip(value):
    _same(value, grammar_file.loads(grammar_file.dumps(value)))


def test_sharing_and_object_cycles_are_kept():
    shared_list = [1, 2]
    shared_tree = Concat((CharSet(((97, 98),), pos=-1), CharSet(((48, 57),), pos=-1)))
    grammar = CfgGrammar(["t"], [shared_tree], ["s"], [(0, (0,))], 0, [])
    grammar.ignore = [grammar, {"self": grammar}]  # an object reachable from itself
    value = {
        "lists": [shared_list, shared_list],
        "trees": (shared_tree, Repeat(shared_tree, 1, None, pos=-1)),
        "grammar": grammar,
    }
    loaded = grammar_file.loads(grammar_file.dumps(value))
    assert loaded["lists"][0] is loaded["lists"][1]
    assert loaded["trees"][1].item is loaded["trees"][0]
    assert loaded["grammar"].terminal_regexes[0] is loaded["trees"][0]
    assert loaded["grammar"].ignore[0] is loaded["grammar"]
    assert loaded["grammar"].ignore[1]["self"] is loaded["grammar"]
    # slotted syntax tree nodes: equal, same hash (a memo key), same printed size
    assert loaded["trees"] == value["trees"] and hash(loaded["trees"]) == hash(value["trees"])
    assert loaded["trees"][1].num_chars == value["trees"][1].num_chars


def test_arrays_keep_layout_flags_and_are_aligned():
    fortran = np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4))
    strided = np.arange(20, dtype=np.int64)[::3]
    frozen = np.arange(5, dtype=np.uint8)
    frozen.setflags(write=False)
    value = [fortran, strided, frozen, np.zeros((0, 7), np.float32), np.array(3.5)]
    loaded = grammar_file.loads(grammar_file.dumps(value))
    _same(value, loaded)
    assert loaded[0].flags.f_contiguous and np.array_equal(loaded[0], fortran)
    assert np.array_equal(loaded[1], strided)
    assert not loaded[2].flags.writeable and loaded[0].flags.writeable
    for array in loaded:
        assert array.ctypes.data % 64 == 0 or array.size == 0
    loaded[0][0, 0] = 99  # writeable arrays are writeable (the lexer grows tables in place)


def test_bytes_json_scalars_and_unicode_survive():
    value = {
        "text": "caf\u00e9 \ud800 \U0001f600 \x00",  # a lone surrogate as well
        "raw": bytes(range(256)),
        "ints": [0, -1, 2**63 - 1, -(2**63), 2**64, -(2**200)],
        "floats": [0.0, -0.0, math.inf, -math.inf, 1e-310, math.nan],
        "flags": [True, False, None, 1, 0],
        "scalars": [np.int8(-3), np.float32(0.1), np.bool_(True), np.uint64(2**64 - 1)],
    }
    _same(value, grammar_file.loads(grammar_file.dumps(value)))


def test_document_is_plain_json_with_allowlisted_class_names():
    data = grammar_file.dumps(
        {"dfa": ByteDFA(np.zeros((1, 1), np.int32), np.zeros(256, np.uint8), np.ones(1, bool))}
    )
    header = grammar_file._HEADER
    text_size = header.unpack(data[: header.size])[3]
    document = json.loads(data[header.size : header.size + text_size])
    assert document["classes"] == ["formcast.grammar.automata.byte_dfa.ByteDFA"]
    assert set(document["classes"]) <= set(grammar_file.ALLOWED_CLASSES)
