"""Regenerate the Unicode tables inside ``js/idna.js`` (a development tool, not used at run time).

The tables are the UTS #46 IDNA mapping table (from the ``idna`` package's ``uts46data``), the
Bidi_Class values that RFC 5893's Bidi rule needs and the Virama code points (from
``unicodedata2``, which tracks the newest Unicode), and the Joining_Type ranges of RFC 5892's
ContextJ rule (from ``idna.idnadata``). Run it in an environment that has both packages::

    pip install unicodedata2 idna
    python -m codemode.stdlib._idna_gen

It rewrites the block between ``// BEGIN GENERATED TABLES`` and ``// END GENERATED TABLES``.

Encodings (numbers are lowercase base 36; letters are uppercase, so they never collide):

* ``MAP``: ranges in code point order, each ``<start - previous start><kind>[payload]``.
  Kinds: ``V`` valid, ``D`` deviation, ``X`` disallowed, ``I`` ignored, ``M`` mapped (payload:
  one base-36 length digit then that many UTF-16 units of replacement), ``S`` shifted (every
  code point ``c`` of the range maps to ``c + offset``; payload ``<+|-><offset>;``).
* ``BIDI``: ranges ``<start - previous start><class>``, classes ``L R A`` (AL) ``N`` (AN)
  ``E`` (EN) ``S`` (ES) ``C`` (CS) ``T`` (ET) ``O`` (ON) ``B`` (BN) ``M`` (NSM), ``X`` other.
* ``VIRAMA``: code points with Canonical_Combining_Class 9, as base-36 deltas joined by ``,``.
* ``JOINING``: ranges ``<start - previous end>.<length - 1><type>`` with types ``C D L R T``.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

_BEGIN = "// BEGIN GENERATED TABLES"
_END = "// END GENERATED TABLES"
_BIDI_CLASS = {
    "L": "L",
    "R": "R",
    "AL": "A",
    "AN": "N",
    "EN": "E",
    "ES": "S",
    "CS": "C",
    "ET": "T",
    "ON": "O",
    "BN": "B",
    "NSM": "M",
}


def _b36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    if n == 0:
        return "0"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out


def _map_table(uts46: Any) -> str:
    starts = [*uts46.uts46_starts, 0x110000]
    statuses = bytes(uts46.uts46_statuses)
    repls = uts46.uts46_replacements
    # Expand to (start, end, kind, replacement) and merge.
    ranges: list[list[Any]] = []
    for i in range(len(starts) - 1):
        kind = chr(statuses[i])
        start, end = starts[i], starts[i + 1] - 1
        repl = repls[i] if kind == "M" else None
        if kind == "M" and end == start and repl is not None and len(repl) == 1:
            offset = ord(repl) - start
            prev = ranges[-1] if ranges else None
            if prev and prev[2] == "S" and prev[1] == start - 1 and prev[3] == offset:
                prev[1] = end
                continue
            ranges.append([start, end, "S", offset])
            continue
        prev = ranges[-1] if ranges else None
        if prev and kind != "M" and prev[2] == kind and prev[1] == start - 1:
            prev[1] = end
            continue
        ranges.append([start, end, kind, repl])
    out = []
    last = 0
    for start, _end, kind, payload in ranges:
        piece = _b36(start - last) + kind
        last = start
        if kind == "M":
            text = payload or ""
            units = len(text.encode("utf-16-le")) // 2
            assert units < 36, text
            piece += _b36(units) + text
        elif kind == "S":
            piece += ("+" if payload >= 0 else "-") + _b36(abs(payload)) + ";"
        out.append(piece)
    return "".join(out)


def _bidi_table(ucd: Any) -> str:
    out = []
    last_start = 0
    current = None
    for cp in range(0x110000):
        cls = _BIDI_CLASS.get(ucd.bidirectional(chr(cp)), "X")
        if cls != current:
            out.append(_b36(cp - last_start) + cls)
            last_start = cp
            current = cls
    return "".join(out)


def _virama(ucd: Any) -> str:
    cps = [cp for cp in range(0x110000) if ucd.combining(chr(cp)) == 9]
    out = []
    last = 0
    for cp in cps:
        out.append(_b36(cp - last))
        last = cp
    return ",".join(out)


def _joining(idnadata: Any) -> str:
    ranges = []
    for jt, packed in idnadata.joining_types.items():
        for p in packed:
            start, end = p >> 32, p & 0xFFFFFFFF  # [start, end)
            ranges.append((start, end, jt))
    ranges.sort()
    out = []
    last = 0
    for start, end, jt in ranges:
        out.append(f"{_b36(start - last)}.{_b36(end - start - 1)}{jt}")
        last = end
    return "".join(out)


def generate() -> str:
    """Return the generated block (between and including the markers)."""
    ucd = importlib.import_module("unicodedata2")
    uts46 = importlib.import_module("idna.uts46data")
    idnadata = importlib.import_module("idna.idnadata")
    lines = [
        _BEGIN,
        f"  // UTS #46 {uts46.__version__} (idna package), Unicode {ucd.unidata_version}"
        " (unicodedata2). Regenerate with codemode/stdlib/_idna_gen.py.",
        f"  const MAP = {json.dumps(_map_table(uts46), ensure_ascii=False)};",
        f"  const BIDI = {json.dumps(_bidi_table(ucd))};",
        f"  const VIRAMA = {json.dumps(_virama(ucd))};",
        f"  const JOINING = {json.dumps(_joining(idnadata))};",
        "  " + _END,
    ]
    return "\n".join(lines)


def main() -> None:
    """Rewrite the generated block of ``js/idna.js`` in place."""
    path = Path(__file__).parent / "js" / "idna.js"
    text = path.read_text(encoding="utf-8")
    head, _, rest = text.partition(_BEGIN)
    _, _, tail = rest.partition(_END)
    path.write_text(head + generate() + tail, encoding="utf-8")


if __name__ == "__main__":
    main()
