"""The Encoding Standard's decoders written out in Python, over its ``indexes.json``.

The expectations of tests/stdlib/test_legacy_encodings.py: each handler here is the standard's
algorithm step by step (https://encoding.spec.whatwg.org/), independent of the guest's
JavaScript and of its generated tables (it reads the standard's data file itself).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path

from codemode.conformance import conformance_dir

EOQ = -1
CONTINUE = "continue"
ERROR = "error"
FINISHED = "finished"

Result = int | tuple[int, int] | str
Handler = Callable[[int, list[int]], Result]


def data_dir() -> Path | None:
    root = conformance_dir()
    path = root / "whatwg-encoding" if root is not None else None
    return path if path is not None and (path / "indexes.json").is_file() else None


@cache
def indexes() -> dict[str, list[int | None]]:
    path = data_dir()
    assert path is not None
    data: dict[str, list[int | None]] = json.loads((path / "indexes.json").read_text(encoding="utf-8"))
    return data


@cache
def encodings() -> list[dict[str, object]]:
    path = data_dir()
    assert path is not None
    data: list[dict[str, object]] = json.loads((path / "encodings.json").read_text(encoding="utf-8"))
    return data


def index_code_point(name: str, pointer: int) -> int | None:
    table = indexes()[name]
    return table[pointer] if 0 <= pointer < len(table) else None


@cache
def _ranges() -> tuple[list[int], list[int]]:
    # indexes.json's one entry that is [pointer, code point] pairs, not a table
    pairs: list[list[int]] = indexes()["gb18030-ranges"]  # type: ignore[assignment]
    return [p for p, _ in pairs], [c for _, c in pairs]


def gb18030_ranges_code_point(pointer: int) -> int | None:
    if 39419 < pointer < 189000 or pointer > 1237575:
        return None
    if pointer == 7457:
        return 0xE7C7
    pointers, code_points = _ranges()
    at = bisect.bisect_right(pointers, pointer) - 1
    return code_points[at] + pointer - pointers[at]


def ascii_byte(b: int) -> bool:
    return 0 <= b < 0x80


def single_byte(name: str) -> Callable[[], Handler]:
    def make() -> Handler:
        def handle(b: int, queue: list[int]) -> Result:
            if b == EOQ:
                return FINISHED
            if ascii_byte(b):
                return b
            if name == "x-user-defined":
                return 0xF780 + b - 0x80
            cp = index_code_point(name, b - 0x80)
            return ERROR if cp is None else cp

        return handle

    return make


def gb18030() -> Handler:
    s = {"first": 0, "second": 0, "third": 0}

    def handle(b: int, queue: list[int]) -> Result:
        if b == EOQ:
            if s["first"] == s["second"] == s["third"] == 0:
                return FINISHED
            s["first"] = s["second"] = s["third"] = 0
            return ERROR
        if s["third"]:
            if not 0x30 <= b <= 0x39:
                queue[:0] = [s["second"], s["third"], b]
                s["first"] = s["second"] = s["third"] = 0
                return ERROR
            cp = gb18030_ranges_code_point(
                (s["first"] - 0x81) * 12600
                + (s["second"] - 0x30) * 1260
                + (s["third"] - 0x81) * 10
                + b
                - 0x30
            )
            s["first"] = s["second"] = s["third"] = 0
            return ERROR if cp is None else cp
        if s["second"]:
            if 0x81 <= b <= 0xFE:
                s["third"] = b
                return CONTINUE
            queue[:0] = [s["second"], b]
            s["first"] = s["second"] = 0
            return ERROR
        if s["first"]:
            if 0x30 <= b <= 0x39:
                s["second"] = b
                return CONTINUE
            lead, s["first"] = s["first"], 0
            offset = 0x40 if b < 0x7F else 0x41
            pointer = (lead - 0x81) * 190 + (b - offset) if 0x40 <= b <= 0x7E or 0x80 <= b <= 0xFE else None
            cp = None if pointer is None else index_code_point("gb18030", pointer)
            if cp is not None:
                return cp
            if ascii_byte(b):
                queue.insert(0, b)
            return ERROR
        if ascii_byte(b):
            return b
        if b == 0x80:
            return 0x20AC
        if 0x81 <= b <= 0xFE:
            s["first"] = b
            return CONTINUE
        return ERROR

    return handle


BIG5_PAIRS = {1133: (0xCA, 0x304), 1135: (0xCA, 0x30C), 1164: (0xEA, 0x304), 1166: (0xEA, 0x30C)}


def _lead_trail(
    name: str, lead_range: tuple[int, int], pointer_of: Callable[[int, int], int | None]
) -> Callable[[], Handler]:
    """Big5, EUC-KR and Shift_JIS share a shape: one lead byte, one trail byte, an index."""

    def make() -> Handler:
        s = {"lead": 0}

        def handle(b: int, queue: list[int]) -> Result:
            if b == EOQ:
                if s["lead"] == 0:
                    return FINISHED
                s["lead"] = 0
                return ERROR
            if s["lead"]:
                lead, s["lead"] = s["lead"], 0
                pointer = pointer_of(lead, b)
                if name == "big5" and pointer in BIG5_PAIRS:
                    return BIG5_PAIRS[pointer]
                if name == "shift_jis" and pointer is not None and 8836 <= pointer <= 10715:
                    return 0xE000 - 8836 + pointer
                cp = (
                    None
                    if pointer is None
                    else index_code_point("jis0208" if name == "shift_jis" else name, pointer)
                )
                if cp is not None:
                    return cp
                if ascii_byte(b):
                    queue.insert(0, b)
                return ERROR
            if ascii_byte(b) or (name == "shift_jis" and b == 0x80):
                return b
            if name == "shift_jis" and 0xA1 <= b <= 0xDF:
                return 0xFF61 - 0xA1 + b
            if lead_range[0] <= b <= lead_range[1] and not (name == "shift_jis" and 0xA0 <= b <= 0xDF):
                s["lead"] = b
                return CONTINUE
            return ERROR

        return handle

    return make


def _big5_pointer(lead: int, b: int) -> int | None:
    offset = 0x40 if b < 0x7F else 0x62
    return (lead - 0x81) * 157 + (b - offset) if 0x40 <= b <= 0x7E or 0xA1 <= b <= 0xFE else None


def _euc_kr_pointer(lead: int, b: int) -> int | None:
    return (lead - 0x81) * 190 + (b - 0x41) if 0x41 <= b <= 0xFE else None


def _shift_jis_pointer(lead: int, b: int) -> int | None:
    offset = 0x40 if b < 0x7F else 0x41
    lead_offset = 0x81 if lead < 0xA0 else 0xC1
    return (lead - lead_offset) * 188 + b - offset if 0x40 <= b <= 0x7E or 0x80 <= b <= 0xFC else None


big5 = _lead_trail("big5", (0x81, 0xFE), _big5_pointer)
euc_kr = _lead_trail("euc-kr", (0x81, 0xFE), _euc_kr_pointer)
shift_jis = _lead_trail("shift_jis", (0x81, 0xFC), _shift_jis_pointer)


def euc_jp() -> Handler:
    s = {"lead": 0, "jis0212": False}

    def handle(b: int, queue: list[int]) -> Result:
        if b == EOQ:
            if s["lead"] == 0:
                return FINISHED
            s["lead"] = 0
            return ERROR
        if s["lead"] == 0x8E and 0xA1 <= b <= 0xDF:
            s["lead"] = 0
            return 0xFF61 - 0xA1 + b
        if s["lead"] == 0x8F and 0xA1 <= b <= 0xFE:
            s["jis0212"] = True
            s["lead"] = b
            return CONTINUE
        if s["lead"]:
            lead, s["lead"] = s["lead"], 0
            cp = None
            if 0xA1 <= lead <= 0xFE and 0xA1 <= b <= 0xFE:
                cp = index_code_point("jis0212" if s["jis0212"] else "jis0208", (lead - 0xA1) * 94 + b - 0xA1)
            s["jis0212"] = False
            if cp is not None:
                return cp
            if ascii_byte(b):
                queue.insert(0, b)
            return ERROR
        if ascii_byte(b):
            return b
        if b in (0x8E, 0x8F) or 0xA1 <= b <= 0xFE:
            s["lead"] = b
            return CONTINUE
        return ERROR

    return handle


class _Iso2022Jp:
    """ISO-2022-JP's decoder: its state, output state, leading byte and output flag."""

    def __init__(self) -> None:
        self.state = "ascii"
        self.out_state = "ascii"
        self.lead = 0
        self.output = False

    def handle(self, b: int, queue: list[int]) -> Result:
        state = self.state
        if state in ("ascii", "roman", "katakana", "lead"):
            if b == 0x1B:
                self.state = "escape start"
                return CONTINUE
            if b == EOQ:
                return FINISHED
            self.output = False
            if state == "katakana":
                return 0xFF61 - 0x21 + b if 0x21 <= b <= 0x5F else ERROR
            if state == "lead":
                if 0x21 <= b <= 0x7E:
                    self.lead = b
                    self.state = "trail"
                    return CONTINUE
                return ERROR
            if b > 0x7F or b in (0x0E, 0x0F):
                return ERROR
            if state == "roman" and b == 0x5C:
                return 0xA5
            if state == "roman" and b == 0x7E:
                return 0x203E
            return b
        if state == "trail":
            if b == 0x1B:
                self.state = "escape start"
                return ERROR
            self.state = "lead"
            if 0x21 <= b <= 0x7E:
                cp = index_code_point("jis0208", (self.lead - 0x21) * 94 + b - 0x21)
                return ERROR if cp is None else cp
            return ERROR
        if state == "escape start":
            if b in (0x24, 0x28):
                self.lead = b
                self.state = "escape"
                return CONTINUE
            if b != EOQ:
                queue.insert(0, b)
            self.output = False
            self.state = self.out_state
            return ERROR
        lead, self.lead = self.lead, 0
        new = {(0x28, 0x42): "ascii", (0x28, 0x4A): "roman", (0x28, 0x49): "katakana"}.get((lead, b))
        if lead == 0x24 and b in (0x40, 0x42):
            new = "lead"
        if new is not None:
            self.state = self.out_state = new
            output, self.output = self.output, True
            return ERROR if output else CONTINUE
        queue[:0] = [lead] if b == EOQ else [lead, b]
        self.output = False
        self.state = self.out_state
        return ERROR


