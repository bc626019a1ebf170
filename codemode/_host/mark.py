"""The started mark: a page shared by the host and one child, where the child writes the id
of the run whose program it is about to start.

The host must know, when a child dies, whether the program of the run in flight may have run:
if not, the run can go to another child (nothing of it happened); if so, it must not run
twice. A frame saying so (``Started``) woke the host for every run only for it to note one
flag, which it reads only if the child dies. The mark carries the same fact without a
wake-up: the child stores the run id in the shared page before the program can run, and the
host reads it once the child is gone (a dead process's stores are all in the page).

Made by the host per child (a ``memfd`` where the system has one, else an unlinked temporary
file), passed as an inherited descriptor; a child that cannot map it says ``Started`` as a
frame instead, which the host still understands.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import tempfile

__all__ = ["ChildMark", "StartedMark", "open_mark"]

_SIZE = 8
_ID = struct.Struct("<q")


class StartedMark:
    """The host's side: the page, and the descriptor the child inherits until it is spawned."""

    def __init__(self) -> None:
        fd = _new_file()
        try:
            os.ftruncate(fd, _SIZE)
            self._page = mmap.mmap(fd, _SIZE)
        except BaseException:
            os.close(fd)
            raise
        self.fd: int | None = fd
        """Passed to the child (``pass_fds``); closed here once it is spawned."""

    @classmethod
    def make(cls) -> StartedMark | None:
        """A new mark, or None where none can be made (the child then says Started)."""
        try:
            return cls()
        except OSError:
            return None

    def spawned(self) -> None:
        """The child holds the descriptor now: the host keeps only the mapping."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def marked(self, run_id: int) -> bool:
        """Whether the child marked ``run_id`` as started (read after it died)."""
        if self._page.closed:
            return False
        return bool(_ID.unpack_from(self._page, 0)[0] == run_id)

    def close(self) -> None:
        self.spawned()
        with contextlib.suppress(BufferError):
            self._page.close()


def _new_file() -> int:
    if hasattr(os, "memfd_create"):
        with contextlib.suppress(OSError):
            return os.memfd_create("codemode-started", os.MFD_CLOEXEC)
    with tempfile.TemporaryFile() as handle:  # unlinked at once: only descriptors hold it
        return os.dup(handle.fileno())


class ChildMark:
    """The child's side: store a run id before its program may run."""

    def __init__(self, page: mmap.mmap) -> None:
        self._page = page

    def mark(self, run_id: int) -> None:
        _ID.pack_into(self._page, 0, run_id)


def open_mark(arg: str) -> ChildMark | None:
    """The mark the host passed as descriptor ``arg`` ("-": none), or None if it cannot be
    mapped (the child then says Started as a frame)."""
    if not arg.isdigit():
        return None
    fd = int(arg)
    try:
        page = mmap.mmap(fd, _SIZE)
    except (OSError, ValueError):
        return None
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    return ChildMark(page)
