"""Turns: at most N holders at once, the rest wait in line, and leaving the line is free.

``asyncio.Semaphore`` does the same, except that a waiter cancelled in line removes itself
from the semaphore's list, one scan each: a run that ends with tens of thousands of
requests in line (a program that started them all at once) spent seconds just cancelling
them.
Here a cancelled turn stays in the line and is skipped when it comes up.
"""

from __future__ import annotations

import asyncio
import collections

__all__ = ["Turns"]


class Turns:
    """``async with turns:`` holds one of ``slots`` places for the block."""

    def __init__(self, slots: int) -> None:
        self._free = slots
        self._line: collections.deque[asyncio.Future[None]] = collections.deque()

    async def __aenter__(self) -> None:
        if self._free > 0 and not self._line:
            self._free -= 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._line.append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._pass_on()  # handed the place, then cancelled: the next one gets it
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._pass_on()

    def _pass_on(self) -> None:
        """A place came free: hand it to the first turn still waiting, else keep it."""
        while self._line:
            turn = self._line.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self._free += 1
