"""mini-racer's private API, the runtime's snapshot part (see miniracer_internals.py, which
re-exports what the child calls; the two modules are one fenced area).

A V8 startup snapshot holding the runtime makes every fresh isolate start with it: V8
deserializes a heap in which the runtime has already run, which costs about what creating
an empty isolate does, and each isolate is still its own heap made from the same bytes.
mini-racer does not offer snapshots, but its library exports V8's C++ API, and it creates
isolates through a call V8 lets an embedder steer (``v8::Isolate::New(CreateParams)``, whose
``snapshot_blob`` field names the snapshot): the snapshot is made with
``v8::internal::CreateSnapshotDataBlobInternal`` (what V8's own ``mksnapshot`` uses), and
the library's offset table slot for ``v8::Isolate::New`` is pointed at
:func:`_new_isolate`, which names the snapshot and calls the original. Both rest on facts
of one build, so :func:`install_snapshot` checks each first and changes nothing unless all
hold. Known builds: V8 14.4 (mini-racer 0.14) on x86-64 Linux.
"""

from __future__ import annotations

import ctypes
import mmap
import platform
import struct
from typing import Any

__all__ = ["install_snapshot", "redirected", "snapshot_installed"]


_MAKE_BLOB = (
    "_ZN2v88internal30CreateSnapshotDataBlobInternalENS_15SnapshotCreator20FunctionCodeHandlingEPKc"
    "NS_4base5FlagsINS0_8Snapshot14SerializerFlagEiiEE"
)
"""``v8::internal::CreateSnapshotDataBlobInternal(FunctionCodeHandling, const char*,
Snapshot::SerializerFlags)``: a new isolate and context, the source run in it, the blob."""
_ISOLATE_NEW = "_ZN2v87Isolate3NewERKNS0_12CreateParamsE"
"""``v8::Isolate::New(const Isolate::CreateParams&)``."""
_CREATE_PARAMS_CTOR = "_ZN2v87Isolate12CreateParamsC1Ev"
"""``v8::Isolate::CreateParams::CreateParams()``: called once, to check the layout."""
_KEEP_FUNCTION_CODE = 1
"""``SnapshotCreator::FunctionCodeHandling::kKeep``: functions compiled while the source
ran keep their bytecode in the snapshot, so a run does not compile them again."""
_KNOWN_V8 = ("14.4.",)
"""V8 versions whose ``CreateParams`` layout this module was written against."""
_PARAMS_SIZE = 0xA0
_SNAPSHOT_BLOB_OFFSET = 0x40
"""Where ``CreateParams::snapshot_blob`` (``const StartupData*``) sits in V8 14.4."""
_PARAMS_TRUE_BYTE = 0x80
"""``CreateParams::allow_atomics_wait``: the one field its constructor sets to non-zero."""


class _StartupData(ctypes.Structure):
    """``v8::StartupData``: the blob's bytes and their length (returned in registers)."""

    _fields_ = [("data", ctypes.c_void_p), ("raw_size", ctypes.c_int)]


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


_NewIsolate = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)

_blob: _StartupData | None = None
"""The snapshot every isolate of this process starts from (never freed: isolates use it)."""
_original_new: Any = None
redirected: list[int] = []
"""The offset table slots :func:`install_snapshot` redirected (addresses), for the tests."""


def _new_isolate(params: int) -> int:
    """``v8::Isolate::New`` as mini-racer's library now reaches it: the snapshot named in
    the parameters (unless the caller named one), then V8's own. Runs on the thread that
    creates the context, the child's engine thread (threads.off_loop)."""
    slot = ctypes.c_void_p.from_address(params + _SNAPSHOT_BLOB_OFFSET)
    if slot.value is None and _blob is not None:
        slot.value = ctypes.addressof(_blob)
    return int(_original_new(params))


_new_isolate_for_v8 = _NewIsolate(_new_isolate)  # module-level: V8 calls it while the process lives


def snapshot_installed() -> bool:
    """Whether isolates of this process start from the runtime's snapshot."""
    return _blob is not None


def install_snapshot(dll: Any, source: str) -> str | None:
    """Make a snapshot in which ``source`` has run, and have every isolate created after
    this start from it. Call once per process, after V8 is initialized and before the
    first isolate. Returns ``None`` when installed, else why not (nothing was changed)."""
    global _blob, _original_new
    if _blob is not None:
        return "a snapshot is already installed"
    reason = _unsupported(dll)
    if reason is not None:
        return reason
    slots = _call_slots(dll, _ISOLATE_NEW)
    if isinstance(slots, str):
        return slots
    make = getattr(dll, _MAKE_BLOB)
    make.restype = _StartupData
    make.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    blob = make(_KEEP_FUNCTION_CODE, source.encode("utf-8"), 0)
    if not blob.data or blob.raw_size <= 0:
        return "the runtime did not run in a snapshot context (it threw)"
    original = ctypes.c_void_p.from_address(slots[0]).value or 0
    _original_new = _NewIsolate(original)
    try:
        _write_slots(slots, ctypes.cast(_new_isolate_for_v8, ctypes.c_void_p).value or 0)
    except OSError as exc:
        _write_slots(slots, original, check=False)
        return f"cannot redirect the engine's isolate creation ({exc})"
    _blob = blob  # from here on, isolates start from it
    redirected[:] = slots
    return None


