"""The runtime's messages as the child reads them: one JSON array per line, each checked
for its shape before the child acts on it.

The runtime writes them (runtime.js, ``encodeMessage``) into the journal, or into the
outbox a pump returns; the child reads a tool call's line on the isolate's thread, in the
call's path, so the reading is worth its own place. A tag and its fields::

    ["l", level, text]               a log line
    ["s", seq, request]              a synchronous request (a module's source)
    ["c", call_id, provider, tool, args_json]   a tool call
    ["f", call_id, request_json]     an outbound request
    ["d", result_json | null]        the result
    ["D"]                            the result waits in the isolate (a take brings it)
    ["e", text, kind]                the run failed (at a bound, or with its result)
    ["t", text, name, stack, compiling]   the program threw (compiling: 1 if its code did
                                     not compile)
    ["h"]                            the run returned a request handler
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

__all__ = ["TAMPERED", "SentCall", "decode_lines", "well_shaped"]

_decoder = msgspec.json.Decoder()


def decode_lines(text: str) -> list[Any]:
    """The messages in ``text``, a line each. msgspec reads a line several times faster than
    the stdlib; a line it refuses goes to ``json.loads``, which decides as it always did: it
    also reads what msgspec does not (the escape of a lone surrogate, which JSON.stringify
    writes for half a pair; a non-finite number), and raises ``ValueError`` for what neither
    reads, a line nested past the recursion limit too (the runtime's own lines are flat)."""
    messages = []
    for line in text.split("\n"):
        if line:
            try:
                try:
                    messages.append(_decoder.decode(line))
                except msgspec.DecodeError:
                    messages.append(json.loads(line))
            except RecursionError:
                raise ValueError("a message line nests too deeply to read") from None
    return messages


TAMPERED = (
    "The run's runtime was tampered with: a message it sent is malformed, so the run was "
    "stopped. Leave the runtime's own objects alone."
)
_SHAPES: dict[str, tuple[tuple[type, ...], ...]] = {
    "l": ((str,), (str,)),
    "s": ((int,), (str,)),
    "c": ((int,), (str,), (str,), (str,)),
    "f": ((int,), (str,)),
    "d": ((str, type(None)),),
    "D": (),
    "e": ((str,), (str,)),
    "t": ((str,), (str,), (str,), (int,)),
    "h": (),
}
"""Each message's types after its tag, exactly: lines are decoded to plain lists, strings
and ints (``type(v) is int`` also keeps ``true`` out, which ``isinstance`` lets in)."""


def well_shaped(m: Any) -> bool:
    """Whether ``m`` is a message of a known tag with that tag's count and types of fields:
    only the runtime writes them, but a program that tampered with its own isolate must not
    be able to make the child (or the host) act on something malformed."""
    if type(m) is not list or not m or type(m[0]) is not str:
        return False
    shape = _SHAPES.get(m[0])
    if shape is None or len(m) != len(shape) + 1:
        return False
    i = 1
    for kinds in shape:  # (every tool call's line comes through here)
        if type(m[i]) not in kinds:
            return False
        i += 1
    return True


class SentCall:
    """A tool call the isolate's thread sent to the host (``Relay.send_calls_now``): the
    loop only opens it. Not JSON, so nothing the isolate writes can pose as one."""

    __slots__ = ("at", "call_id")

    def __init__(self, call_id: int, at: float) -> None:
        self.call_id = call_id
        self.at = at
        """When it left (``time.monotonic()``): the loop may open it much later."""
