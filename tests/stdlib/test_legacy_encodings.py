"""Every encoding of the Encoding Standard in the guest's TextDecoder.

Expectations come from the standard's algorithms run in Python over its ``indexes.json``
(tests/stdlib/encoding_reference.py), never from the guest's own generated tables: every
pointer of every index round-trips, every two-byte sequence of every multi-byte encoding
decodes as the standard says in replacement and fatal mode, and every stream split gives the
one-shot result.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator

import pytest

from codemode import SyncIsolateExecutor
from tests.stdlib import encoding_reference as ref
from tests.stdlib.conftest import Guest

MULTI_BYTE = ("gb18030", "gbk", "big5", "euc-jp", "iso-2022-jp", "shift_jis", "euc-kr")


@pytest.fixture(autouse=True)
def _data() -> Iterator[None]:
    if ref.data_dir() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("the Encoding Standard's data is absent in CI: set CODEMODE_CONFORMANCE_DIR")
        pytest.skip("the Encoding Standard's data (../shared/conformance/whatwg-encoding) is absent")
    yield


# Decodes each of SEQS (hex strings) alone, in replacement mode and in fatal mode (1: TypeError).
_DECODE_EACH = """
const seqs = SEQS.map((h) => Uint8Array.from(h.match(/../g) || [], (x) => parseInt(x, 16)));
const texts = [], fatal = [];
for (const bytes of seqs) {
  texts.push(new TextDecoder(ENC).decode(bytes));
  try { new TextDecoder(ENC, { fatal: true }).decode(bytes); fatal.push(0); }
  catch (e) { fatal.push(e instanceof TypeError ? 1 : String(e)); }
}
return { texts, fatal };
"""


def decode_each(guest: Guest, encoding: str, seqs: list[bytes]) -> tuple[list[str], list[object]]:
    import json

    body = _DECODE_EACH.replace("SEQS", json.dumps([s.hex() for s in seqs])).replace(
        "ENC", json.dumps(encoding)
    )
    out = guest.run(body)
    return out["texts"], out["fatal"]


def check_against_reference(guest: Guest, encoding: str, seqs: list[bytes]) -> None:
    texts, fatal = decode_each(guest, encoding, seqs)
    wrong = []
    for seq, text, threw in zip(seqs, texts, fatal, strict=True):
        want, error = ref.decode(encoding, seq)
        if text != want or threw != int(error):
            wrong.append((seq.hex(), text, threw, want, error))
    assert not wrong, (len(wrong), wrong[:10])


@pytest.mark.parametrize("encoding", MULTI_BYTE)
def test_every_two_byte_sequence(guest: Guest, encoding: str) -> None:
    """All 65,536 byte pairs: every pointer of the index, every lead and trail boundary, an
    ASCII trail restored after an error, a lone byte at end-of-queue."""
    prefix = b"\x1b$B" if encoding == "iso-2022-jp" else b""
    check_against_reference(guest, encoding, [prefix + bytes((a, b)) for a in range(256) for b in range(256)])


def test_every_jis0212_sequence(guest: Guest) -> None:
    check_against_reference(
        guest, "euc-jp", [bytes((0x8F, a, b)) for a in range(0x80, 256) for b in range(256)]
    )


def test_gb18030_four_byte_boundaries(guest: Guest) -> None:
    seqs = [
        bytes((a, b, c, d))
        for a in (0x80, 0x81, 0x84, 0x85, 0x8F, 0x90, 0xE3, 0xE4, 0xFD, 0xFE, 0xFF)
        for b in (0x2F, 0x30, 0x31, 0x39, 0x3A)
        for c in (0x7F, 0x80, 0x81, 0xA0, 0xFE, 0xFF)
        for d in (0x2F, 0x30, 0x35, 0x39, 0x3A, 0x41)
    ]
    seqs += [bytes((0x84, 0x31, 0xA4)), bytes((0x81, 0x30)), bytes((0x81,))]
    check_against_reference(guest, "gb18030", seqs)


def _four_bytes(pointer: int) -> bytes:
    return bytes(
        (
            pointer // 12600 + 0x81,
            pointer % 12600 // 1260 + 0x30,
            pointer % 1260 // 10 + 0x81,
            pointer % 10 + 0x30,
        )
    )


def test_every_gb18030_ranges_pointer(guest: Guest) -> None:
    """Every four-byte pointer of the BMP part, the edges of the supplementary part, and the
    pointers just outside both (errors)."""
    pointers = [*range(0, 39421), 188999, 189000, 189001, 1237574, 1237575, 1237576]
    text = "".join(
        chr(cp) if (cp := ref.gb18030_ranges_code_point(p)) is not None else "\ufffd" for p in pointers
    )
    data = b"".join(_four_bytes(p) for p in pointers)
    got = guest.run(
        f"return new TextDecoder('gb18030').decode(Uint8Array.from(atob('{_b64(data)}'), (c) => c.charCodeAt(0)));"
    )
    assert got == text
    assert got[7457] == "\ue7c7" and got[39419] == "\uffff" and got[39420] == "\ufffd"
    assert got[39421:] == "\ufffd\U00010000\U00010001\U0010fffe\U0010ffff\ufffd"


def _b64(data: bytes) -> str:
    import base64

    return base64.b64encode(data).decode()


def _pointer_bytes(encoding: str, pointer: int) -> bytes:
    """The bytes the standard's encoder writes for ``pointer`` (its layout of the index)."""
    if encoding == "gb18030":
        trail = pointer % 190
        return bytes((pointer // 190 + 0x81, trail + (0x40 if trail < 0x3F else 0x41)))
    if encoding == "big5":
        trail = pointer % 157
        return bytes((pointer // 157 + 0x81, trail + (0x40 if trail < 0x3F else 0x62)))
    if encoding == "euc-kr":
        return bytes((pointer // 190 + 0x81, pointer % 190 + 0x41))
    if encoding == "shift_jis":
        lead, trail = pointer // 188, pointer % 188
        return bytes((lead + (0x81 if lead < 0x1F else 0xC1), trail + (0x40 if trail < 0x3F else 0x41)))
    if encoding == "euc-jp":
        return bytes((pointer // 94 + 0xA1, pointer % 94 + 0xA1))
    if encoding == "euc-jp/jis0212":
        return bytes((0x8F, pointer // 94 + 0xA1, pointer % 94 + 0xA1))
    return bytes((pointer // 94 + 0x21, pointer % 94 + 0x21))  # iso-2022-jp


@pytest.mark.parametrize(
    ("encoding", "index", "limit"),
    [
        ("gb18030", "gb18030", None),
        ("big5", "big5", None),
        ("euc-kr", "euc-kr", None),
        ("shift_jis", "jis0208", None),
        ("euc-jp", "jis0208", 94 * 94),
        ("euc-jp/jis0212", "jis0212", 94 * 94),
        ("iso-2022-jp", "jis0208", 94 * 94),
    ],
)
def test_every_pointer_round_trips(guest: Guest, encoding: str, index: str, limit: int | None) -> None:
    """Each pointer with a code point in the index decodes to it, read straight from
    indexes.json (Big5's four two-code-point pointers and Shift_JIS's private use range
    excepted, as the standard says), all in one input."""
    table = ref.indexes()[index][:limit]
    special = {1133, 1135, 1164, 1166} if encoding == "big5" else set()
    if encoding == "shift_jis":
        special = set(range(8836, 10716))
    pointers = [p for p, cp in enumerate(table) if cp is not None and p not in special]
    data = b"".join(_pointer_bytes(encoding, p) for p in pointers)
    want = "".join(chr(table[p]) for p in pointers)  # type: ignore[arg-type]  # pointers skip None
    label = encoding.split("/")[0]
    if label == "iso-2022-jp":
        data = b"\x1b$B" + data + b"\x1b(B"
    got = guest.run(
        f"return new TextDecoder('{label}', {{ fatal: true }})"
        f".decode(Uint8Array.from(atob('{_b64(data)}'), (c) => c.charCodeAt(0)));"
    )
    assert len(pointers) > 0 and got == want


def test_iso_2022_jp_states_and_escapes(guest: Guest) -> None:
    prefixes = [b"", b"\x1b(J", b"\x1b(I", b"\x1b$@", b"\x1b$B"]
    seqs = [p + bytes((b,)) for p in prefixes for b in range(256)]
    seqs += [b"\x1b" + bytes((b,)) for b in range(256)]
    seqs += [b"\x1b" + bytes((a, b)) for a in (0x24, 0x28, 0x29) for b in range(256)]
    seqs += [
        b"\x1b(B\x1b(BA",
        b"\x1b$B\x1b(B",
        b"\x1b$B$\x1b(BA",
        b"\x1b$B$",
        b"\x1b(",
        b"\x1b",
        b"\x1b(JA\x1b",
    ]
    check_against_reference(guest, "iso-2022-jp", seqs)


def _single_byte_encodings() -> list[str]:
    if ref.data_dir() is None:
        return ["ibm866"]
    for group in ref.encodings():
        if group["heading"] == "Legacy single-byte encodings":
            # encodings.json, read as plain objects: each group's "encodings" is a list of them
            return [e["name"].lower() for e in group["encodings"]]  # type: ignore[attr-defined]
    raise AssertionError("no single-byte group")


@pytest.mark.parametrize("encoding", [*_single_byte_encodings(), "x-user-defined"])
def test_single_byte_every_byte(guest: Guest, encoding: str) -> None:
    check_against_reference(guest, encoding, [bytes((b,)) for b in range(256)] + [bytes(range(256))])


def _sample(encoding: str, rng: random.Random) -> bytes:
    """A few hundred bytes: ASCII, valid multi-byte sequences, and stray bytes."""
    pieces = []
    for _ in range(160):
        roll = rng.random()
        if roll < 0.3:
            pieces.append(bytes((rng.randrange(0x20, 0x7F),)))
        elif roll < 0.85:
            pieces.append(bytes((rng.randrange(0x81, 0xFF), rng.randrange(0x40, 0xFF))))
        elif roll < 0.92 and encoding in ("gb18030", "gbk"):
            pieces.append(_four_bytes(rng.randrange(0, 39420)))
        elif roll < 0.92 and encoding == "euc-jp":
            pieces.append(bytes((0x8F, rng.randrange(0xA1, 0xFF), rng.randrange(0xA1, 0xFF))))
        else:
            pieces.append(bytes((rng.randrange(256),)))
    data = b"".join(pieces)
    if encoding == "iso-2022-jp":
        data = b"".join(
            rng.choice([b"\x1b$B", b"\x1b(B", b"\x1b(J", b"\x1b(I", b""])
            + bytes(b & 0x7F for b in data[i : i + 9])
            for i in range(0, len(data), 9)
        )
    return data


_SPLITS = """
const data = Uint8Array.from(atob(DATA), (c) => c.charCodeAt(0));
const whole = new TextDecoder(ENC).decode(data);
const d = new TextDecoder(ENC);
let bytewise = '';
for (let i = 0; i < data.length; i++) bytewise += d.decode(data.subarray(i, i + 1), { stream: true });
bytewise += d.decode();
const splits = [];
for (let i = 0; i <= data.length; i++) {
  const s = d.decode(data.subarray(0, i), { stream: true }) + d.decode(data.subarray(i));
  if (s !== whole) splits.push(i);
}
return { whole, bytewise, splits };
"""


@pytest.mark.parametrize("encoding", [*MULTI_BYTE, "utf-16le", "utf-16be"])
def test_stream_splits_at_every_boundary(guest: Guest, encoding: str) -> None:
    import json

    rng = random.Random(encoding)
    if encoding.startswith("utf-16"):
        units = [rng.choice([0x41, 0x3042, 0xD83D, 0xDE00, 0xDC00, 0xFEFF]) for _ in range(150)]
        data = (
            b"".join(u.to_bytes(2, "little" if encoding.endswith("le") else "big") for u in units) + b"\x41"
        )
        want = None  # the UTF-16 decoders predate this file: the splits are checked against one shot
    else:
        data = _sample(encoding, rng)
        want = ref.decode(encoding, data)[0]
    body = _SPLITS.replace("DATA", json.dumps(_b64(data))).replace("ENC", json.dumps(encoding))
    out = guest.run(body)
    if want is not None:
        assert out["whole"] == want
    assert out["bytewise"] == out["whole"]
    assert out["splits"] == []


def test_fatal_streaming_throws_at_the_end_only(guest: Guest) -> None:
    out = guest.run(
        """
        const r = [];
        for (const [enc, bytes] of [['shift_jis', [0x82]], ['gb18030', [0x81, 0x30, 0x81]], ['big5', [0xa4]],
                                    ['euc-jp', [0x8f, 0xa2]], ['iso-2022-jp', [0x1b, 0x24]], ['euc-kr', [0xb0]]]) {
          const d = new TextDecoder(enc, { fatal: true });
          const first = d.decode(new Uint8Array(bytes), { stream: true });
          let end;
          try { d.decode(); end = 'none'; } catch (e) { end = e.constructor.name + ': ' + e.message; }
          r.push([first, end, d.decode(new Uint8Array([0x41]))]);
        }
        return r;
        """
    )
    for first, end, after in out:
        assert first == "" and end.startswith("TypeError: ") and after == "A", out
    assert "shift_jis" in out[0][1]


def test_bom_handling(guest: Guest) -> None:
    out = guest.run(
        """
        const d = (l, a, o) => new TextDecoder(l, o).decode(new Uint8Array(a));
        const s = new TextDecoder('utf-16le');
        const split = s.decode(new Uint8Array([0xff]), { stream: true }) + s.decode(new Uint8Array([0xfe, 0x41, 0]));
        return [d('utf-16be', [0xfe, 0xff, 0, 0x41]), d('utf-16be', [0xfe, 0xff, 0, 0x41], { ignoreBOM: true }),
                d('gb18030', [0x84, 0x31, 0x95, 0x33, 0x41]), d('utf-8', [0xef, 0xbb, 0xbf, 0xef, 0xbb, 0xbf]),
                split, d('utf-16le', [0xfe, 0xff])];
        """
    )
    assert out == ["A", "\ufeffA", "\ufeffA", "\ufeff", "A", "\ufffe"]


def test_labels_and_replacement(guest: Guest) -> None:
    import json

    pairs = [
        (label, enc["name"].lower())
        for group in ref.encodings()
        for enc in group["encodings"]  # type: ignore[attr-defined]  # a list, in encodings.json
        for label in enc["labels"]
    ]
    out = guest.run(
        f"""
        return {json.dumps(pairs)}.map(([label, name]) => {{
          try {{ return new TextDecoder(label).encoding; }} catch (e) {{ return e.constructor.name; }}
        }});
        """
    )
    for (label, name), got in zip(pairs, out, strict=True):
        assert got == ("RangeError" if name == "replacement" else name), label
    assert len(pairs) == 228


def test_tables_load_on_first_decode_only(guest: Guest) -> None:
    out = guest.run(
        """
        const before = __stdlibLoaded().filter((m) => m.startsWith('encodings/'));
        const d = new TextDecoder('shift_jis');
        const constructed = __stdlibLoaded().filter((m) => m.startsWith('encodings/'));
        new TextDecoder('euc-jp').decode(new Uint8Array([0x41]));
        const ascii = __stdlibLoaded().filter((m) => m.startsWith('encodings/'));
        const text = d.decode(new Uint8Array([0x82, 0xa0]));
        return [before, constructed, ascii, text, __stdlibLoaded().filter((m) => m.startsWith('encodings/'))];
        """
    )
    assert out == [[], [], ["encodings/jis0208"], "あ", ["encodings/jis0208"]]


def test_tables_reach_an_isolate_of_the_executor() -> None:
    """Through the child's synchronous module channel, the largest tables included."""
    program = """async () => {
      const d = (l, a) => new TextDecoder(l).decode(new Uint8Array(a));
      return [d('gb18030', [0xfe, 0xfe, 0x84, 0x31, 0xa4, 0x39]), d('big5', [0xfe, 0xfe, 0x87, 0x40]),
              d('euc-kr', [0xfd, 0xfe]), d('euc-jp', [0x8f, 0xed, 0xe3]), d('windows-1251', [0xc0])];
    }"""
    with SyncIsolateExecutor(pool={"max_workers": 1}, timeout=20_000) as ex:
        outcome = ex.execute(program)
    assert outcome.error is None, outcome.error
    want = [
        ref.decode("gb18030", [0xFE, 0xFE, 0x84, 0x31, 0xA4, 0x39])[0],
        ref.decode("big5", [0xFE, 0xFE, 0x87, 0x40])[0],
        ref.decode("euc-kr", [0xFD, 0xFE])[0],
        ref.decode("euc-jp", [0x8F, 0xED, 0xE3])[0],
        "\u0410",
    ]
    assert outcome.result == want
    assert "\ufffd" not in "".join(want)


def test_committed_tables_are_the_generators_output() -> None:
    """The tables in the package are what tools/gen_encoding_tables.py makes of the data."""
    import importlib.util
    from importlib import resources
    from pathlib import Path

    from codemode.stdlib import ENCODING_INDEXES

    path = Path(__file__).resolve().parents[2] / "tools" / "gen_encoding_tables.py"
    spec = importlib.util.spec_from_file_location("gen_encoding_tables", path)
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    data = ref.indexes()
    root = resources.files("codemode.stdlib").joinpath("js", "encodings")
    committed = sorted(p.name for p in root.iterdir() if p.name.endswith(".js"))
    assert committed == sorted(f"{name}.js" for name in ENCODING_INDEXES)
    for name in ENCODING_INDEXES:
        ranges = data["gb18030-ranges"] if name == "gb18030" else None
        want = gen.module_source(name, data[name], ranges)
        assert root.joinpath(f"{name}.js").read_text(encoding="utf-8") == want, name
    labels = gen.labels_block(ref.encodings())
    assert labels in resources.files("codemode.stdlib").joinpath("js", "encoding.js").read_text(
        encoding="utf-8"
    )
