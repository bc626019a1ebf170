"""TextEncoder/TextDecoder (+ streams variants) and atob/btoa."""

from __future__ import annotations

from tests.stdlib.conftest import Guest


def test_encode_and_encode_into(guest: Guest) -> None:
    out = guest.run(
        """
        const te = new TextEncoder();
        const a = Array.from(te.encode('a€😀\\ud800'));
        const dest = new Uint8Array(5);
        const r = te.encodeInto('a€😀', dest);
        return { a, r, dest: Array.from(dest), enc: te.encoding, empty: te.encode().length };
        """
    )
    assert out["a"] == [0x61, 0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x98, 0x80, 0xEF, 0xBF, 0xBD]
    assert out["r"] == {"read": 2, "written": 4}
    assert out["dest"] == [0x61, 0xE2, 0x82, 0xAC, 0]
    assert out["enc"] == "utf-8" and out["empty"] == 0


def test_utf8_decode_replacement_fatal_bom_stream(guest: Guest) -> None:
    out = guest.run(
        """
        const d = new TextDecoder();
        const bad = d.decode(new Uint8Array([0x61, 0xf0, 0x9f, 0x41, 0xc0, 0x80, 0xed, 0xa0, 0x80]));
        const bom = d.decode(new Uint8Array([0xef, 0xbb, 0xbf, 0x68, 0x69]));
        const keep = new TextDecoder('utf-8', { ignoreBOM: true }).decode(new Uint8Array([0xef, 0xbb, 0xbf, 0x68]));
        let fatal;
        try { new TextDecoder('utf8', { fatal: true }).decode(new Uint8Array([0xff])); } catch (e) { fatal = e.constructor.name; }
        const s = new TextDecoder();
        const parts = [s.decode(new Uint8Array([0xe2, 0x82]), { stream: true }), s.decode(new Uint8Array([0xac]), { stream: true }), s.decode()];
        const dv = new TextDecoder().decode(new DataView(new Uint8Array([0x68, 0x69]).buffer));
        const ab = new TextDecoder().decode(new Uint8Array([0x68]).buffer);
        let range;
        try { new TextDecoder('utf-32'); } catch (e) { range = e.constructor.name; }
        let repl;
        try { new TextDecoder('iso-2022-kr'); } catch (e) { repl = e.constructor.name; }
        return { bad, bom, keep, fatal, parts, dv, ab, range, repl };
        """
    )
    assert out["bad"] == "a\ufffdA\ufffd\ufffd\ufffd\ufffd\ufffd"
    assert out["bom"] == "hi" and out["keep"] == "\ufeffh"
    assert out["fatal"] == "TypeError"
    assert out["parts"] == ["", "€", ""]
    assert out["dv"] == "hi" and out["ab"] == "h"
    assert out["range"] == "RangeError" and out["repl"] == "RangeError"


def test_utf16_and_windows_1252(guest: Guest) -> None:
    out = guest.run(
        """
        const le = new TextDecoder('utf-16le').decode(new Uint8Array([0xff, 0xfe, 0x68, 0, 0x3d, 0xd8, 0, 0xde]));
        const be = new TextDecoder('UTF-16BE').decode(new Uint8Array([0, 0x68, 0xd8, 0x3d]));
        const w = new TextDecoder('latin1');
        return [le, be, w.encoding, w.decode(new Uint8Array([0x80, 0xe9, 0x81])), new TextDecoder(' Unicode ').encoding];
        """
    )
    assert out == ["h😀", "h\ufffd", "windows-1252", "€é\x81", "utf-16le"]


def test_large_roundtrip(guest: Guest) -> None:
    out = guest.run(
        """
        const s = 'ascii '.repeat(50000) + 'ünï😀'.repeat(20000);
        const b = new TextEncoder().encode(s);
        return [b.length, new TextDecoder().decode(b) === s];
        """
    )
    assert out == [300000 + 20000 * 9, True]


def test_text_streams(guest: Guest) -> None:
    out = guest.run(
        """
        const chunks = [];
        const src = new ReadableStream({ start(c) { c.enqueue('a😀'.slice(0, 2)); c.enqueue('😀'.slice(1) + 'b'); c.close(); } });
        const bytes = src.pipeThrough(new TextEncoderStream());
        const text = bytes.pipeThrough(new TextDecoderStream());
        for await (const c of text) chunks.push(c);
        return chunks.join('');
        """
    )
    assert out == "a😀b"


def test_atob_btoa(guest: Guest) -> None:
    out = guest.run(
        """
        const errs = [];
        for (const bad of ['a', 'ab=c', '€']) { try { atob(bad); } catch (e) { errs.push(e.name); } }
        try { btoa('€'); } catch (e) { errs.push(e.name + ':' + (e instanceof DOMException)); }
        return [btoa('hello'), atob(' aGVs bG8= '), atob('YQ'), btoa(''), errs];
        """
    )
    assert out == [
        "aGVsbG8=",
        "hello",
        "a",
        "",
        ["InvalidCharacterError"] * 3 + ["InvalidCharacterError:true"],
    ]
