"""crypto: CSPRNG, randomUUID, subtle.digest and HMAC, checked against Python's hashlib/hmac."""

from __future__ import annotations

import hashlib
import hmac
import json
import re

from tests.stdlib.conftest import Guest

MESSAGES = ["", "abc", "a" * 55, "a" * 56, "a" * 64, "a" * 111, "a" * 112, "a" * 128, "é😀" * 300]
ALGS = {"SHA-1": "sha1", "SHA-256": "sha256", "SHA-384": "sha384", "SHA-512": "sha512"}


def test_digest_and_hmac_match_python(guest: Guest) -> None:
    out = guest.run(
        f"""
        const msgs = {json.dumps(MESSAGES)}, algs = {json.dumps(list(ALGS))};
        const te = new TextEncoder();
        const hex = (b) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, '0')).join('');
        const out = [];
        for (const m of msgs) for (const alg of algs) {{
          const key = await crypto.subtle.importKey('raw', te.encode('key' + msgs.indexOf(m) + 'x'.repeat(msgs.indexOf(m) * 20)),
                                                    {{ name: 'HMAC', hash: alg }}, false, ['sign', 'verify']);
          const sig = await crypto.subtle.sign('HMAC', key, te.encode(m));
          out.push([hex(await crypto.subtle.digest(alg, te.encode(m))), hex(sig),
                    await crypto.subtle.verify('HMAC', key, sig, te.encode(m)),
                    await crypto.subtle.verify('HMAC', key, sig, te.encode(m + 'x'))]);
        }}
        return out;
        """
    )
    i = 0
    for n, m in enumerate(MESSAGES):
        for py in ALGS.values():
            digest, sig, ok, bad = out[i]
            i += 1
            data = m.encode()
            assert digest == hashlib.new(py, data).hexdigest()
            assert sig == hmac.new(f"key{n}{'x' * (n * 20)}".encode(), data, py).hexdigest()
            assert ok is True and bad is False


def test_random_values_and_uuid(guest: Guest) -> None:
    out = guest.run(
        """
        const a = crypto.getRandomValues(new Uint8Array(32));
        const b = crypto.getRandomValues(new Uint8Array(32));
        const same = crypto.getRandomValues(new Uint16Array(4));
        const errs = [];
        for (const f of [() => crypto.getRandomValues(new Uint8Array(65537)),
                         () => crypto.getRandomValues(new Float32Array(1)),
                         () => crypto.getRandomValues([1, 2])]) {
          try { f(); errs.push('no'); } catch (e) { errs.push(e.name); }
        }
        const big = crypto.getRandomValues(new Uint8Array(65536));
        let zeros = 0; for (const x of big) if (x === 0) zeros++;
        return { a: Array.from(a), b: Array.from(b), len: same.length, errs,
                 uuids: [crypto.randomUUID(), crypto.randomUUID()], zeros,
                 tag: Object.prototype.toString.call(crypto) };
        """
    )
    assert out["a"] != out["b"] and len(out["a"]) == 32 and out["len"] == 4
    assert out["errs"] == ["QuotaExceededError", "TypeMismatchError", "TypeError"]
    pattern = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
    assert all(pattern.match(u) for u in out["uuids"]) and out["uuids"][0] != out["uuids"][1]
    assert 100 < out["zeros"] < 420  # about 256 expected
    assert out["tag"] == "[object Crypto]"


def test_isolates_differ(guest: Guest) -> None:
    from codemode.conformance import isolate, run_async

    with isolate() as other:
        theirs = run_async(other, "return crypto.randomUUID();")
    assert guest.run("return crypto.randomUUID();") != theirs


