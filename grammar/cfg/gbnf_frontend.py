"""compile_gbnf: llama.cpp GBNF grammars -> CfgGrammar -> CompiledCFG.

GBNF: rules ``name ::= body`` (``root`` is the start), bodies of alternatives ``|`` over
sequences of ``"literals"`` (escapes ``\\n \\r \\t \\\\ \\" \\xHH \\uHHHH \\UHHHHHHHH``),
character classes ``[a-z]`` / ``[^...]``, ``.`` (any character), rule names and ``( ... )``
groups, each optionally followed by ``*`` ``+`` ``?`` ``{m}`` ``{m,}`` ``{m,n}``; ``#``
comments. Literals and classes are Unicode characters, matched as UTF-8.

Translation: a rule is *regular* when no rule it can reach (itself included) lies on a cycle;
regular rules are inlined as regexes. In the other rules, every maximal run of regular items in
a sequence becomes one terminal (so ``"\\"" chars* "\\"" ws`` is a single lexeme and the
precomputed lexer masks cover most tokens), and the recursive structure becomes context-free
rules (repetitions of recursive items become left-recursive helper rules).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from formcast.errors import GrammarError
from formcast.grammar.cfg.compiled import DEFAULT_TUNING, CfgTuning, CompiledCFG, compile_cfg
from formcast.grammar.cfg.rules import CfgGrammar
from formcast.grammar.index.vocabulary import Vocabulary

_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
_RULE_START = re.compile(r"[A-Za-z][A-Za-z0-9_-]*[ \t]*::=")
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-"}
_ESCAPES["^"] = "^"
_HEX_LEN = {"x": 2, "u": 4, "U": 8}


@dataclass(frozen=True)
class _Node:
    """GBNF AST: kind in {"lit", "cls", "ref", "alt", "seq", "rep"}."""

    kind: str
    value: object = None  # lit: str; cls: regex text; ref: name
    children: tuple = ()
    lo: int = 0
    hi: int | None = None  # rep bounds (None = unbounded)
    position: int = 0


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0

    def error(self, message: str, position: int | None = None) -> GrammarError:
        pos = self.i if position is None else position
        line = self.text.count("\n", 0, pos) + 1
        column = pos - (self.text.rfind("\n", 0, pos) + 1) + 1
        return GrammarError(f"GBNF: {message} (line {line}, column {column})", position=pos)

    def skip(self, newlines: bool = True) -> None:
        text = self.text
        while self.i < len(text):
            ch = text[self.i]
            if ch == "#":
                while self.i < len(text) and text[self.i] != "\n":
                    self.i += 1
            elif ch in " \t\r" or (newlines and ch == "\n"):
                self.i += 1
            else:
                break

    def grammar(self) -> dict[str, tuple[_Node, int]]:
        rules: dict[str, tuple[_Node, int]] = {}
        self.skip()
        while self.i < len(self.text):
            start = self.i
            m = _NAME.match(self.text, self.i)
            if not m:
                raise self.error("expected a rule name")
            self.i = m.end()
            self.skip(newlines=False)
            if not self.text.startswith("::=", self.i):
                raise self.error(f"expected '::=' after rule name {m.group()!r}")
            self.i += 3
            body = self.alternatives()
            if m.group() in rules:
                raise self.error(f"rule {m.group()!r} is defined twice", start)
            rules[m.group()] = (body, start)
            self.skip()
        return rules

    def at_rule_start(self) -> bool:
        return _RULE_START.match(self.text, self.i) is not None

    def alternatives(self, nested: bool = False) -> _Node:
        options = [self.sequence(nested)]
        while self.i < len(self.text) and self.text[self.i] == "|":
            self.i += 1
            options.append(self.sequence(nested))
        return options[0] if len(options) == 1 else _Node("alt", children=tuple(options))

    def sequence(self, nested: bool) -> _Node:
        items: list[_Node] = []
        while True:
            self.skip(newlines=True)
            if self.i >= len(self.text) or self.text[self.i] in "|)":
                break
            if not nested and self.at_rule_start():
                break
            items.append(self.postfix(self.atom()))
        return items[0] if len(items) == 1 else _Node("seq", children=tuple(items))

    def atom(self) -> _Node:
        text, pos = self.text, self.i
        ch = text[pos]
        if ch == '"':
            self.i += 1
            chars = []
            while self.i < len(text) and text[self.i] != '"':
                chars.append(self.char())
            if self.i >= len(text):
                raise self.error("unterminated string literal", pos)
            self.i += 1
            return _Node("lit", "".join(chars), position=pos)
        if ch == "[":
            return self.char_class()
        if ch == ".":
            self.i += 1
            return _Node("cls", r"(?s:.)", position=pos)
        if ch == "(":
            self.i += 1
            inner = self.alternatives(nested=True)
            self.skip()
            if self.i >= len(text) or text[self.i] != ")":
                raise self.error("expected ')'", pos)
            self.i += 1
            return inner
        m = _NAME.match(text, pos)
        if m:
            self.i = m.end()
            return _Node("ref", m.group(), position=pos)
        raise self.error(f"unexpected character {ch!r}")

    def char(self) -> str:
        text = self.text
        ch = text[self.i]
        if ch != "\\":
            self.i += 1
            return ch
        if self.i + 1 >= len(text):
            raise self.error("dangling backslash")
        esc = text[self.i + 1]
        if esc in _HEX_LEN:
            digits = text[self.i + 2 : self.i + 2 + _HEX_LEN[esc]]
            if len(digits) != _HEX_LEN[esc] or not all(
                c in "0123456789abcdefABCDEF" for c in digits
            ):
                raise self.error(f"bad \\{esc} escape")
            self.i += 2 + _HEX_LEN[esc]
            return chr(int(digits, 16))
        if esc not in _ESCAPES:
            raise self.error(f"unknown escape \\{esc}")
        self.i += 2
        return _ESCAPES[esc]

    def char_class(self) -> _Node:
        pos = self.i
        self.i += 1
        negated = self.text.startswith("^", self.i)
        if negated:
            self.i += 1
        parts = []
        while self.i < len(self.text) and self.text[self.i] != "]":
            lo = self.char()
            if self.text.startswith("-", self.i) and self.text[self.i + 1 : self.i + 2] not in (
                "]",
                "",
            ):
                self.i += 1
                hi = self.char()
                if ord(hi) < ord(lo):
                    raise self.error(f"bad range {lo!r}-{hi!r}", pos)
                parts.append(_cp(lo) + "-" + _cp(hi))
            else:
                parts.append(_cp(lo))
        if self.i >= len(self.text):
            raise self.error("unterminated character class", pos)
        self.i += 1
        if not parts:
            return _Node("cls", r"(?s:.)" if negated else "(?!)", position=pos)
        return _Node("cls", "[" + ("^" if negated else "") + "".join(parts) + "]", position=pos)

    def postfix(self, node: _Node) -> _Node:
        text = self.text
        while self.i < len(text) and text[self.i] in "*+?{":
            ch = text[self.i]
            pos = self.i
            self.i += 1
            if ch == "*":
                node = _Node("rep", children=(node,), lo=0, hi=None, position=pos)
            elif ch == "+":
                node = _Node("rep", children=(node,), lo=1, hi=None, position=pos)
            elif ch == "?":
                node = _Node("rep", children=(node,), lo=0, hi=1, position=pos)
            else:
                m = re.compile(r"\s*(\d+)\s*(?:(,)\s*(\d*)\s*)?\}").match(text, self.i)
                if not m:
                    raise self.error("bad {m,n} repetition", pos)
                self.i = m.end()
                lo = int(m.group(1))
                hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
                if hi is not None and hi < lo:
                    raise self.error(f"repetition {{{lo},{hi}}} has max < min", pos)
                node = _Node("rep", children=(node,), lo=lo, hi=hi, position=pos)
        return node


def _cp(ch: str) -> str:
    cp = ord(ch)
    if ch.isascii() and ch.isalnum():
        return ch
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp < 0x10000:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def _refs(node: _Node) -> set[str]:
    if node.kind == "ref":
        return {node.value}
    out: set[str] = set()
    for child in node.children:
        out |= _refs(child)
    return out


class _Translator:
    def __init__(self, rules: dict[str, tuple[_Node, int]], text: str) -> None:
        self.rules = rules
        self.text = text
        for name, (body, _) in rules.items():
            for ref in _refs(body):
                if ref not in rules:
                    raise GrammarError(f"GBNF: rule {ref!r} is used in {name!r} but never defined")
        self.is_regular = self._regular_rules()
        self._rx: dict[str, str] = {}
        self.terminal_regexes: list[str] = []
        self.terminal_names: list[str] = []
        self._terminal_ids: dict[str, int] = {}
        self.nonterminals: dict[str, int] = {}
        self.out_rules: list[tuple[int, tuple[int, ...]]] = []

    def _regular_rules(self) -> dict[str, bool]:
        edges = {name: _refs(body) for name, (body, _) in self.rules.items()}

        def reach(name: str) -> set[str]:
            seen, stack = set(), [name]
            while stack:
                for ref in edges[stack.pop()]:
                    if ref not in seen:
                        seen.add(ref)
                        stack.append(ref)
            return seen

        reachable = {name: reach(name) for name in self.rules}
        on_cycle = {name for name in self.rules if name in reachable[name]}
        return {name: not ({name} | reachable[name]) & on_cycle for name in self.rules}

    def node_regular(self, node: _Node) -> bool:
        if node.kind == "ref":
            return self.is_regular[node.value]
        return all(self.node_regular(c) for c in node.children)

    def regex(self, node: _Node) -> str:
        kind = node.kind
        if kind == "lit":
            return "".join(_cp(c) if not c.isalnum() else c for c in node.value)
        if kind == "cls":
            return node.value
        if kind == "ref":
            name = node.value
            if name not in self._rx:
                self._rx[name] = "(?:" + self.regex(self.rules[name][0]) + ")"
            return self._rx[name]
        if kind == "seq":
            return "".join(self.regex(c) for c in node.children)
        if kind == "alt":
            return "(?:" + "|".join(self.regex(c) for c in node.children) + ")"
        inner = self.regex(node.children[0])
        hi = "" if node.hi is None else str(node.hi)
        return f"(?:{inner}){{{node.lo},{hi}}}"

    def terminal(self, regex: str, hint: str) -> int:
        found = self._terminal_ids.get(regex)
        if found is None:
            found = len(self.terminal_regexes)
            self._terminal_ids[regex] = found
            self.terminal_regexes.append(regex)
            self.terminal_names.append(f"{hint}#{found}")
        return found

    def nonterminal(self, name: str) -> int:
        return self.nonterminals.setdefault(name, len(self.nonterminals))

    def fresh(self, hint: str) -> int:
        return self.nonterminal(f"{hint}~{len(self.nonterminals)}")

    def rule_body(self, lhs: int, node: _Node, hint: str) -> None:
        for option in node.children if node.kind == "alt" else (node,):
            self.out_rules.append((lhs, self.sequence(option, hint)))

    def sequence(self, node: _Node, hint: str) -> tuple[int, ...]:
        items = node.children if node.kind == "seq" else (node,)
        out: list[int] = []
        run: list[str] = []
        for item in items:
            if self.node_regular(item):
                run.append(self.regex(item))
                continue
            if run:
                out.append(self.terminal("".join(run), hint))
                run = []
            out.append(self.symbol(item, hint))
        if run:
            out.append(self.terminal("".join(run), hint))
        return tuple(out)

    def symbol(self, node: _Node, hint: str) -> int:
        """A nonterminal symbol for a non-regular item."""
        if node.kind == "ref":
            return ~self.nonterminal(node.value)
        if node.kind in ("alt", "seq"):
            n = self.fresh(hint)
            self.rule_body(n, node, hint)
            return ~n
        # repetition of a non-regular item: x{lo,hi} = x^lo then (hi - lo) optional / x*
        item = self.sequence(node.children[0], hint)
        n = self.fresh(hint)
        head = item * node.lo
        if node.hi is None:
            star = self.fresh(hint)
            self.out_rules += [(star, ()), (star, (~star, *item))]
            self.out_rules.append((n, (*head, ~star)))
        else:
            opt = self.fresh(hint)
            self.out_rules += [(opt, ()), (opt, item)]
            self.out_rules.append((n, (*head, *([~opt] * (node.hi - node.lo)))))
        return ~n

    def translate(self, start: str) -> CfgGrammar:
        if start not in self.rules:
            raise GrammarError(f"GBNF: start rule {start!r} is not defined")
        start_id = self.nonterminal(start)
        pending, done = [start], set()
        while pending:
            name = pending.pop()
            if name in done:
                continue
            done.add(name)
            body = self.rules[name][0]
            lhs = self.nonterminal(name)
            if self.is_regular[name]:
                self.out_rules.append((lhs, (self.terminal(self.regex(body), name),)))
            else:
                self.rule_body(lhs, body, name)
            pending += [r for r in _refs(body) if not self.is_regular[r]]
        return CfgGrammar(
            terminal_names=self.terminal_names,
            terminal_regexes=self.terminal_regexes,
            nonterminal_names=list(self.nonterminals),
            rules=self.out_rules,
            start=start_id,
        )


def gbnf_to_cfg(text: str, start: str = "root", *, lenient: bool = False) -> CfgGrammar:
    """Parse GBNF ``text`` into a :class:`CfgGrammar` (see module docstring).

    Raises
    ------
    GrammarError
        Malformed text (with line, column and position), undefined rules, a missing start
        rule, or rules unreachable from the start rule (a warning with ``lenient=True``).
    """
    rules = _Parser(text).grammar()
    if not rules:
        raise GrammarError("GBNF: the grammar defines no rules")
    translator = _Translator(rules, text)
    cfg = translator.translate(start)
    reachable = {start}
    stack = [start]
    while stack:
        for ref in _refs(rules[stack.pop()][0]):
            if ref not in reachable:
                reachable.add(ref)
                stack.append(ref)
    unreachable = sorted(set(rules) - reachable)
    if unreachable:
        message = f"GBNF: rules unreachable from {start!r}: {', '.join(unreachable)}"
        if not lenient:
            raise GrammarError(message, position=rules[unreachable[0]][1])
        import warnings

        warnings.warn(f"formcast: {message}", stacklevel=3)
    return cfg


def compile_gbnf(
    text: str,
    vocab: Vocabulary,
    start: str = "root",
    *,
    lenient: bool = False,
    cache: bool = True,
    max_depth: int | None = None,
    tuning: CfgTuning = DEFAULT_TUNING,
) -> CompiledCFG:
    """Compile a llama.cpp GBNF grammar to a :class:`CompiledCFG` with exact token masks.

    Parameters
    ----------
    text:
        The GBNF grammar.
    vocab:
        The model's :class:`Vocabulary`.
    start:
        The start rule (llama.cpp uses ``root``).
    lenient:
        Unreachable rules only warn instead of raising.
    cache:
        Reuse a grammar compiled before with the same text, options and vocabulary (memory
        and disk).
    max_depth:
        Bound on the output's nesting depth (``None``: unbounded); a matcher raises
        ``GrammarError`` naming the depth and output byte offset beyond it.
    tuning:
        Which exact paths the runtime and lexer take (:class:`~formcast.grammar.cfg.compiled.CfgTuning`;
        the defaults are formcast's, other settings exist to compare the paths in tests).

    Raises
    ------
    GrammarError
        See :func:`gbnf_to_cfg`; also rules that can never finish and empty terminals.
    """
    return compile_cfg(
        "gbnf",
        text,
        {"start": start},
        vocab,
        lambda: gbnf_to_cfg(text, start, lenient=lenient),
        lenient=lenient,
        max_depth=max_depth,
        cache=cache,
        tuning=tuning,
    )