def _unsupported(dll: Any) -> str | None:
    """Why this build is not one :func:`install_snapshot` knows, or None."""
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"no snapshot support on {platform.system()} {platform.machine()}"
    version = bytes(dll.mr_v8_version()).decode(errors="replace")
    if not version.startswith(_KNOWN_V8):
        return f"V8 {version} is not a version whose CreateParams layout is known"
    for name in (_MAKE_BLOB, _ISOLATE_NEW, _CREATE_PARAMS_CTOR):
        if not hasattr(dll, name):
            return f"the engine's library does not export {name}"
    # CreateParams' constructor, run on a poisoned buffer, must leave exactly the layout
    # this module writes into: 0xA0 bytes, all zero but allow_atomics_wait (true) and the
    # seven bytes of padding after it (untouched).
    buffer = (ctypes.c_ubyte * (_PARAMS_SIZE + 16)).from_buffer(bytearray(b"\xa5" * (_PARAMS_SIZE + 16)))
    ctor = getattr(dll, _CREATE_PARAMS_CTOR)
    ctor.argtypes = [ctypes.c_void_p]
    ctor.restype = None
    ctor(ctypes.addressof(buffer))
    expected = bytearray(_PARAMS_SIZE) + b"\xa5" * 16
    expected[_PARAMS_TRUE_BYTE : _PARAMS_TRUE_BYTE + 8] = b"\x01" + b"\xa5" * 7
    if bytes(buffer) != bytes(expected):
        return "Isolate::CreateParams does not have the expected layout"
    return None


def _call_slots(dll: Any, symbol: str) -> list[int] | str:
    """Addresses of the global offset table slots through which the library calls
    ``symbol``: the slots of its ``.got.plt`` that hold the function's address (the
    library is linked with BIND_NOW, so every slot is resolved at load)."""
    target = ctypes.cast(getattr(dll, symbol), ctypes.c_void_p).value
    info = _DlInfo()
    libc = ctypes.CDLL(None)
    libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    if not target or not libc.dladdr(target, ctypes.byref(info)) or not info.dli_fbase:
        return f"cannot locate {symbol} in the loaded library"
    try:
        section = _section(info.dli_fname.decode() if info.dli_fname else "", b".got.plt")
    except (OSError, ValueError, struct.error) as exc:
        return f"cannot read the engine's library ({exc})"
    if section is None:
        return "the engine's library has no .got.plt"
    start, size = section
    base = int(info.dli_fbase)
    table = ctypes.string_at(base + start, size)
    needle = struct.pack("<Q", target)
    slots = []
    at = table.find(needle)
    while at >= 0:
        if at % 8 == 0:
            slots.append(base + start + at)
        at = table.find(needle, at + 1)
    if not slots:
        return f"the engine's library does not call {symbol} through its offset table"
    return slots


_ELF_HEADER = struct.Struct("<16xHHIQQQIHHHHHH")
_SECTION_HEADER = struct.Struct("<IIQQQQIIQQ")


def _section(path: str, name: bytes) -> tuple[int, int] | None:
    """(address relative to the load base, size) of the ELF64 section ``name`` of the
    file at ``path``, read from its section headers (a few KB of a large file)."""
    with open(path, "rb") as f:
        header = f.read(_ELF_HEADER.size)
        if header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
            raise ValueError("not a 64-bit little-endian ELF file")
        fields = _ELF_HEADER.unpack(header)
        shoff, shentsize, shnum, shstrndx = fields[5], fields[10], fields[11], fields[12]
        f.seek(shoff)
        table = f.read(shentsize * shnum)
        sections = [_SECTION_HEADER.unpack_from(table, i * shentsize) for i in range(shnum)]
        names = sections[shstrndx]
        f.seek(names[4])
        strings = f.read(names[5])
    for sh_name, _type, _flags, sh_addr, _offset, sh_size, *_ in sections:
        if strings[sh_name : strings.index(b"\0", sh_name)] == name:
            return sh_addr, sh_size
    return None


def _write_slots(slots: list[int], address: int, *, check: bool = True) -> None:
    """Point each slot at ``address``. The table is read-only after relocation (RELRO): its
    pages are made writable for the write and given back the protection they had."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page = mmap.PAGESIZE
    for slot in slots:
        start = slot - slot % page
        before = _protection(start)
        if libc.mprotect(start, page, mmap.PROT_READ | mmap.PROT_WRITE) != 0:
            if not check:
                continue
            raise OSError(ctypes.get_errno(), "mprotect of the engine's offset table failed")
        struct.pack_into("<Q", (ctypes.c_char * 8).from_address(slot), 0, address)
        libc.mprotect(start, page, before)


def _protection(address: int) -> int:
    """The protection of the mapping that holds ``address`` (from /proc/self/maps): read
    only for a RELRO page, but the last page of the table may share its mapping with
    writable data, which must stay writable."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            span, perms = line.split()[:2]
            low, high = (int(x, 16) for x in span.split("-"))
            if low <= address < high:
                return (
                    (mmap.PROT_READ if perms[0] == "r" else 0)
                    | (mmap.PROT_WRITE if perms[1] == "w" else 0)
                    | (mmap.PROT_EXEC if perms[2] == "x" else 0)
                )
    return mmap.PROT_READ