def test_keys(guest: Guest) -> None:
    out = guest.run(
        """
        const k = await crypto.subtle.importKey('raw', new Uint8Array([1, 2, 3]), { name: 'HMAC', hash: { name: 'SHA-256' } }, true, ['verify', 'sign']);
        const raw = Array.from(new Uint8Array(await crypto.subtle.exportKey('raw', k)));
        const jwk = await crypto.subtle.exportKey('jwk', k);
        const back = await crypto.subtle.importKey('jwk', jwk, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
        const gen = await crypto.subtle.generateKey({ name: 'HMAC', hash: 'SHA-512' }, false, ['sign']);
        const errs = [];
        for (const p of [crypto.subtle.exportKey('raw', back), crypto.subtle.digest('MD5', new Uint8Array()),
                         crypto.subtle.encrypt({ name: 'AES-GCM' }, k, new Uint8Array()),
                         crypto.subtle.sign('HMAC', gen, 'not a buffer'),
                         crypto.subtle.importKey('raw', new Uint8Array([1]), { name: 'HMAC', hash: 'SHA-1' }, false, ['encrypt'])]) {
          errs.push(await p.then(() => 'no', (e) => e.name));
        }
        return { type: k.type, alg: k.algorithm, usages: k.usages, ext: k.extractable, raw, jwk,
                 backExt: back.extractable, genLen: gen.algorithm.length, errs,
                 tag: Object.prototype.toString.call(k), illegal: (() => { try { new CryptoKey(); } catch (e) { return e.name; } })() };
        """
    )
    assert out == {
        "type": "secret",
        "alg": {"name": "HMAC", "length": 24, "hash": {"name": "SHA-256"}},
        "usages": ["sign", "verify"],
        "ext": True,
        "raw": [1, 2, 3],
        "jwk": {"kty": "oct", "k": "AQID", "alg": "HS256", "key_ops": ["sign", "verify"], "ext": True},
        "backExt": False,
        "genLen": 1024,
        "errs": ["InvalidAccessError", "NotSupportedError", "NotSupportedError", "TypeError", "SyntaxError"],
        "tag": "[object CryptoKey]",
        "illegal": "TypeError",
    }


def test_get_random_values_errors_follow_web_crypto(guest: Guest) -> None:
    # Web Crypto getRandomValues: not an integer typed array -> TypeMismatchError (a DataView
    # and the float arrays are ArrayBufferViews, so they pass WebIDL and fail here); more than
    # 65,536 bytes -> QuotaExceededError; not an ArrayBufferView at all -> TypeError (WebIDL).
    out = guest.run(
        """
        const name = (f) => { try { f(); return 'ok'; } catch (e) { return `${e.name}:${e instanceof DOMException}:${e.code}`; } };
        const views = [new DataView(new ArrayBuffer(4)), new Float32Array(1), new Float64Array(1)];
        if (typeof Float16Array === 'function') views.push(new Float16Array(1));
        class Spoof extends Float64Array { get [Symbol.toStringTag]() { return 'Uint8Array'; } }
        views.push(new Spoof(1));
        const mismatch = views.map((v) => name(() => crypto.getRandomValues(v)));
        const quota = [new Uint8Array(65537), new Uint32Array(16385), new BigInt64Array(8193)]
          .map((v) => name(() => crypto.getRandomValues(v)));
        const edge = [new Uint8Array(65536), new Int32Array(16384), new BigUint64Array(8192), new Uint8ClampedArray(0)]
          .map((v) => name(() => crypto.getRandomValues(v)));
        const typeErrors = [new ArrayBuffer(8), [1, 2], 7, null].map((v) => name(() => crypto.getRandomValues(v)));
        const sub = new (class extends Uint16Array {})(4);
        return { mismatch, quota, edge, typeErrors, sameObject: crypto.getRandomValues(sub) === sub };
        """
    )
    assert set(out["mismatch"]) == {"TypeMismatchError:true:17"}
    assert out["quota"] == ["QuotaExceededError:true:22"] * 3
    assert out["edge"] == ["ok"] * 4
    assert out["typeErrors"] == ["TypeError:false:undefined"] * 4
    assert out["sameObject"] is True


def test_digest_copies_the_bytes_at_the_call(guest: Guest) -> None:
    # digest() step 2 copies the data before step 3 reads the algorithm: a name getter that
    # detaches or rewrites the buffer, or a write after the call, does not change the input;
    # a buffer already detached holds no bytes (the digest of the empty string).
    out = guest.run(
        """
        const hex = (b) => Array.from(new Uint8Array(b), (x) => x.toString(16).padStart(2, '0')).join('');
        const abc = () => new TextEncoder().encode('abc');
        const a = abc();
        const detachInGetter = crypto.subtle.digest({ get name() { a.buffer.transfer(); return 'SHA-256'; } }, a);
        const b = abc();
        const rewriteInGetter = crypto.subtle.digest({ get name() { b.fill(0); return 'SHA-256'; } }, b);
        const c = abc();
        const writeAfter = crypto.subtle.digest('SHA-256', c.buffer);
        c[0] = 0;
        const d = abc();
        d.buffer.transfer();
        const detachedBefore = crypto.subtle.digest('SHA-256', d);
        const e = abc().buffer;
        const dv = new DataView(e);
        e.transfer();
        const detachedView = crypto.subtle.digest('SHA-256', dv);
        return [hex(await detachInGetter), hex(await rewriteInGetter), hex(await writeAfter),
                hex(await detachedBefore), hex(await detachedView), a.buffer.detached];
        """
    )
    abc, empty = hashlib.sha256(b"abc").hexdigest(), hashlib.sha256(b"").hexdigest()
    assert out == [abc, abc, abc, empty, empty, True]
