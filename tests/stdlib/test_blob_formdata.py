"""Blob, File and FormData."""

from __future__ import annotations

from tests.stdlib.conftest import Guest


def test_blob(guest: Guest) -> None:
    out = guest.run(
        """
        const b = new Blob(['héllo ', new Uint8Array([119, 111]), new Blob(['rld'])], { type: 'Text/Plain' });
        const s = b.slice(-3, undefined, 'x/y');
        const chunks = [];
        for await (const c of b.stream()) chunks.push(c.length);
        const n = new Blob(['a\\r\\nb\\rc'], { endings: 'native' });
        return [b.size, b.type, await b.text(), await s.text(), s.type,
                Array.from(await new Blob(['ab']).bytes()), (await b.arrayBuffer()).byteLength,
                chunks, await n.text(), new Blob().size, Object.prototype.toString.call(b)];
        """
    )
    assert out == [
        12,
        "text/plain",
        "héllo world",
        "rld",
        "x/y",
        [97, 98],
        12,
        [12],
        "a\nb\nc",
        0,
        "[object Blob]",
    ]


def test_file(guest: Guest) -> None:
    out = guest.run(
        """
        const f = new File(['x'], 'a.txt', { type: 'text/plain', lastModified: 42 });
        let err;
        try { new File(['x']); } catch (e) { err = e.constructor.name; }
        return [f.name, f.size, f.type, f.lastModified, f instanceof Blob, err,
                typeof new File([], 'n').lastModified];
        """
    )
    assert out == ["a.txt", 1, "text/plain", 42, True, "TypeError", "number"]


def test_formdata(guest: Guest) -> None:
    out = guest.run(
        """
        const fd = new FormData();
        fd.append('a', '1');
        fd.append('a', '2');
        fd.append('f', new Blob(['data'], { type: 'text/plain' }));
        fd.append('g', new Blob(['x']), 'named.bin');
        fd.set('b', 'only');
        const f = fd.get('f');
        let err;
        try { new FormData({}); } catch (e) { err = e.constructor.name; }
        return { all: fd.getAll('a'), fname: f.name, ftype: f.type, isFile: f instanceof File,
                 gname: fd.get('g').name, keys: [...fd.keys()], has: fd.has('b'), err };
        """
    )
    assert out == {
        "all": ["1", "2"],
        "fname": "blob",
        "ftype": "text/plain",
        "isFile": True,
        "gname": "named.bin",
        "keys": ["a", "a", "f", "g", "b"],
        "has": True,
        "err": "TypeError",
    }


def test_formdata_multipart_roundtrip(guest: Guest) -> None:
    out = guest.run(
        """
        const fd = new FormData();
        fd.append('text', 'line1\\nline2 "q"');
        fd.append('file', new File([new Uint8Array([0, 255, 10])], 'b.bin', { type: 'application/x-test' }));
        const req = new Request('https://example.com/', { method: 'POST', body: fd });
        const type = req.headers.get('content-type');
        const back = await req.formData();
        const file = back.get('file');
        const url = await new Response('a=1&b=%20x').formData().catch((e) => e.constructor.name);
        const urlenc = await new Response('a=1&b=%20x', { headers: { 'content-type': 'application/x-www-form-urlencoded' } }).formData();
        return [type.startsWith('multipart/form-data; boundary='), back.get('text'), file.name, file.type,
                Array.from(new Uint8Array(await file.arrayBuffer())), url, [...urlenc]];
        """
    )
    assert out == [
        True,
        'line1\r\nline2 "q"',
        "b.bin",
        "application/x-test",
        [0, 255, 10],
        "TypeError",
        [["a", "1"], ["b", " x"]],
    ]
