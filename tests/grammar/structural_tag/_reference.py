"""A pure-Python reference recogniser of structural tag semantics, written independently of
formcast's compile path (no automata, no CFG): recursive matching over the request *dict*,
free text checked with ``str.find``, regexes with the ``regex`` module (partial matches for
prefixes), JSON with ``json.loads`` + ``jsonschema`` (and formcast's compact layout: the text
is ``json.dumps`` of the value with ``","``/``":"`` or ``", "``/``": "`` separators).

``is_sentence(request, text)``: ``text`` is a complete output. ``is_prefix(request, text)``:
some complete output starts with ``text``. Prefixes are exact for every node except
``json_schema`` with a non-``enum`` schema (there only complete values are recognised, so such
formats are used with ``is_sentence`` only).

Semantics (the module docstring of ``formcast.grammar.structural_tag.compile``): free text has
no occurrence of a stop string (triggers, enclosing end strings) or an excluded string; when
a literal ``e`` follows it, the first occurrence of a stop string in ``text + e`` is at
``len(text)``.
"""

from __future__ import annotations

import json

import jsonschema
import regex

INSIDE = -1  # the text ran out inside the node, and the node can still be completed


def _first(text: str, stops) -> int:
    found = [p for p in (text.find(s) for s in stops) if p >= 0]
    return min(found) if found else -1


def _has_any(text: str, strings) -> bool:
    return any(s in text for s in strings)


