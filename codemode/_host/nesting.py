"""Data nested as deep as a peer chose: what every reader and writer of it falls back on.

msgspec's decoders and encoders recurse once per level of lists and objects and raise
``RecursionError`` past Python's recursion limit, counted from wherever the caller's stack
already is. So how deep a value may nest depended on who read it: a program's result that
the fleet's worker wrote from a shallow stack could fail to read in a host whose event loop
runs deeper, and the exception escaped a reader that expected only ``DecodeError``.

:func:`fresh_stack` runs one such call again on a new thread, whose stack starts empty:
anything one side could write, the other can read. It runs only after a ``RecursionError``
(a value nested hundreds of levels deep), never on the ordinary path.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["RESULT_TOO_DEEP", "fresh_stack"]

RESULT_TOO_DEEP = "The program's return value is nested too deeply to cross to the host. Return flatter data."
"""The run's error when its return value nests deeper than the host can read."""

_T = TypeVar("_T")


def fresh_stack(fn: Callable[[Any], _T], arg: Any) -> _T:
    """``fn(arg)`` on a thread of its own, with the whole recursion limit to spend; raises
    what it raises (``RecursionError`` when ``arg`` nests deeper than even that)."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append((True, fn(arg)))
        except BaseException as exc:  # handed to the caller below
            box.append((False, exc))

    thread = threading.Thread(target=run, name="codemode-deep-data", daemon=True)
    thread.start()
    thread.join()
    ok, value = box[0]
    if not ok:
        raise value
    result: _T = value
    return result
