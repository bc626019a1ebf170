"""The shared-memory channel between the child and one isolate's runtime (see runtime.js).

One SharedArrayBuffer, which the runtime's setup returns, split into four regions whose
offsets the runtime reports (``layout``):

* control: the operation code of the next call of the runtime's ``api`` (word 0), whether
  the program waits in a park (word 1) and for how long (word 2), whether a bell put
  answers into the inbound region (word 3);
* inbound: data for the runtime (UTF-16 units after an 8-byte header holding their count),
  written by Python directly and read by the called function;
* journal: what the program wrote (log lines, calls, results), UTF-16 after a 16-byte header
  (the write index, the bell's arming word, whether later messages wait in the outbox);
* sync: the answer to a synchronous request of the isolate, which polls its sequence word.

None of it needs the isolate: the loop reads the journal while the program runs. The
isolate assigns the bound methods it offers (``read_journal``, ``answer_sync``, ...) onto
itself, so a caller reaches them with no extra call in between.
"""

from __future__ import annotations

import codecs
import struct
import threading
from typing import Any

from .lines import decode_lines

__all__ = ["HEADER", "Channel"]

HEADER = 8
"""Bytes before the data in the inbound region (the count of UTF-16 units)."""
_JOURNAL_HEADER = 16


class Channel:
    """The four regions of one isolate's shared memory, and the journal's read position."""

    __slots__ = (
        "capacity",
        "closed",
        "control",
        "inbound",
        "journal",
        "lock",
        "read_at",
        "sync",
        "sync_capacity",
        "taken",
        "unreadable",
    )

    def __init__(self) -> None:
        self.lock = threading.Lock()
        """Held while the journal is read (from the loop or the isolate's thread) and while
        the isolate closes."""
        self.closed = False
        self.control = self.inbound = self.journal = self.sync = memoryview(b"")
        self.capacity = 0
        """UTF-16 units the inbound region takes at once (the runtime's, not the region's
        byte length: alignment pads it, and writing past the runtime's view loses text)."""
        self.sync_capacity = 0
        self.read_at = 0
        """Units of the journal read so far."""
        self.taken: list[Any] = []
        """What the isolate's thread read and left for the loop (:meth:`read_journal`)."""
        self.unreadable: Exception | None = None
        """Why the isolate's thread could not read the journal, for the loop to raise."""

    def attach(self, channel: Any, layout: dict[str, int]) -> None:
        """Take the regions of ``channel`` (the setup's memoryview) as ``layout`` says."""
        self.control = channel[0:16]
        self.inbound = channel[layout["inbound"] : layout["journal"]]
        self.journal = channel[layout["journal"] : layout["sync"]]
        self.sync = channel[layout["sync"] : layout["total"]]
        self.capacity = layout["inbound_units"]
        self.sync_capacity = layout["sync_units"]
        self.read_at = 0

    def detach(self) -> None:
        """The isolate is closing: nothing is written or read any more."""
        self.closed = True
        self.control = self.inbound = self.journal = self.sync = memoryview(b"")

    def put(self, chunk: bytes, units: int) -> None:
        """Write ``chunk`` (``units`` UTF-16 units, at most :attr:`capacity`) into inbound."""
        view = self.inbound
        view[HEADER : HEADER + len(chunk)] = chunk
        struct.pack_into("<i", view, 0, units)

    def deliver_now(self, inbox_json: str) -> bool:
        """In a bell, on the isolate's thread: put ``inbox_json`` into the inbound channel for
        the runtime to deliver as the bell returns; False if it does not fit (the loop's
        pump takes it)."""
        data = inbox_json.encode("utf-16-le", "surrogatepass")
        units = len(data) // 2
        if units > self.capacity or self.closed:
            return False
        self.put(data, units)
        struct.pack_into("<i", self.control, 12, 1)
        return True

    def delivering(self) -> bool:
        """Whether the inbound channel holds answers a bell put there (:meth:`deliver_now`)
        that the runtime has not taken yet."""
        return not self.closed and struct.unpack_from("<i", self.control, 12)[0] != 0

    def read_journal(self) -> list[Any]:
        """Messages written since the last read (after what the isolate's thread read and
        left for the loop). Needs no isolate: safe while it is busy."""
        with self.lock:
            if self.unreadable is not None:
                exc, self.unreadable = self.unreadable, None
                self.taken = []
                raise exc
            if not self.taken:
                return self.read_new()
            taken, self.taken = self.taken, []
            return taken + self.read_new()

    def read_new(self) -> list[Any]:
        """The journal's new messages (under :attr:`lock`). The bell is re-armed *before*
        the write index is read, so a message written after this read always rings again."""
        view = self.journal
        struct.pack_into("<i", view, 4, 0)
        (written,) = struct.unpack_from("<i", view, 0)
        if written <= self.read_at:
            return []
        raw = bytes(view[_JOURNAL_HEADER + 2 * self.read_at : _JOURNAL_HEADER + 2 * written])
        self.read_at = written
        # (the codec's own function: bytes.decode reaches UTF-16-LE through a Python wrapper)
        return decode_lines(codecs.utf_16_le_decode(raw, "surrogatepass", True)[0])

    def answer_sync(self, seq: int, text: str) -> None:
        """Answer the isolate's synchronous request ``seq`` (it polls the sequence word)."""
        data = text.encode("utf-16-le", "surrogatepass")
        units = len(data) // 2
        if units > self.sync_capacity:
            raise ValueError(f"a synchronous answer of {units} units does not fit")
        view = self.sync
        view[_JOURNAL_HEADER : _JOURNAL_HEADER + len(data)] = data
        struct.pack_into("<i", view, 4, units)
        struct.pack_into("<i", view, 0, seq)  # last: the isolate reads the answer after this

    def journal_full(self) -> bool:
        """Whether later messages wait in the outbox (taken with a pump)."""
        (full,) = struct.unpack_from("<i", self.journal, 8)
        return bool(full == 1)