def iso_2022_jp() -> Handler:
    return _Iso2022Jp().handle


MAKERS: dict[str, Callable[[], Handler]] = {
    "gb18030": gb18030,
    "gbk": gb18030,
    "big5": big5,
    "euc-jp": euc_jp,
    "iso-2022-jp": iso_2022_jp,
    "shift_jis": shift_jis,
    "euc-kr": euc_kr,
}


def maker(encoding: str) -> Callable[[], Handler]:
    if encoding in MAKERS:
        return MAKERS[encoding]
    return single_byte("iso-8859-8" if encoding == "iso-8859-8-i" else encoding)


def decode(encoding: str, data: bytes | list[int]) -> tuple[str, bool]:
    """(the text in replacement mode, whether any error occurred): the standard's "process a
    queue" over ``data`` followed by end-of-queue."""
    handle = maker(encoding)()
    queue = [*data, EOQ]
    out: list[str] = []
    error = False
    while True:
        b = queue.pop(0) if queue[0] != EOQ else EOQ
        result = handle(b, queue)
        if result == FINISHED:
            return "".join(out), error
        if result == ERROR:
            error = True
            out.append("\ufffd")
        elif isinstance(result, tuple):
            out.extend(chr(c) for c in result)
        elif isinstance(result, int):
            out.append(chr(result))
