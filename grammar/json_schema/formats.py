"""JSON Schema ``format`` values as character-level regexes, matched to ``jsonschema``'s checker.

Each regex is fully anchored, uses explicit ASCII classes (no ``\\d``/``.``), and describes the
*decoded* string. Differences from ``jsonschema``'s ``FORMAT_CHECKER`` (all are subsets: we never
accept what the checker rejects):

- date-time, time: the checker calls ``rfc3339_validator`` whose ``$`` also matches before a
  trailing newline; we do not accept that trailing ``\\n``. Leap seconds (``:60``) are rejected
  by both. ``T``/``Z`` may be lower case (the checker upper-cases the string).
- hostname: at most 8 labels (1-3 labels of <= 63 characters, 4 labels of <= 62, 5-8 labels of
  <= 30), which keeps the 253-character limit exact without a counting automaton; ASCII only
  (the checker's ``\\d`` also takes non-ASCII digits).
- uuid: the canonical 8-4-4-4-12 hex form only (``uuid.UUID`` also takes braces, ``urn:uuid:``
  prefixes and other oddities when the dashes happen to sit at positions 8, 13, 18 and 23).
- duration: ISO 8601 designator form with integer values (``P1Y2M3DT4H5M6S``, ``P2W``); the
  checker's ``isoduration`` also takes decimals and the alternative ``PYYYY-MM-DD`` form.
- uri, uri-reference: RFC 3986 exactly as ``rfc3987`` (rule ``URI`` / ``URI_reference``) writes
  it, minus the trailing newline its ``$`` lets through.
- email: the checker only asks for an ``@``; so do we (any characters around it).
- ipv4, ipv6, date, json-pointer, relative-json-pointer: exact.
- uri-template: the checker (package ``uri_template``) takes any text without braces around
  expressions ``{op? varspec,...}``; we accept RFC 6570 level-4 expressions: an operator of
  ``+#./;?&`` or none, variable names ``[A-Za-z0-9_]`` then those, ``.`` or ``%XX``, each with
  an optional prefix ``:1``..``:999`` or explode ``*`` (or the checker's ``[]``). Not taken:
  the checker's extensions (defaults ``{x=1}``, ``name/key`` pairs, the ``,`` operator,
  trailing joiners ``{a,}``).

Formats a draft does not define (or that ``jsonschema`` does not check in that draft, e.g.
``int32``) are annotations: the specification says to ignore them, and we do.
"""

from __future__ import annotations

_YEAR = "(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"
_LEAP_YEAR = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)"
_MONTH_DAY = (
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"
)
DATE = f"(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29)"
_HOUR = "(?:[01][0-9]|2[0-3])"
_MINSEC = "[0-5][0-9]"
TIME = f"{_HOUR}:{_MINSEC}:{_MINSEC}(?:\\.[0-9]+)?(?:[Zz]|[+\\-]{_HOUR}:{_MINSEC})"
DATE_TIME = f"{DATE}[Tt]{TIME}"

_DUR_TIME = "T(?:[0-9]+H(?:[0-9]+M)?(?:[0-9]+S)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)"
_DUR_DATE = "(?:[0-9]+Y(?:[0-9]+M)?(?:[0-9]+D)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)"
DURATION = f"P(?:{_DUR_DATE}(?:{_DUR_TIME})?|{_DUR_TIME}|[0-9]+W)"

_OCTET = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
IPV4 = f"{_OCTET}(?:\\.{_OCTET}){{3}}"
_H16 = "[0-9A-Fa-f]{1,4}"
_LS32 = f"(?:{_H16}:{_H16}|{IPV4})"
IPV6 = (
    f"(?:(?:{_H16}:){{6}}{_LS32}"
    f"|::(?:{_H16}:){{5}}{_LS32}"
    f"|(?:{_H16})?::(?:{_H16}:){{4}}{_LS32}"
    f"|(?:(?:{_H16}:){{0,1}}{_H16})?::(?:{_H16}:){{3}}{_LS32}"
    f"|(?:(?:{_H16}:){{0,2}}{_H16})?::(?:{_H16}:){{2}}{_LS32}"
    f"|(?:(?:{_H16}:){{0,3}}{_H16})?::{_H16}:{_LS32}"
    f"|(?:(?:{_H16}:){{0,4}}{_H16})?::{_LS32}"
    f"|(?:(?:{_H16}:){{0,5}}{_H16})?::{_H16}"
    f"|(?:(?:{_H16}:){{0,6}}{_H16})?::)"
)
_HEX = "[0-9A-Fa-f]"
UUID = f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"


def _label(max_len: int) -> str:
    return f"[A-Za-z0-9](?:[A-Za-z0-9\\-]{{0,{max_len - 2}}}[A-Za-z0-9])?"


HOSTNAME = (
    f"(?:{_label(63)}(?:\\.{_label(63)}){{0,2}}"
    f"|{_label(62)}(?:\\.{_label(62)}){{3}}"
    f"|{_label(30)}(?:\\.{_label(30)}){{4,7}})\\.?"
)
# Any character (the encoder maps it to JSON text); used by email.
_ANY = "[\\x00-\\U0010ffff]"
EMAIL = f"{_ANY}*@{_ANY}*"

