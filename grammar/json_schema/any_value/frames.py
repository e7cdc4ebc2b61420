"""Frame machine: byte automata stacked at marker points (unbounded "any JSON value" nesting).

A JSON Schema compiled with ``max_any_depth=None`` is one byte DFA (the *schema* automaton) in
which every container nested inside an unconstrained value is the marker byte 0x01 (under the
``indent`` layout preceded by ``d`` bytes 0x02: the container's depth ``d``), see
``compiler.any_marker``. ``A_d`` is the automaton of one container at depth ``d`` whose
own nested containers are markers again. The machine is a stack of *frames*, each a state of
one automaton; all automata share one global state numbering:

- byte ``b`` at top state ``g``: the top automaton's transition, if it has one; and, if ``b``
  is ``{`` or ``[`` and ``g`` has marker paths ``0x02^d 0x01`` to return states ``r``, for each
  a *push*: the top becomes ``r`` (where the parent continues) and ``A_d`` starts on ``b``.
  Both readings are kept (a schema may allow a typed object and an unconstrained value at the
  same place), so a configuration is a set of stacks.
- a frame whose ``A_d`` reaches its accepting state (just after the container's closing
  bracket: nothing can follow there) is popped; the parent continues at its return state.
- bytes 0x01 and 0x02 themselves are never accepted.

A byte string is a prefix of the language iff some branch survives it (every automaton is
trimmed and every marker stands for at least one container, so alive = completable). The
kernels below run that machine for one byte string (:func:`run_bytes`) or for a list of
candidate tokens at once (:func:`fill_candidates`), with numba.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np

from formcast.errors import GrammarError
from formcast.grammar.automata.byte_dfa import ByteDFA

MARKER_BYTE = 0x01  # one container, nested without bound
DEPTH_BYTE = 0x02  # indent layout: one per nesting level before the marker
OPEN_BYTES = b"{["
BRACKET_BYTES = b"{[]}"
NEEDS_AUTOMATON = -1000  # run_bytes returns NEEDS_AUTOMATON - d when A_d is not built yet
TOO_AMBIGUOUS = -1  # more live branches than the scratch space holds
RUN_CHUNK = 64  # longer byte strings are run in pieces (scratch space grows with the length)
MAX_READINGS = 64  # live stacks kept per position

Configs = tuple[tuple[int, ...], ...]  # frame stacks (global states, bottom first)

# a token's kind for the frame machine: no bracket byte / a push-pop candidate / never allowed
TOKEN_PLAIN, TOKEN_BRACKET, TOKEN_NEVER = 0, 1, 2


@dataclass(frozen=True, eq=False)
class FrameTables:
    """All automata of one frame machine in one global state numbering (arrays for numba).

    Attributes
    ----------
    flat:
        Every automaton's transition table, row-major, concatenated (int32, local targets).
    cell_base:
        ``(G,)`` int64: where state ``g``'s row starts in ``flat``.
    auto_of:
        ``(G,)`` int32: the automaton of ``g`` (0 = schema, k = the k-th built ``A``).
    state_base:
        ``(num_automata,)`` int32: global id of each automaton's local state 0.
    classes:
        ``(num_automata * 256,)`` int32: byte -> class per automaton.
    is_pop:
        ``(G,)`` bool: accepting state of a container automaton (its frame ends).
    opt_lo:
        ``(G + 1,)`` int32: push options of ``g`` are ``opt_lo[g]:opt_lo[g + 1]``.
    opt_ret, opt_depth:
        Return state (global) and container depth of each push option.
    depth_start:
        ``(D,)`` int32: global start state of ``A_d`` (-1 while not built).
    max_options:
        Most push options of one state (sizes the branch scratch space).
    """

    flat: np.ndarray
    cell_base: np.ndarray
    auto_of: np.ndarray
    state_base: np.ndarray
    classes: np.ndarray
    is_pop: np.ndarray
    opt_lo: np.ndarray
    opt_ret: np.ndarray
    opt_depth: np.ndarray
    depth_start: np.ndarray
    max_options: int

    @property
    def arrays(self) -> tuple:
        """The arrays in the order the kernels take them."""
        return (
            self.flat,
            self.cell_base,
            self.auto_of,
            self.state_base,
            self.classes,
            self.is_pop,
            self.opt_lo,
            self.opt_ret,
            self.opt_depth,
            self.depth_start,
        )


def push_options(dfa: ByteDFA, is_depth_dependent: bool) -> list[list[tuple[int, int]]]:
    """Per local state: the ``(return state, depth)`` of every marker path out of it."""
    table = dfa.transitions
    marker = table[:, dfa.byte_to_class[MARKER_BYTE]]  # (N,)
    depth_step = table[:, dfa.byte_to_class[DEPTH_BYTE]]  # (N,)
    options: list[list[tuple[int, int]]] = [[] for _ in range(dfa.num_states)]
    for state in np.flatnonzero(marker >= 0).tolist():
        options[state].append((int(marker[state]), 0))
    if is_depth_dependent:
        for state in np.flatnonzero(depth_step >= 0).tolist():
            cur, depth = state, 0
            while cur >= 0:  # 0x02^d 0x01: a marker at depth d
                if depth and marker[cur] >= 0:
                    options[state].append((int(marker[cur]), depth))
                cur, depth = int(depth_step[cur]), depth + 1
    return options


_OptionArrays = tuple[np.ndarray, np.ndarray, np.ndarray]
_OPTION_ARRAYS: weakref.WeakKeyDictionary[ByteDFA, dict[bool, _OptionArrays]] = (
    weakref.WeakKeyDictionary()
)
_OPTION_ARRAYS_LOCK = threading.Lock()


def push_option_arrays(dfa: ByteDFA, is_depth_dependent: bool) -> _OptionArrays:
    """:func:`push_options` flattened, memoised per automaton (a container automaton is shared
    by every schema of its layout): ``(counts (N,) int32, return states, depths)``, the options
    of each state in state order."""
    with _OPTION_ARRAYS_LOCK:
        found = _OPTION_ARRAYS.get(dfa, {}).get(is_depth_dependent)
    if found is not None:
        return found
    options = push_options(dfa, is_depth_dependent)
    counts = np.fromiter(map(len, options), dtype=np.int32, count=len(options))
    flat = [option for opts in options for option in opts]
    rets = np.asarray([ret for ret, _ in flat], dtype=np.int32)
    depths = np.asarray([depth for _, depth in flat], dtype=np.int32)
    arrays: _OptionArrays = (counts, rets, depths)
    for array in arrays:
        array.setflags(write=False)
    with _OPTION_ARRAYS_LOCK:
        _OPTION_ARRAYS.setdefault(dfa, {})[is_depth_dependent] = arrays
    return arrays


def build_tables(
    automata: list[ByteDFA], depths: list[int], is_depth_dependent: bool
) -> FrameTables:
    """Tables of the schema automaton ``automata[0]`` and the containers ``automata[1:]``.

    ``depths[k - 1]`` is the container depth of ``automata[k]``.
    """
    sizes = [dfa.num_states for dfa in automata]
    state_base = np.cumsum([0, *sizes])[:-1].astype(np.int32)
    # (one copy of the tables: a concatenation then an astype copied the schema's twice)
    flat = np.concatenate([dfa.transitions.reshape(-1) for dfa in automata], dtype=np.int32)
    cell_starts = np.cumsum([0, *(dfa.transitions.size for dfa in automata)])[:-1]
    cell_base = np.concatenate(
        [
            start + np.arange(dfa.num_states, dtype=np.int64) * dfa.num_classes
            for start, dfa in zip(cell_starts, automata, strict=True)
        ]
    )
    auto_of = np.repeat(np.arange(len(automata), dtype=np.int32), sizes)
    classes = np.concatenate([dfa.byte_to_class.astype(np.int32) for dfa in automata])
    is_pop = np.concatenate(
        [np.zeros(sizes[0], dtype=bool), *(dfa.is_accepting for dfa in automata[1:])]
    )
    options = [push_option_arrays(dfa, is_depth_dependent) for dfa in automata]
    counts = np.concatenate([opts[0] for opts in options])  # (num_states,)
    rets = np.concatenate([opts[1] + state_base[k] for k, opts in enumerate(options)])
    opt_depths = np.concatenate([opts[2] for opts in options])
    opt_lo = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    depth_start = np.full(max(depths, default=0) + 1, -1, dtype=np.int32)
    for k, depth in enumerate(depths, start=1):
        depth_start[depth] = state_base[k] + automata[k].start_state
    return FrameTables(
        flat=flat,
        cell_base=cell_base,
        auto_of=auto_of,
        state_base=state_base,
        classes=classes,
        is_pop=is_pop,
        opt_lo=opt_lo,
        opt_ret=rets.astype(np.int32),
        opt_depth=opt_depths.astype(np.int32),
        depth_start=depth_start,
        max_options=int(counts.max(initial=0)),
    )


@numba.njit(cache=True, nogil=True, inline="always")
def _step(g, byte, flat, cell_base, auto_of, state_base, classes):
    a = auto_of[g]
    t = flat[cell_base[g] + classes[a * 256 + byte]]
    return t if t < 0 else t + state_base[a]


@numba.njit(cache=True, nogil=True)
def _run(
    stack, num_frames, data, lo, hi, tables, branch_frames, branch_size, branch_pos, work,
    out_frames, out_size, max_out,
):  # fmt: skip
    """Run ``data[lo:hi]`` from the stack ``stack[:num_frames]`` (module docstring).

    The last ``keep = min(num_frames, hi - lo + 1)`` frames are copied (``hi - lo`` bytes pop
    at most ``hi - lo`` frames). Surviving branches are written to ``out_frames[i, :size]``
    (their top frames, to put in place of the last ``keep``) with ``out_size[i] = size``.
    ``max_out == 0``: stop at the first survivor and return 1. Returns the survivors, or
    ``NEEDS_AUTOMATON - d`` / ``TOO_AMBIGUOUS``.
    """
    flat, cell_base, auto_of, state_base, classes, is_pop = tables[:6]
    opt_lo, opt_ret, opt_depth, depth_start = tables[6:]
    keep = min(num_frames, hi - lo + 1)
    for i in range(keep):
        branch_frames[0, i] = stack[num_frames - keep + i]
    branch_size[0] = keep
    branch_pos[0] = lo
    num_branches = 1
    found = 0
    max_branches = branch_frames.shape[0]
    while num_branches > 0:
        num_branches -= 1
        k = branch_size[num_branches]
        pos = branch_pos[num_branches]
        for i in range(k):
            work[i] = branch_frames[num_branches, i]
        is_alive = True
        while pos < hi:
            byte = data[pos]
            if byte == 1 or byte == 2:
                is_alive = False
                break
            g = work[k - 1]
            if (byte == 123 or byte == 91) and opt_lo[g] < opt_lo[g + 1]:
                for o in range(opt_lo[g], opt_lo[g + 1]):
                    depth = opt_depth[o]
                    if depth >= depth_start.shape[0] or depth_start[depth] < 0:
                        return NEEDS_AUTOMATON - depth
                    inner = _step(depth_start[depth], byte, flat, cell_base, auto_of,
                                  state_base, classes)  # fmt: skip
                    if inner < 0:
                        continue
                    if num_branches >= max_branches:
                        return TOO_AMBIGUOUS
                    for i in range(k - 1):
                        branch_frames[num_branches, i] = work[i]
                    branch_frames[num_branches, k - 1] = opt_ret[o]
                    branch_frames[num_branches, k] = inner
                    branch_size[num_branches] = k + 1
                    branch_pos[num_branches] = pos + 1
                    num_branches += 1
            nxt = _step(g, byte, flat, cell_base, auto_of, state_base, classes)
            if nxt < 0:
                is_alive = False
                break
            work[k - 1] = nxt
            while k > 1 and is_pop[work[k - 1]]:
                k -= 1
            pos += 1
        if is_alive:
            if max_out == 0:
                return 1
            if found >= max_out:
                return TOO_AMBIGUOUS
            for i in range(k):
                out_frames[found, i] = work[i]
            out_size[found] = k
            found += 1
    return found


def scratch(max_len: int, max_options: int, max_out: int = 0) -> tuple[np.ndarray, ...]:
    """Work arrays for :func:`run_bytes` / :func:`fill_candidates` over ``max_len`` bytes.

    Frames of a branch: the ``max_len + 1`` copied plus one push per byte. Pending branches:
    each byte adds at most ``max_options``.
    """
    width = 2 * max_len + 2
    num_branches = 1 + max_len * max(1, max_options)
    return (
        np.zeros((num_branches, width), dtype=np.int32),
        np.zeros(num_branches, dtype=np.int64),
        np.zeros(num_branches, dtype=np.int64),
        np.zeros(width, dtype=np.int32),
        np.zeros((max(1, max_out), width), dtype=np.int32),
        np.zeros(max(1, max_out), dtype=np.int64),
    )


@numba.njit(cache=True, nogil=True)
def run_bytes(stack, num_frames, data, tables, work_arrays, max_out):
    """:func:`_run` over all of ``data`` (see there); ``work_arrays`` from :func:`scratch`."""
    branch_frames, branch_size, branch_pos, work, out_frames, out_size = work_arrays
    return _run(
        stack, num_frames, data, 0, data.shape[0], tables, branch_frames, branch_size,
        branch_pos, work, out_frames, out_size, max_out,
    )  # fmt: skip


@numba.njit(cache=True, nogil=True)
def needs_frames(num_states, token_flat, token_lo, firsts, first_lo, tables, out):
    """``out[q] = True`` for each state ``q < num_states`` of the schema automaton (a lone bottom
    frame) whose mask is not simply its index row: some token (``token_flat`` / ``token_lo``,
    as in :func:`fill_candidates`) can push from ``q`` (a bracket where a marker path starts,
    reached along the automaton), or the automaton alone walks a token with a marker byte.

    Tokens are grouped by first byte (``firsts[j]``: tokens ``first_lo[j]:first_lo[j + 1]``):
    a group whose first byte ``q`` cannot read, unless it is a bracket that pushes at ``q``,
    decides nothing (its tokens die at once, marker or not) and is skipped whole.
    """
    flat, cell_base, auto_of, state_base, classes = tables[:5]
    opt_lo = tables[6]
    for q in range(num_states):
        pushes = opt_lo[q] < opt_lo[q + 1]
        for j in range(firsts.shape[0]):
            first = firsts[j]
            if not (pushes and (first == 123 or first == 91)):
                if _step(q, first, flat, cell_base, auto_of, state_base, classes) < 0:
                    continue
            for i in range(first_lo[j], first_lo[j + 1]):
                g = q
                has_marker = False
                for pos in range(token_lo[i], token_lo[i + 1]):
                    byte = token_flat[pos]
                    if (byte == 123 or byte == 91) and opt_lo[g] < opt_lo[g + 1]:
                        out[q] = True
                        break
                    has_marker = has_marker or byte == 1 or byte == 2
                    g = _step(g, byte, flat, cell_base, auto_of, state_base, classes)
                    if g < 0:
                        break
                if g >= 0 and has_marker:
                    out[q] = True
                if out[q]:
                    break
            if out[q]:
                break


@numba.njit(cache=True, nogil=True)
def fill_candidates(stack, num_frames, token_flat, token_lo, token_ids, tables, work_arrays,
                    words):  # fmt: skip
    """Set bit ``id`` of ``words`` (uint32 ``(ceil(V/32),)``) for every candidate token that
    some branch of the machine survives from ``stack[:num_frames]``.

    Candidate ``i`` is ``token_flat[token_lo[i]:token_lo[i + 1]]`` with id ``token_ids[i]``.
    A candidate whose bit is set already (``words`` starts as the top automaton's own row)
    is not run: the run could only set it again. Inside a string the row allows every
    candidate (its brackets are text), so none is run.
    Returns 0, or ``NEEDS_AUTOMATON - d`` / ``TOO_AMBIGUOUS`` as :func:`_run`.
    """
    branch_frames, branch_size, branch_pos, work, out_frames, out_size = work_arrays
    flat, cell_base, auto_of, state_base, classes = tables[:5]
    opt_lo = tables[6]
    g = stack[num_frames - 1]
    for i in range(token_ids.shape[0]):
        tid = token_ids[i]
        bit = np.uint32(1) << np.uint32(tid & 31)
        if words[tid >> 5] & bit:
            continue  # allowed by the top automaton alone
        lo = token_lo[i]
        first = token_flat[lo]
        can_push = (first == 123 or first == 91) and opt_lo[g] < opt_lo[g + 1]
        if not can_push and _step(g, first, flat, cell_base, auto_of, state_base, classes) < 0:
            continue  # dies on its first byte (most candidates)
        found = _run(
            stack, num_frames, token_flat, lo, token_lo[i + 1], tables, branch_frames,
            branch_size, branch_pos, work, out_frames, out_size, 0,
        )  # fmt: skip
        if found < 0:
            return found
        if found:
            words[tid >> 5] |= bit
    return 0


class FrameMachine:
    """The automata of one frame machine: tables (grown lazily per container depth) and runs.

    ``container_dfa(d)`` builds ``A_d``; the schema automaton is ``schema_dfa``. Thread-safe:
    tables are replaced whole under a lock; scratch space is per thread.
    """

    def __init__(
        self,
        schema_dfa: ByteDFA,
        container_dfa: Callable[[int], ByteDFA],
        is_depth_dependent: bool,
    ) -> None:
        self.schema_dfa = schema_dfa
        self.container_dfa = container_dfa
        self.is_depth_dependent = is_depth_dependent
        self.depths: list[int] = []  # container depth of automaton k + 1
        self._dfas: list[ByteDFA] = [schema_dfa]
        self._lock = threading.Lock()
        self._local = threading.local()
        self.tables = self.add_container(0)

    def add_container(self, depth: int) -> FrameTables:
        """Build ``A_depth`` (if new) and the tables including it."""
        with self._lock:
            if depth not in self.depths:
                self._dfas.append(self.container_dfa(depth))
                self.depths.append(depth)
                self.tables = build_tables(self._dfas, self.depths, self.is_depth_dependent)
            return self.tables

    def ensure(self, code: int) -> None:
        """Act on a kernel's negative return ``code`` (build the automaton it needs)."""
        if code == TOO_AMBIGUOUS:
            raise GrammarError("too many simultaneous readings of the output for the frame machine")
        self.add_container(NEEDS_AUTOMATON - code)

    def work_arrays(self, max_len: int) -> tuple[np.ndarray, ...]:
        """Per-thread kernel scratch for byte strings up to ``max_len`` bytes."""
        local = self._local
        found = getattr(local, "arrays", None)
        options = self.tables.max_options
        if found is None or local.max_len < max_len or local.options < options:
            size = max(max_len, 16)
            found = scratch(size, options, MAX_READINGS)
            local.arrays, local.max_len, local.options = found, size, options
        return found

    def advance(self, configs: Configs, data: bytes) -> Configs:
        """The stacks after ``data`` from ``configs`` (``()`` if no reading survives)."""
        for lo in range(0, len(data), RUN_CHUNK):
            configs = self._advance_chunk(configs, data[lo : lo + RUN_CHUNK])
            if not configs:
                break
        return configs

    def _advance_chunk(self, configs: Configs, data: bytes) -> Configs:
        buf = np.frombuffer(data, dtype=np.uint8)
        out: dict[tuple[int, ...], None] = {}
        for stack in configs:
            arr = np.asarray(stack, dtype=np.int32)
            while True:
                arrays = self.work_arrays(len(data))
                found = run_bytes(arr, len(stack), buf, self.tables.arrays, arrays, MAX_READINGS)
                if found >= 0:
                    break
                self.ensure(found)
            keep = min(len(stack), len(data) + 1)
            out_frames, out_size = arrays[4], arrays[5]
            for i in range(found):
                top = tuple(out_frames[i, : out_size[i]].tolist())
                out[(*stack[: len(stack) - keep], *top)] = None
        if len(out) > MAX_READINGS:
            raise GrammarError("too many simultaneous readings of the output for the frame machine")
        return tuple(out)

    def fullmatch(self, data: bytes) -> bool:
        """True if ``data`` is a whole text of the machine's language."""
        configs = self.advance(((self.schema_dfa.start_state,),), data)
        accepting = self.schema_dfa.is_accepting
        return any(len(s) == 1 and bool(accepting[s[0]]) for s in configs)
