"""The runtime's messages as the child reads them: one JSON array per line.

The runtime writes them (runtime.js, ``encodeMessage``) into the journal, or into the
outbox a pump returns; the child reads a tool call's line on the isolate's thread, in the
call's path, so the reading is worth its own place.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

__all__ = ["decode_lines"]

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