class Reference:
    def __init__(self, request: dict) -> None:
        if request.get("type") == "structural_tag" and "structures" in request:
            self.root = {
                "type": "triggered_tags",
                "triggers": request["triggers"],
                "tags": [
                    {
                        "type": "tag",
                        "begin": s["begin"],
                        "content": {"type": "json_schema", "json_schema": s["schema"]},
                        "end": s["end"],
                    }
                    for s in request["structures"]
                ],
            }
        elif request.get("type") == "structural_tag":
            self.root = request["format"]
        else:
            self.root = request

    def is_sentence(self, text: str) -> bool:
        self.text = text
        return any(j == len(text) for j in self.run(self.root, 0, None))

    def is_prefix(self, text: str) -> bool:
        self.text = text
        return any(j in (INSIDE, len(text)) for j in self.run(self.root, 0, None))

    # each run(...) yields end positions (the node's text and then one of ``follow``) or INSIDE

    def follow(self, j: int, follow):
        if j == INSIDE:
            yield INSIDE
            return
        if follow is None:
            yield j
            return
        for e in follow:
            yield from self.literal(j, e)

    def literal(self, i: int, value: str):
        rest = self.text[i:]
        if rest.startswith(value):
            yield i + len(value)
        elif value.startswith(rest):
            yield INSIDE

    def run(self, node: dict, i: int, follow):
        kind = node["type"]
        if kind == "const_string":
            for j in self.literal(i, node["value"]):
                yield from self.follow(j, follow)
        elif kind == "regex":
            for j in self.regex(node["pattern"], i):
                yield from self.follow(j, follow)
        elif kind == "json_schema":
            for j in self.json(node["json_schema"], i):
                yield from self.follow(j, follow)
        elif kind == "any_text":
            yield from self.free(i, (), tuple(node.get("excludes", ())), follow)
        elif kind == "sequence":
            yield from self.sequence(node["elements"], i, follow)
        elif kind == "or":
            for element in node["elements"]:
                yield from self.run(element, i, follow)
        elif kind in ("optional", "star", "plus", "repeat"):
            low, high = {"optional": (0, 1), "star": (0, None), "plus": (1, None)}.get(
                kind, (node.get("min"), node.get("max"))
            )
            if high == -1:
                high = None
            if (low, high) == (0, 1):
                yield from self.follow(i, follow)
                yield from self.run(node["content"], i, follow)
            else:
                for j in self.repeat(node["content"], i, low, high, 0):
                    yield from self.follow(j, follow)
        elif kind == "tag":
            yield from self.tag(node, i, follow)
        elif kind == "triggered_tags":
            yield from self.triggered(node, i, follow, 0)
        elif kind == "tags_with_separator":
            yield from self.separated(node, i, follow)
        else:
            raise ValueError(kind)

    def sequence(self, elements, i, follow):
        if len(elements) == 1:
            yield from self.run(elements[0], i, follow)
            return
        for j in self.run(elements[0], i, None):
            if j == INSIDE:
                yield INSIDE
            else:
                yield from self.sequence(elements[1:], j, follow)

    def repeat(self, content, i, low, high, done):
        if done >= low:
            yield i
        if high is not None and done >= high:
            return
        for j in self.run(content, i, None):
            if j == INSIDE:
                yield INSIDE
            elif j > i or done < low:
                yield from self.repeat(content, j, low, high, done + 1)

    def ends(self, tag) -> tuple[str, ...]:
        end = tag["end"]
        return tuple(end) if isinstance(end, list) else (end,)

    def tag(self, tag, i, follow):
        for j in self.literal(i, tag["begin"]):
            if j == INSIDE:
                yield INSIDE
                continue
            for k in self.run(tag["content"], j, self.ends(tag)):
                yield from self.follow(k, follow)

    def regex(self, pattern, i):
        rest = self.text[i:]
        for j in range(len(rest) + 1):
            if regex.fullmatch(pattern, rest[:j]):
                yield i + j
        if regex.fullmatch(pattern, rest, partial=True):
            yield INSIDE

    def json(self, schema, i):
        rest = self.text[i:]
        if isinstance(schema, dict) and "enum" in schema:
            for value in schema["enum"]:
                yield from self.literal(i, json.dumps(value, ensure_ascii=False))
            return
        for j in range(1, len(rest) + 1):
            piece = rest[:j]
            try:
                value = json.loads(piece)
            except ValueError:
                continue
            layouts = {
                json.dumps(value, ensure_ascii=False, separators=(",", ":")),
                json.dumps(value, ensure_ascii=False, separators=(", ", ": ")),
            }
            if piece in layouts and jsonschema.Draft202012Validator(schema).is_valid(value):
                yield i + j

    def free(self, i, stops, excludes, follow):
        """Free text from ``i``: no stop or excluded string in it; then ``follow`` with the
        first-occurrence rule (``stops`` gains the nonempty follow strings)."""
        stops = tuple(stops) + tuple(e for e in (follow or ()) if e)
        rest = self.text[i:]
        for j in range(len(rest) + 1):
            piece = rest[:j]
            if _has_any(piece, stops) or _has_any(piece, excludes):
                return
            if j == len(rest):
                yield INSIDE  # more free text can always come (a character in no string)
            if follow is None:
                yield i + j
                continue
            for e in follow:
                if e and _first(piece + e, stops) != len(piece):
                    continue
                yield from self.literal(i + j, e)

    def triggered(self, node, i, follow, count):
        triggers = tuple(node["triggers"])
        excludes = tuple(node.get("excludes", ()))
        stops = triggers + tuple(e for e in (follow or ()) if e)
        first_only = node.get("at_least_one", False) and count == 0
        after_first = node.get("stop_after_first", False) and count >= 1
        if after_first:
            yield from self.follow(i, follow)
            return
        rest = self.text[i:]
        for j in range(len(rest) + 1):
            piece = rest[:j]
            if first_only and j > 0:
                return
            if _has_any(piece, stops) or _has_any(piece, excludes):
                return
            for tag in node["tags"]:
                begin = tag["begin"]
                if _first(piece + begin, stops) != len(piece):
                    continue
                for k in self.tag(tag, i + j, None):
                    if k == INSIDE:
                        yield INSIDE
                    else:
                        yield from self.triggered(node, k, follow, count + 1)
            if first_only:
                continue
            if j == len(rest):
                yield INSIDE
            # the format ends here: the last free text, then follow
            if follow is None:
                yield i + j
                continue
            for e in follow:
                if e and _first(piece + e, stops) != len(piece):
                    continue
                yield from self.literal(i + j, e)

    def separated(self, node, i, follow):
        at_least_one = node.get("at_least_one", False)
        if not at_least_one:
            yield from self.follow(i, follow)
        yield from self._separated_tags(node, i, follow)

    def _separated_tags(self, node, i, follow):
        for tag in node["tags"]:
            for j in self.tag(tag, i, None):
                if j == INSIDE:
                    yield INSIDE
                    continue
                yield from self.follow(j, follow)
                if node.get("stop_after_first", False):
                    continue
                for k in self.literal(j, node["separator"]):
                    if k == INSIDE:
                        yield INSIDE
                    else:
                        yield from self._separated_tags(node, k, follow)
