"""Grammar files: the on-disk format of the grammar cache, data only (never executable).

Cache entries used to be pickles, and unpickling calls whatever the file names, so whoever
could write to the cache folder could run code in every process that read it. A grammar file
holds data only::

    fixed header (64 bytes): magic, format version, JSON length, data lengths, checksums
    JSON (ASCII): class, layout and buffer tables, strings, ints beyond 64 bits, shells, root
    zero padding to a multiple of 64, then the data region: raw buffers, 64-byte aligned:
    first the values' arrays and bytes, then the node tables (read into a separate buffer
    that is freed after loading, so the loaded arrays keep only their own bytes alive)

A value graph is stored as *slots*: slots ``0..2`` are ``None``, ``False`` and ``True``, then
come the distinct 64-bit ints (an int buffer), the floats (a float64 buffer, bit-exact), the
distinct strings and the larger ints (hex text), then one slot per *node*: a tuple, list, dict
(keys and values alternating), set or frozenset of child slots, an object of a class named in
:data:`ALLOWED_CLASSES` (one child slot per attribute of its *layout*), or bytes, a numpy array
or a numpy scalar (a buffer of the data region, viewed in place with ``np.frombuffer``: bool
and numeric dtypes only, never ``allow_pickle``). A value reached along several paths is one
node, so shared references load as one object, as with pickle (a split group held by many
token walks, a terminal DFA that is also an ignore DFA, a syntax tree node shared by many
terminals, a lexer state's expected set that is also in its key).

Nodes are ordered by height (a node's children are scalars or nodes of smaller height), then
by tag, child count and layout; the run table holds, per run of nodes alike in all four, the
tag, the child count, the number of nodes and the layout, and one int buffer holds the child
slots of every node in that order (another the buffer or shell index of each node). Every
child of a run is built before the run, so reading needs no recursion however deep a syntax
tree is, and a run is built by C-level ``map``/``zip`` pipelines (all pair tuples of a height
by one ``zip``, all CharSets of a height one attribute column at a time) rather than a Python
loop per node: loading costs about what unpickling did.

An object is rebuilt as ``object.__new__(cls)`` plus its stored attributes (through the class's
own ``__setstate__`` where it defines ``__getstate__`` and ``__setstate__``, as ``ByteDFA``
does to leave its row cache out); nothing the file names is ever called. Writing an object of
another class raises :class:`UnsupportedValueError` (a bug: the cache was handed something it
was not meant to hold); a file naming one is a :class:`GrammarFileError`, as is a file with a
foreign magic, another format version, a size that disagrees with its header, a checksum
mismatch, class attributes other than this formcast's (:func:`class_layouts`) or malformed
content. An object reachable from its own attributes (a reference
cycle) is rebuilt through a *shell* created before the nodes are read (as with pickle, a class
whose hash depends on its attributes must not be hashed inside its own cycle); a cycle that
comes back to a list, dict, set or tuple is refused when writing (none of the cached graphs
has a cycle at all).

Checksums: CRC-32 of the JSON text; for the data region (padded to 64 bytes), the sum of its
little-endian 64-bit words modulo 2**64, which catches flipped bits and zeroed pages at memory
speed (CRC-32 over the arrays would cost more than reading them).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import hashlib
import importlib
import io
import itertools
import json
import os
import struct
import types
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from formcast.errors import FormcastError
from formcast.grammar.automata.budget import gc_paused

MAGIC = b"\x89FCGRAM\n"
FORMAT_VERSION = 1
# magic, format version, flags (0), JSON length, value data length, table data length,
# CRC-32 of the JSON, word sum of the data region
_HEADER = struct.Struct("<8sIIQQQIQ12x")
_ALIGN = 64

# The classes whose objects a grammar file may hold (module path + qualified name). Reading
# resolves a name only if it is listed here, and the name must lead back to that same class.
ALLOWED_CLASSES: tuple[str, ...] = (
    "formcast.grammar.automata.byte_dfa.ByteDFA",
    "formcast.grammar.automata.chain_keys.ChainKeys",
    "formcast.grammar.cfg.compiled.CfgTuning",
    "formcast.grammar.cfg.first_follow.FirstFollow",
    "formcast.grammar.cfg.lexer.SplitGroup",
    "formcast.grammar.cfg.lexer.TokenWalk",
    "formcast.grammar.cfg.lr.LRTable",
    "formcast.grammar.cfg.rules.CfgGrammar",
    "formcast.grammar.cfg.rules.PreparedGrammar",
    "formcast.grammar.regex.syntax_tree.Alternation",
    "formcast.grammar.regex.syntax_tree.Anchor",
    "formcast.grammar.regex.syntax_tree.Automaton",
    "formcast.grammar.regex.syntax_tree.CharSet",
    "formcast.grammar.regex.syntax_tree.Concat",
    "formcast.grammar.regex.syntax_tree.Lookahead",
    "formcast.grammar.regex.syntax_tree.Reference",
    "formcast.grammar.regex.syntax_tree.Repeat",
)

# node tags; the argument is the layout (objects), the buffer (arrays, bytes, numpy scalars)
# or the shell (shells and the objects that fill them), else 0
(
    _TUPLE, _LIST, _DICT, _FROZENSET, _SET, _OBJECT, _SHELL_OBJECT, _SHELL, _BYTES, _ARRAY,
    _SCALAR,
) = range(11)  # fmt: skip
_CONTAINER_TAGS = {tuple: _TUPLE, list: _LIST, dict: _DICT, frozenset: _FROZENSET, set: _SET}
_SEQUENCE_TYPES = {_TUPLE: tuple, _LIST: list, _FROZENSET: frozenset, _SET: set}
# while writing, a child is a code: (index << 3) | kind, turned into its slot at the end
_NODE, _INT, _FLOAT, _STR, _BIG_INT, _CONSTANT = range(6)  # kinds (_CONSTANT: None/False/True)
_NONE_CODE, _FALSE_CODE, _TRUE_CODE = _CONSTANT, 1 << 3 | _CONSTANT, 2 << 3 | _CONSTANT
_NUM_CONSTANTS = 3
_ONLY_INTS, _ONLY_STRINGS = {int}, {str}
_TABLES = ("ints", "floats", "runs", "args", "children")  # buffers of the node tables
_OPEN = -1  # (while writing: a container or object whose children are being written)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# bool and numeric dtypes in either byte order, by ``dtype.str``
_DTYPES = {
    np.dtype(f"{order}{kind}{size}").str: np.dtype(f"{order}{kind}{size}")
    for kind, sizes in {"b": (1,), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "f": (2, 4, 8)}.items()
    for size in sizes
    for order in "<>"
}
_INT_DTYPES = tuple(np.dtype(f"<i{size}") for size in (1, 2, 4, 8))
_WORDS = np.dtype("<u8")


class GrammarFileError(FormcastError, ValueError):
    """A grammar file that cannot be read: foreign magic, another format version, a size that
    disagrees with its header, a checksum mismatch, a class outside the allowlist, classes
    written with other attributes or malformed content. The grammar cache treats it as a
    miss."""


class UnsupportedValueError(FormcastError, TypeError):
    """A value a grammar file cannot hold (an object of a class outside
    :data:`ALLOWED_CLASSES`, an array of another dtype, a cycle back to a container): a bug in
    what the caller asked to store."""


# ------------------------------------------------------------------------------- classes

_SETSTATE, _DICT_ATTRS, _SLOT_ATTRS = range(3)  # how a class takes its attributes back


@dataclass(frozen=True)
class _ClassCodec:
    """How the objects of one allowed class are taken apart and rebuilt.

    ``mode``: ``_SETSTATE`` (the class defines ``__getstate__``/``__setstate__`` over a dict),
    ``_DICT_ATTRS`` (attributes in ``__dict__``) or ``_SLOT_ATTRS`` (slots only)."""

    cls: type
    name: str
    mode: int
    slot_names: tuple[str, ...]
    slot_setters: dict[str, Callable[[Any, Any], None]]  # the slots' member descriptors

    def attributes(self, obj: object) -> tuple[tuple[str, ...], list[Any]]:
        """The names and values of the attributes ``obj`` is stored with."""
        if self.mode == _SLOT_ATTRS:
            try:
                return self.slot_names, [getattr(obj, name) for name in self.slot_names]
            except AttributeError:  # an unset slot: store the others
                pass
        state = self.state(obj)
        return tuple(state), list(state.values())

    def state(self, obj: object) -> dict[str, Any]:
        if self.mode == _SETSTATE:
            state = obj.__getstate__()
            if type(state) is not dict:
                raise UnsupportedValueError(
                    f"{self.name}.__getstate__ returned a {type(state).__name__}, not a dict"
                )
            return state
        if self.mode == _DICT_ATTRS:
            return dict(vars(obj))
        return {name: getattr(obj, name) for name in self.slot_names if hasattr(obj, name)}

    def check_names(self, names: tuple[str, ...]) -> None:
        """Raise ``GrammarFileError`` for attribute names this class cannot take from a file."""
        for name in names:
            if type(name) is not str or not name.isidentifier():
                raise GrammarFileError(f"{self.name}: bad attribute name {name!r}")
            if name.startswith("__") and name.endswith("__"):
                raise GrammarFileError(f"{self.name}: refusing special attribute {name!r}")
            if self.mode == _SLOT_ATTRS and name not in self.slot_names:
                raise GrammarFileError(f"{self.name} has no attribute slot {name!r}")
        if len(set(names)) != len(names):
            raise GrammarFileError(f"{self.name}: an attribute named twice")


def _qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _make_codec(cls: type, name: str) -> _ClassCodec:
    slot_names: list[str] = []
    for klass in reversed(cls.__mro__):
        slots = vars(klass).get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            if slot not in ("__dict__", "__weakref__") and slot not in slot_names:
                slot_names.append(slot)
    # the class that gives instances a __dict__ holds its descriptor
    has_dict = any("__dict__" in vars(klass) for klass in cls.__mro__ if klass is not object)
    if has_dict == bool(slot_names):
        raise UnsupportedValueError(f"{name}: attributes must live in __dict__ or slots alone")
    setters = {}
    for slot in slot_names:
        descriptor = next(vars(klass)[slot] for klass in cls.__mro__ if slot in vars(klass))
        if not isinstance(descriptor, types.MemberDescriptorType):
            raise UnsupportedValueError(f"{name}.{slot} is not a plain slot")
        setters[slot] = descriptor.__set__
    default_getstate = getattr(object, "__getstate__", None)  # absent before Python 3.11
    if not has_dict:
        mode = _SLOT_ATTRS
    elif getattr(cls, "__getstate__", default_getstate) is not default_getstate and hasattr(
        cls, "__setstate__"
    ):
        mode = _SETSTATE
    else:
        mode = _DICT_ATTRS
    return _ClassCodec(cls, name, mode, tuple(slot_names), setters)


@functools.cache
def _allowed_codecs() -> dict[str, _ClassCodec]:
    """The codec of every class in :data:`ALLOWED_CLASSES`, by name (imported on first use:
    the cached classes' modules import the cache)."""
    codecs = {}
    for name in ALLOWED_CLASSES:
        module_name, _, class_name = name.rpartition(".")
        cls = getattr(importlib.import_module(module_name), class_name)
        if not isinstance(cls, type) or _qualified_name(cls) != name:
            raise UnsupportedValueError(f"allowlist entry {name!r} does not name that class")
        codecs[name] = _make_codec(cls, name)
    return codecs


@functools.cache
def class_layouts() -> str:
    """A digest of every allowed class's stored attributes (slots, dataclass fields): a file
    written while a class had other attributes would rebuild its objects without the new
    ones, so it is refused as another version's file (a cache miss), whatever the version
    numbers say."""
    digest = hashlib.blake2b(digest_size=8)
    for name, codec in sorted(_allowed_codecs().items()):
        fields = (
            [f.name for f in dataclasses.fields(codec.cls)]
            if dataclasses.is_dataclass(codec.cls)
            else []
        )
        digest.update(json.dumps([name, codec.mode, codec.slot_names, fields]).encode())
    return digest.hexdigest()


def _codec_of(cls: type) -> _ClassCodec:
    name = _qualified_name(cls)
    codec = _allowed_codecs().get(name)
    if codec is None or codec.cls is not cls:
        raise UnsupportedValueError(
            f"a grammar file cannot hold a {name} (not in grammar_file.ALLOWED_CLASSES)"
        )
    return codec


# ------------------------------------------------------------------------------- writing


class _Codes(dict):
    """Scalar value -> its code, numbering each value the first time it is looked up."""

    def __init__(self, kind: int) -> None:
        super().__init__()
        self.kind = kind

    def __missing__(self, value: Any) -> int:
        code = self[value] = len(self) << 3 | self.kind
        return code


class _Encoder:
    """The node and slot tables of one value graph, plus the class, layout and buffer tables.

    Nodes are numbered in post-order while writing; :meth:`document` orders them by height."""

    def __init__(self) -> None:
        self.tags: list[int] = []  # per node
        self.counts: list[int] = []  # per node: its number of child codes
        self.args: list[int] = []  # per node
        self.heights: list[int] = []  # per node: 0 without node children, else 1 + the most
        self.children: list[int] = []  # child codes of every node, node after node
        self.rise_of_code: dict[int, int] = {}  # node code -> its height + 1
        # id(value) -> its node, or _OPEN while its children are written (ids of values in
        # the graph stay unique while it is written; attribute values are kept in ``states``)
        self.node_of: dict[int, int] = {}
        self.states: list[list[Any]] = []  # the attribute values of every object
        self.codecs: dict[type, _ClassCodec] = {}
        self.ints = _Codes(_INT)
        self.floats: list[float] = []
        self.strings = _Codes(_STR)
        self.big_ints = _Codes(_BIG_INT)
        self.classes: list[str] = []
        self.class_index: dict[type, int] = {}
        self.layouts: list[list[Any]] = []
        self.layout_index: dict[tuple[type, tuple[str, ...]], int] = {}
        self.buffers: list[list[Any]] = []
        self.chunks: list[Any] = []  # the data region, padding included
        self.data_size = 0
        self.shells: list[int] = []  # class index per shell
        self.shell_of: dict[int, int] = {}  # id(object) -> shell id
        self.shell_node: dict[int, int] = {}  # shell id -> its _SHELL node

    def encode(self, root: Any) -> int:
        """The code of ``root`` (see :meth:`_code`), after every node below it."""
        code = self._code(root)
        if code is not None:
            return code
        ints, strings, floats, node_of = self.ints, self.strings, self.floats, self.node_of
        # (containers are opened and closed inline: they are most of the nodes)
        tags, counts, args, heights = self.tags, self.counts, self.args, self.heights
        children, rise_of_code = self.children, self.rise_of_code
        rise, no_rise, items_of = (
            rise_of_code.get,
            itertools.repeat(0),
            itertools.chain.from_iterable,
        )
        stack = [self._open(root)]
        while True:
            value, items, codes, codec, names = stack[-1]
            for item in items:
                kind = type(item)
                if kind is int and _INT64_MIN <= item <= _INT64_MAX:
                    code = ints[item]
                elif kind is str:
                    code = strings[item]
                elif item is None:
                    code = _NONE_CODE
                elif kind is bool:
                    code = _TRUE_CODE if item else _FALSE_CODE
                elif kind is float:
                    code = len(floats) << 3 | _FLOAT
                    floats.append(item)
                else:
                    found = node_of.get(id(item))
                    if found is None:
                        if kind in _CONTAINER_TAGS:
                            scalar_codes = self._scalar_codes(item, kind)
                            if scalar_codes is None:  # write its children first
                                node_of[id(item)] = _OPEN
                                iterator = items_of(item.items()) if kind is dict else iter(item)
                                stack.append((item, iterator, [], None, ()))
                                break
                            node = len(tags)  # a container of ints or strings only
                            rise_of_code[node << 3] = 1
                            tags.append(_CONTAINER_TAGS[kind])
                            counts.append(len(scalar_codes))
                            args.append(0)
                            heights.append(0)
                            children += scalar_codes
                            node_of[id(item)] = node
                            codes.append(node << 3)
                            continue
                        code = self._code(item)
                        if code is None:
                            stack.append(self._open(item))
                            break
                    elif found == _OPEN:
                        code = self._back_reference(item)
                    else:
                        code = found << 3
                codes.append(code)
            else:
                stack.pop()
                if codec is None:
                    node = len(tags)
                    height = max(map(rise, codes, no_rise), default=0)
                    rise_of_code[node << 3] = height + 1
                    tags.append(_CONTAINER_TAGS[type(value)])
                    counts.append(len(codes))
                    args.append(0)
                    heights.append(height)
                    children += codes
                    node_of[id(value)] = node
                    code = node << 3
                else:
                    code = self._close(value, codes, codec, names)
                if not stack:
                    return code
                stack[-1][2].append(code)

    def _scalar_codes(self, container: Any, kind: type) -> list[int] | None:
        """The codes of a container's children if they are all ints (within 64 bits) or all
        strings (a dict: its keys, and its values), looked up at C speed; else ``None``."""
        if kind is dict:
            keys = self._scalar_codes(container.keys(), list)
            values = None if keys is None else self._scalar_codes(container.values(), list)
            if values is None:
                return None
            return list(itertools.chain.from_iterable(zip(keys, values, strict=True)))
        types = set(map(type, container))
        if types == _ONLY_INTS:
            if _INT64_MIN <= min(container) and max(container) <= _INT64_MAX:
                return list(map(self.ints.__getitem__, container))
            return None
        if types == _ONLY_STRINGS:
            return list(map(self.strings.__getitem__, container))
        return [] if not types else None

    def _code(self, value: Any) -> int | None:
        """The code of a value met for the first time: ``(index << 3) | kind`` (see the
        ``_NODE``... kinds); ``None`` for a container or object, to open (:meth:`_open`)."""
        kind = type(value)
        if kind in _CONTAINER_TAGS:
            return None
        if value is None:
            return _NONE_CODE
        if kind is bool:
            return _TRUE_CODE if value else _FALSE_CODE
        if kind is int:
            if _INT64_MIN <= value <= _INT64_MAX:
                return self.ints[value]
            return self.big_ints[value]
        if kind is str:
            return self.strings[value]
        if kind is float:
            self.floats.append(value)
            return (len(self.floats) - 1) << 3 | _FLOAT
        if kind is np.ndarray:
            return self._leaf(_ARRAY, self._array_buffer(value), value)
        if kind is bytes:
            index = self._buffer(value, "|u1", [len(value)], "C", True, align=1)
            return self._leaf(_BYTES, index, value)
        if isinstance(value, np.generic):
            return self._leaf(_SCALAR, self._array_buffer(np.asarray(value)), value)
        if kind not in self.codecs:
            self.codecs[kind] = _codec_of(kind)  # raises for a class outside the allowlist
        return None

    def _node(self, tag: int, arg: int, codes: list[int]) -> int:
        node = len(self.tags)
        height = max(map(self.rise_of_code.get, codes, itertools.repeat(0)), default=0)
        self.rise_of_code[node << 3] = height + 1
        self.tags.append(tag)
        self.counts.append(len(codes))
        self.args.append(arg)
        self.heights.append(height)
        self.children += codes
        return node

    def _leaf(self, tag: int, arg: int, value: object) -> int:
        node = self.node_of[id(value)] = self._node(tag, arg, [])
        return node << 3

    def _open(self, value: Any) -> tuple[Any, Any, list[int], _ClassCodec | None, tuple]:
        """A frame: the value, an iterator over its children, their codes, and for an object
        its codec and attribute names."""
        self.node_of[id(value)] = _OPEN
        kind = type(value)
        if kind is dict:
            return value, itertools.chain.from_iterable(value.items()), [], None, ()
        if kind in _CONTAINER_TAGS:
            return value, iter(value), [], None, ()
        codec = self.codecs.get(kind) or self.codecs.setdefault(kind, _codec_of(kind))
        names, values = codec.attributes(value)
        self.states.append(values)  # (they may be new objects: their ids must stay unique)
        return value, iter(values), [], codec, names

    def _close(
        self, value: Any, codes: list[int], codec: _ClassCodec | None, names: tuple[str, ...]
    ) -> int:
        if codec is None:
            node = self._node(_CONTAINER_TAGS[type(value)], 0, codes)
        else:
            key = (codec.cls, names)
            layout = self.layout_index.get(key)
            if layout is None:
                if not all(type(name) is str for name in names):
                    raise UnsupportedValueError(f"{codec.name}: attribute names must be str")
                layout = self.layout_index[key] = len(self.layouts)
                self.layouts.append([self._class(codec), list(names)])
            shell = self.shell_of.get(id(value))
            if shell is None:
                node = self._node(_OBJECT, layout, codes)
            else:  # the argument names the shell, the first child is the layout
                layout_code = self.ints[layout]
                node = self._node(_SHELL_OBJECT, shell, [layout_code, *codes])
        self.node_of[id(value)] = node
        return node << 3

    def _back_reference(self, value: Any) -> int:
        """The code of an object being written (a cycle): a node that stands for its shell."""
        kind = type(value)
        if kind in _CONTAINER_TAGS:
            raise UnsupportedValueError(
                f"a {kind.__name__} is reachable from itself (a reference cycle can be stored "
                "only where it comes back to an object)"
            )
        shell = self.shell_of.get(id(value))
        if shell is None:
            shell = self.shell_of[id(value)] = len(self.shells)
            self.shells.append(self._class(_codec_of(kind)))
        node = self.shell_node.get(shell)
        if node is None:
            node = self.shell_node[shell] = self._node(_SHELL, shell, [])
        return node << 3

    def _class(self, codec: _ClassCodec) -> int:
        index = self.class_index.get(codec.cls)
        if index is None:
            index = self.class_index[codec.cls] = len(self.classes)
            self.classes.append(codec.name)
        return index

    def _array_buffer(self, array: np.ndarray) -> int:
        dtype = array.dtype.str
        if dtype not in _DTYPES:
            raise UnsupportedValueError(
                f"a grammar file holds bool and numeric arrays only, not dtype {array.dtype}"
            )
        order = "C"
        if array.flags.c_contiguous:
            raw = array
        elif array.flags.f_contiguous:
            raw, order = array.T, "F"  # the transpose is C-contiguous, in F order
        else:
            raw = np.ascontiguousarray(array)
        data = raw.reshape(-1).view(np.uint8)
        return self._buffer(data, dtype, list(array.shape), order, array.flags.writeable)

    def _buffer(
        self,
        data: Any,
        dtype: str,
        shape: list[int],
        order: str,
        is_writeable: bool,
        align: int = _ALIGN,
    ) -> int:
        """Append ``data`` to the data region at a multiple of ``align``; its buffer index."""
        offset = self.pad(align)
        self.chunks.append(data)
        self.data_size = offset + memoryview(data).nbytes
        self.buffers.append([dtype, shape, offset, order, is_writeable])
        return len(self.buffers) - 1

    def pad(self, align: int) -> int:
        """Zero bytes up to the next multiple of ``align``; the new data size."""
        offset = -(-self.data_size // align) * align
        if offset > self.data_size:
            self.chunks.append(bytes(offset - self.data_size))
            self.data_size = offset
        return offset

    def _int_buffer(self, values: np.ndarray) -> int:
        """``values`` as a buffer of the smallest little-endian int dtype that holds them."""
        low, high = (int(values.min()), int(values.max())) if len(values) else (0, 0)
        dtype = next(
            dtype
            for dtype in _INT_DTYPES
            if np.iinfo(dtype).min <= low <= high <= np.iinfo(dtype).max
        )
        data = values.astype(dtype).view(np.uint8)
        return self._buffer(data, dtype.str, [len(values)], "C", True)

    def document(self, root_code: int) -> dict[str, Any]:
        """The JSON document, with the node tables added to the data region."""
        tags = np.asarray(self.tags, dtype=np.int64)
        counts = np.asarray(self.counts, dtype=np.int64)
        args = np.asarray(self.args, dtype=np.int64)
        heights = np.asarray(self.heights, dtype=np.int64)
        num_nodes = len(tags)
        # runs: nodes of one height, tag and child count (objects: one layout)
        layouts = np.where(tags == _OBJECT, args, 0)
        order = np.lexsort((layouts, counts, tags, heights))
        new_of_old = np.empty(num_nodes, dtype=np.int64)
        new_of_old[order] = np.arange(num_nodes)
        key = np.stack([heights[order], tags[order], counts[order], layouts[order]])
        is_first = np.ones(num_nodes, dtype=bool)
        is_first[1:] = (key[:, 1:] != key[:, :-1]).any(axis=0)
        firsts = np.flatnonzero(is_first)
        runs = np.stack(  # per run: tag, child count per node, number of nodes, layout
            [key[1, firsts], key[2, firsts], np.diff(np.append(firsts, num_nodes)), key[3, firsts]],
            axis=1,
        )
        # slot of kind k, index i: bases[k] + i (nodes after every scalar)
        bases = np.zeros(8, dtype=np.int64)
        bases[_INT] = _NUM_CONSTANTS
        bases[_FLOAT] = bases[_INT] + len(self.ints)
        bases[_STR] = bases[_FLOAT] + len(self.floats)
        bases[_BIG_INT] = bases[_STR] + len(self.strings)
        bases[_NODE] = bases[_BIG_INT] + len(self.big_ints)
        codes = np.asarray(self.children, dtype=np.int64)
        kinds, indices = codes & 7, codes >> 3
        is_node = kinds == _NODE
        indices[is_node] = new_of_old[indices[is_node]]
        slots = bases[kinds] + indices
        # the child slots of the nodes in their new order
        starts = np.cumsum(counts) - counts
        new_counts = counts[order]
        gather = np.repeat(starts[order] - (np.cumsum(new_counts) - new_counts), new_counts)
        slots = slots[gather + np.arange(len(slots))]
        if root_code & 7 == _NODE:
            root_code = int(new_of_old[root_code >> 3]) << 3
        return {
            "class_layouts": class_layouts(),
            "classes": self.classes,
            "layouts": self.layouts,
            "shells": self.shells,
            "strings": list(self.strings),
            "big_ints": [format(value, "x") for value in self.big_ints],
            "ints": self._int_buffer(np.fromiter(self.ints, dtype=np.int64, count=len(self.ints))),
            "floats": self._array_buffer(np.asarray(self.floats, dtype="<f8")),
            "runs": self._int_buffer(runs.reshape(-1)),
            "args": self._int_buffer(args[order]),
            "children": self._int_buffer(slots),
            "root": int(bases[root_code & 7] + (root_code >> 3)),
            "buffers": self.buffers,
        }


def _aligned_empty(size: int) -> np.ndarray:
    """A writeable (as unpickled arrays are) uint8 array of ``size`` bytes, 64-byte aligned."""
    storage = np.empty(size + _ALIGN, dtype=np.uint8)
    base = -storage.ctypes.data % _ALIGN
    return storage[base : base + size]


def _word_sum(region: np.ndarray) -> int:
    """The sum of the little-endian 64-bit words of ``region`` (uint8, length a multiple of 8)
    modulo 2**64."""
    return int(region.view(_WORDS).sum(dtype=np.uint64))


def encode(value: Any) -> list[Any]:
    """The grammar file of ``value`` as a list of bytes-like chunks (see module docstring).

    Raises
    ------
    UnsupportedValueError
        ``value`` holds something the format cannot store (an object of a class outside
        :data:`ALLOWED_CLASSES`, an array of another dtype, a cycle back to a container).
    """

    encoder = _Encoder()
    with gc_paused():  # as many small lists as values, none in a reference cycle
        root = encoder.encode(value)
        values_size = encoder.pad(_ALIGN)
        document = encoder.document(root)
    tables_size = encoder.pad(_ALIGN) - values_size
    text = json.dumps(document, separators=(",", ":"), check_circular=False).encode("ascii")
    data = np.frombuffer(b"".join(encoder.chunks), dtype=np.uint8)
    checksums = zlib.crc32(text), _word_sum(data)
    header = _HEADER.pack(MAGIC, FORMAT_VERSION, 0, len(text), values_size, tables_size, *checksums)
    return [header, text, bytes(-len(text) % _ALIGN), data]


def dump(value: Any, handle: BinaryIO) -> None:
    """Write the grammar file of ``value`` to the binary file ``handle`` (see :func:`encode`)."""
    for chunk in encode(value):
        handle.write(chunk)


def dumps(value: Any) -> bytes:
    """The grammar file of ``value`` as bytes (see :func:`encode`)."""
    return b"".join(encode(value))


# ------------------------------------------------------------------------------- reading


def load(path: str | os.PathLike[str]) -> Any:
    """The value stored in the grammar file at ``path``.

    Raises
    ------
    GrammarFileError
        The file is not a readable grammar file of this format version (see module docstring).
    OSError
        The file cannot be opened or read.
    """
    with open(path, "rb") as handle:
        return _read(handle, os.fstat(handle.fileno()).st_size, os.fspath(path))


def loads(data: bytes) -> Any:
    """The value stored in the grammar file ``data`` (see :func:`load`)."""
    return _read(io.BytesIO(data), len(data), "grammar file bytes")


def _read(handle: BinaryIO, size: int, where: str) -> Any:
    header = handle.read(_HEADER.size)
    if header[: len(MAGIC)] != MAGIC:
        raise GrammarFileError(f"{where}: not a formcast grammar file (bad magic)")
    if len(header) < _HEADER.size:
        raise GrammarFileError(f"{where}: truncated inside its header")
    _, version, _, text_size, values_size, tables_size, text_crc, data_sum = _HEADER.unpack(header)
    if version != FORMAT_VERSION:
        raise GrammarFileError(
            f"{where}: grammar file format version {version}; this formcast reads "
            f"version {FORMAT_VERSION}"
        )
    padding = -text_size % _ALIGN
    expected = _HEADER.size + text_size + padding + values_size + tables_size
    if size != expected or values_size % _ALIGN or tables_size % _ALIGN:
        raise GrammarFileError(
            f"{where}: {size} bytes, but its header describes {expected} (truncated or overwritten)"
        )
    text = handle.read(text_size)
    handle.read(padding)
    values, tables = _aligned_empty(values_size), _aligned_empty(tables_size)
    if (
        len(text) != text_size
        or handle.readinto(memoryview(values)) != values_size
        or handle.readinto(memoryview(tables)) != tables_size
    ):
        raise GrammarFileError(f"{where}: shorter than its header says")
    words = (_word_sum(values) + _word_sum(tables)) % 2**64
    if zlib.crc32(text) != text_crc or words != data_sum:
        raise GrammarFileError(f"{where}: checksum mismatch (the file is corrupt)")

    try:
        with gc_paused():  # as many small tuples and lists as nodes, none in a cycle
            return _Decoder(json.loads(text), values, tables, where).decode()
    except GrammarFileError:
        raise
    except (
        ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError,
        RecursionError,
    ) as exc:  # fmt: skip
        raise GrammarFileError(f"{where}: malformed content ({type(exc).__name__}: {exc})") from exc


class _Decoder:
    """Rebuilds the value of one parsed grammar file (see module docstring)."""

    def __init__(
        self, document: dict[str, Any], values: np.ndarray, tables: np.ndarray, where: str
    ) -> None:
        self.document, self.values, self.tables, self.where = document, values, tables, where
        self.buffers = document["buffers"]
        if document.get("class_layouts") != class_layouts():
            raise GrammarFileError(
                f"{where}: written while formcast's grammar classes had other attributes "
                "(another version's file)"
            )
        codecs = _allowed_codecs()
        classes: list[_ClassCodec] = []
        for name in document["classes"]:
            codec = codecs.get(name) if type(name) is str else None
            if codec is None:
                raise GrammarFileError(f"{where}: names class {name!r}, which is not allowed")
            classes.append(codec)
        # per layout: class, attribute names, how they are set, slot setters, class name
        self.layouts: list[tuple[type, tuple[str, ...], int, tuple, str]] = []
        for class_index, names in document["layouts"]:
            codec, names = classes[class_index], tuple(names)
            codec.check_names(names)
            setters = tuple(codec.slot_setters[name] for name in names if codec.slot_setters)
            self.layouts.append((codec.cls, names, codec.mode, setters, codec.name))
        self.shells = [object.__new__(classes[index].cls) for index in document["shells"]]

    def _check(self, is_valid: bool | np.bool_, what: str) -> None:
        if not is_valid:
            raise GrammarFileError(f"{self.where}: {what}")

    def decode(self) -> Any:
        document, check = self.document, self._check
        tables = [document[name] for name in _TABLES]
        check(all(type(index) is int and index >= 0 for index in tables), "a bad table index")
        big_ints, strings = document["big_ints"], document["strings"]
        check(all(type(text) is str for text in big_ints), "an int beyond 64 bits is not hex")
        check(all(type(text) is str for text in strings), "the string table holds a non-string")
        built: list[Any] = [None, False, True]
        built += self._array(document["ints"]).tolist()
        built += self._array(document["floats"]).tolist()
        built += strings
        built += [int(text, 16) for text in big_ints]
        runs = self._array(document["runs"]).astype(np.int64)
        check(len(runs) % 4 == 0, "a run table of the wrong shape")
        runs = runs.reshape(-1, 4)
        args = self._array(document["args"]).tolist()
        slots = self._array(document["children"]).tolist()
        widths, lengths = runs[:, 1], runs[:, 2]
        check((widths >= 0).all() and (lengths > 0).all(), "a run of negative size")
        check(int(lengths.sum()) == len(args), "runs that miss nodes")
        check(int((widths * lengths).sum()) == len(slots), "runs that miss child slots")
        check(not slots or min(slots) >= 0, "a negative slot")
        check(not args or min(args) >= 0, "a negative buffer or shell index")
        get, extend, consume = built.__getitem__, built.extend, collections.deque(maxlen=0).extend
        repeat = itertools.repeat
        first_node = first_slot = 0
        # a child slot not built yet raises IndexError (a malformed file)
        for tag, width, length, layout in runs.tolist():
            end_slot = first_slot + width * length
            if tag in _SEQUENCE_TYPES or tag == _DICT:
                # one zip over the run's child values yields one row per node
                values = iter(map(get, slots[first_slot:end_slot]))
                rows = zip(*[values] * width, strict=True) if width else repeat((), length)
                if tag == _TUPLE:
                    extend(rows)
                elif tag != _DICT:
                    extend(map(_SEQUENCE_TYPES[tag], rows))
                else:  # keys and values alternate: every other slot of the run
                    check(width % 2 == 0, "a dict node with an odd child count")
                    half = width // 2
                    keys = iter(map(get, slots[first_slot:end_slot:2]))
                    values = iter(map(get, slots[first_slot + 1 : end_slot : 2]))
                    key_rows = zip(*[keys] * half, strict=True) if half else repeat((), length)
                    value_rows = zip(*[values] * half, strict=True) if half else repeat(())
                    extend(map(dict, map(zip, key_rows, value_rows)))
            elif tag == _OBJECT:
                check(0 <= layout < len(self.layouts), "an object of an unknown layout")
                cls, names, mode, setters, name = self.layouts[layout]
                check(width == len(names), f"a {name} with {width} attribute values")
                objects = list(map(object.__new__, repeat(cls, length)))
                if mode == _SLOT_ATTRS:  # one attribute column at a time
                    for k, setter in enumerate(setters):
                        column = slots[first_slot + k : end_slot : width]
                        consume(map(setter, objects, map(get, column)))
                else:
                    values = iter(map(get, slots[first_slot:end_slot]))
                    rows = zip(*[values] * width, strict=True) if width else repeat((), length)
                    states = map(zip, repeat(names), rows)
                    if mode == _DICT_ATTRS:
                        consume(map(dict.update, map(vars, objects), states))
                    else:
                        consume(map(cls.__setstate__, objects, map(dict, states)))
                extend(objects)
            elif tag == _ARRAY:
                extend(map(self._array, args[first_node : first_node + length]))
            elif tag == _BYTES:  # (copies: bytes are immutable)
                extend(map(bytes, map(self._array, args[first_node : first_node + length])))
            else:
                for node in range(length):
                    start = first_slot + node * width
                    arg = args[first_node + node]
                    built.append(self._leaf(tag, arg, slots[start : start + width], get))
            first_node += length
            first_slot = end_slot
        return get(document["root"])

    def _leaf(self, tag: int, arg: int, slots: list[int], get: Any) -> Any:
        """The value of a node that is built alone (numpy scalars, shells, shell objects)."""
        if tag == _SCALAR:
            return self._array(arg)[()]
        if tag == _SHELL:
            return self.shells[arg]
        if tag == _SHELL_OBJECT:  # first child: the layout
            cls, names, mode, setters, name = self.layouts[get(slots[0])]
            shell = self.shells[arg]
            self._check(type(shell) is cls, f"a shell filled as a {name}")
            self._check(len(slots) == len(names) + 1, f"a {name} with {len(slots) - 1} values")
            values = list(map(get, slots[1:]))
            if mode == _SLOT_ATTRS:
                for setter, value in zip(setters, values, strict=True):
                    setter(shell, value)
            elif mode == _DICT_ATTRS:
                shell.__dict__.update(zip(names, values, strict=True))
            else:
                shell.__setstate__(dict(zip(names, values, strict=True)))
            return shell
        raise GrammarFileError(f"{self.where}: unknown node tag {tag!r}")

    def _array(self, index: int) -> np.ndarray:
        """Buffer ``index`` (>= 0) as an array over the data region (checked against its
        bounds; a malformed entry raises ``ValueError``, ``TypeError`` or ``KeyError``, which
        :func:`_read` reports as a ``GrammarFileError``)."""
        dtype_text, shape, offset, order, is_writeable = self.buffers[index]
        dtype = _DTYPES[dtype_text]
        if len(shape) == 1:
            count = shape[0]
            if type(count) is not int or count < 0:
                raise GrammarFileError(f"{self.where}: buffer {index} has shape {shape!r}")
        else:
            count = 1
            for length in shape:
                if type(length) is not int or length < 0:
                    raise GrammarFileError(f"{self.where}: buffer {index} has shape {shape!r}")
                count *= length
        if type(offset) is not int or offset < 0 or order not in ("C", "F"):
            raise GrammarFileError(f"{self.where}: buffer {index} is malformed")
        region, end = self.values, offset + count * dtype.itemsize
        if offset >= len(region):  # (the node tables come after the values)
            region, offset, end = self.tables, offset - len(region), end - len(region)
        if end > len(region):
            raise GrammarFileError(f"{self.where}: buffer {index} lies outside the data region")
        array = np.frombuffer(region, dtype, count, offset)
        if len(shape) != 1:
            array = array.reshape(shape, order=order)
        if not is_writeable:
            array.setflags(write=False)
        return array