# RFC 3986, transcribed from rfc3987's URI rules (the ones jsonschema's checker uses).
_UNRESERVED = "[a-zA-Z0-9_.~\\-]"
_PCT = f"%{_HEX}{{2}}"
_SUB_DELIMS = "[!$&'()*+,;=]"
_PCHAR = f"(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|:|@)"
_SEGMENT = f"{_PCHAR}*"
_SEGMENT_NZ = f"{_PCHAR}+"
_SEGMENT_NZ_NC = f"(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|@)+"
_RFC_OCTET = "(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)"
_RFC_IPV4 = f"(?:{_RFC_OCTET}\\.){{3}}{_RFC_OCTET}"
_RFC_LS32 = f"(?:{_H16}:{_H16}|{_RFC_IPV4})"
_RFC_IPV6 = IPV6.replace(_LS32, _RFC_LS32)
_IPVFUTURE = f"v{_HEX}+\\.(?:{_UNRESERVED}|{_SUB_DELIMS}|:)+"
_HOST = f"(?:\\[(?:{_RFC_IPV6}|{_IPVFUTURE})\\]|(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS})*)"
_AUTHORITY = f"(?:(?:{_UNRESERVED}|{_PCT}|{_SUB_DELIMS}|:)*@)?{_HOST}(?::[0-9]*)?"
_PATH_ABEMPTY = f"(?:/{_SEGMENT})*"
_PATH_ABSOLUTE = f"/(?:{_SEGMENT_NZ}(?:/{_SEGMENT})*)?"
_QUERY = f"(?:{_PCHAR}|/|\\?)*"
_HIER = f"(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_SEGMENT_NZ}(?:/{_SEGMENT})*)?"
_RELATIVE = f"(?://{_AUTHORITY}{_PATH_ABEMPTY}|{_PATH_ABSOLUTE}|{_SEGMENT_NZ_NC}(?:/{_SEGMENT})*)?"
URI = f"[a-zA-Z][a-zA-Z0-9+.\\-]*:{_HIER}(?:\\?{_QUERY})?(?:#{_QUERY})?"
URI_REFERENCE = f"(?:{URI}|{_RELATIVE}(?:\\?{_QUERY})?(?:#{_QUERY})?)"

_POINTER_CHAR = "(?:[\\x00-\\x2e\\x30-\\x7d\\x7f-\\U0010ffff]|~[01])"
JSON_POINTER = f"(?:/{_POINTER_CHAR}*)*"

_TEMPLATE_LITERAL = "[\\x00-\\x7a\\x7c\\x7e-\\U0010ffff]"  # any character but { and }
_VARNAME = "[A-Za-z0-9_](?:[A-Za-z0-9_.]|%[0-9A-Fa-f]{2})*"
_VARSPEC = f"{_VARNAME}(?::(?:[1-9][0-9]{{0,2}}|0[1-9][0-9]?|00[1-9])|\\*|\\[\\])?"
URI_TEMPLATE = f"(?:{_TEMPLATE_LITERAL}|\\{{[+#./;?&]?{_VARSPEC}(?:,{_VARSPEC})*\\}})*"
RELATIVE_JSON_POINTER = f"(?:0|[1-9][0-9]*)(?:#|{JSON_POINTER})"

FORMAT_REGEXES: dict[str, str] = {
    "date": DATE,
    "time": TIME,
    "date-time": DATE_TIME,
    "duration": DURATION,
    "email": EMAIL,
    "hostname": HOSTNAME,
    "ipv4": IPV4,
    "ipv6": IPV6,
    "uuid": UUID,
    "uri": URI,
    "uri-reference": URI_REFERENCE,
    "json-pointer": JSON_POINTER,
    "uri-template": URI_TEMPLATE,
    "relative-json-pointer": RELATIVE_JSON_POINTER,
}

# Formats jsonschema's checker knows, per draft: the rest are annotations in that draft.
_DRAFT4 = {"email", "hostname", "ipv4", "ipv6", "uri", "date-time", "regex"}
_DRAFT6 = _DRAFT4 | {"uri-reference", "json-pointer", "uri-template"}
_DRAFT7 = _DRAFT6 | {
    "date",
    "time",
    "idn-email",
    "idn-hostname",
    "iri",
    "iri-reference",
    "relative-json-pointer",
}
_DRAFT2019 = _DRAFT7 | {"duration", "uuid"}
CHECKED_FORMATS: dict[str, set[str]] = {
    "draft4": _DRAFT4,
    "draft6": _DRAFT6,
    "draft7": _DRAFT7,
    "draft2019-09": _DRAFT2019,
    "draft2020-12": _DRAFT2019,
}


def format_regex(name: str, draft: str) -> str | None:
    """Character-level regex for ``format: name`` under ``draft``.

    Returns ``None`` when the format is an annotation in that draft (not checked). Raises
    ``KeyError`` for a checked format formcast cannot express (e.g. ``idn-hostname``).
    """
    if name not in CHECKED_FORMATS[draft]:
        return None
    return FORMAT_REGEXES[name]
