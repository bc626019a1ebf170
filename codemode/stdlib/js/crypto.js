// crypto, Crypto, SubtleCrypto, CryptoKey (Web Cryptography API, https://w3c.github.io/webcrypto/).
// - getRandomValues / randomUUID draw from a ChaCha20 generator keyed with host.seed (256 bits of
//   OS entropy, fresh per isolate), with fast key erasure: every request re-keys the generator
//   from its own output first, so earlier outputs cannot be recomputed from a later state.
// - subtle: digest (SHA-1, SHA-256, SHA-384, SHA-512, written here in JS) and HMAC
//   (importKey raw/jwk, generateKey, sign, verify, exportKey raw/jwk). Any other algorithm or
//   method rejects with NotSupportedError.
(host) => {
  'use strict';
  const INTERNAL = Symbol.for('codemode.stdlib.internal');
  const { DOMException } = host.require('domexception');
  const U8 = Uint8Array, I32 = Int32Array, U32 = Uint32Array;
  const isView = ArrayBuffer.isView;
  const PromiseCtor = Promise;
  const freeze = Object.freeze;

  // ---- ChaCha20 CSPRNG ------------------------------------------------------------------------

  const seedHex = String(host.seed);
  if (!/^[0-9a-fA-F]{64}$/.test(seedHex)) throw new TypeError('host.seed must be 64 hex characters');
  const key = new U32(8);
  for (let i = 0; i < 8; i++) {
    // little-endian words of the 32 seed bytes
    let w = 0;
    for (let b = 3; b >= 0; b--) w = (w << 8) | parseInt(seedHex.substr((i * 4 + b) * 2, 2), 16);
    key[i] = w >>> 0;
  }
  let nonce = 0; // a fresh nonce per request (the key changes anyway)
  const state = new U32(16), work = new U32(16);

  const rotl = (x, n) => (x << n) | (x >>> (32 - n));
  function quarter(x, a, b, c, d) {
    x[a] = (x[a] + x[b]) >>> 0; x[d] = rotl(x[d] ^ x[a], 16) >>> 0;
    x[c] = (x[c] + x[d]) >>> 0; x[b] = rotl(x[b] ^ x[c], 12) >>> 0;
    x[a] = (x[a] + x[b]) >>> 0; x[d] = rotl(x[d] ^ x[a], 8) >>> 0;
    x[c] = (x[c] + x[d]) >>> 0; x[b] = rotl(x[b] ^ x[c], 7) >>> 0;
  }
  function chachaBlock(counter, out, off) {
    state[0] = 0x61707865; state[1] = 0x3320646e; state[2] = 0x79622d32; state[3] = 0x6b206574;
    for (let i = 0; i < 8; i++) state[4 + i] = key[i];
    state[12] = counter; state[13] = nonce; state[14] = 0; state[15] = 0;
    work.set(state);
    for (let i = 0; i < 10; i++) {
      quarter(work, 0, 4, 8, 12); quarter(work, 1, 5, 9, 13); quarter(work, 2, 6, 10, 14); quarter(work, 3, 7, 11, 15);
      quarter(work, 0, 5, 10, 15); quarter(work, 1, 6, 11, 12); quarter(work, 2, 7, 8, 13); quarter(work, 3, 4, 9, 14);
    }
    for (let i = 0; i < 16; i++) {
      const v = (work[i] + state[i]) >>> 0;
      out[off + 4 * i] = v & 0xff; out[off + 4 * i + 1] = (v >>> 8) & 0xff;
      out[off + 4 * i + 2] = (v >>> 16) & 0xff; out[off + 4 * i + 3] = v >>> 24;
    }
  }
  function randomBytes(n) {
    const blocks = Math.ceil((n + 32) / 64);
    const buf = new U8(blocks * 64);
    nonce = (nonce + 1) >>> 0;
    for (let i = 0; i < blocks; i++) chachaBlock(i, buf, i * 64);
    for (let i = 0; i < 8; i++) key[i] = (buf[4 * i] | (buf[4 * i + 1] << 8) | (buf[4 * i + 2] << 16) | (buf[4 * i + 3] << 24)) >>> 0;
    const out = buf.slice(32, 32 + n);
    buf.fill(0);
    return out;
  }

  // ---- SHA-1 / SHA-2 --------------------------------------------------------------------------

  const hexWords = (s) => s.split(' ').map((h) => parseInt(h, 16) | 0);
  const hexWords64 = (s) => s.split(' ').flatMap((h) => [parseInt(h.slice(0, 8), 16) | 0, parseInt(h.slice(8), 16) | 0]);
  const K256 = new I32(hexWords('428a2f98 71374491 b5c0fbcf e9b5dba5 3956c25b 59f111f1 923f82a4 ab1c5ed5 d807aa98 12835b01 243185be 550c7dc3 72be5d74 80deb1fe 9bdc06a7 c19bf174 e49b69c1 efbe4786 0fc19dc6 240ca1cc 2de92c6f 4a7484aa 5cb0a9dc 76f988da 983e5152 a831c66d b00327c8 bf597fc7 c6e00bf3 d5a79147 06ca6351 14292967 27b70a85 2e1b2138 4d2c6dfc 53380d13 650a7354 766a0abb 81c2c92e 92722c85 a2bfe8a1 a81a664b c24b8b70 c76c51a3 d192e819 d6990624 f40e3585 106aa070 19a4c116 1e376c08 2748774c 34b0bcb5 391c0cb3 4ed8aa4a 5b9cca4f 682e6ff3 748f82ee 78a5636f 84c87814 8cc70208 90befffa a4506ceb bef9a3f7 c67178f2'));
  const H256 = hexWords('6a09e667 bb67ae85 3c6ef372 a54ff53a 510e527f 9b05688c 1f83d9ab 5be0cd19');
  const K512 = new I32(hexWords64('428a2f98d728ae22 7137449123ef65cd b5c0fbcfec4d3b2f e9b5dba58189dbbc 3956c25bf348b538 59f111f1b605d019 923f82a4af194f9b ab1c5ed5da6d8118 d807aa98a3030242 12835b0145706fbe 243185be4ee4b28c 550c7dc3d5ffb4e2 72be5d74f27b896f 80deb1fe3b1696b1 9bdc06a725c71235 c19bf174cf692694 e49b69c19ef14ad2 efbe4786384f25e3 0fc19dc68b8cd5b5 240ca1cc77ac9c65 2de92c6f592b0275 4a7484aa6ea6e483 5cb0a9dcbd41fbd4 76f988da831153b5 983e5152ee66dfab a831c66d2db43210 b00327c898fb213f bf597fc7beef0ee4 c6e00bf33da88fc2 d5a79147930aa725 06ca6351e003826f 142929670a0e6e70 27b70a8546d22ffc 2e1b21385c26c926 4d2c6dfc5ac42aed 53380d139d95b3df 650a73548baf63de 766a0abb3c77b2a8 81c2c92e47edaee6 92722c851482353b a2bfe8a14cf10364 a81a664bbc423001 c24b8b70d0f89791 c76c51a30654be30 d192e819d6ef5218 d69906245565a910 f40e35855771202a 106aa07032bbd1b8 19a4c116b8d2d0c8 1e376c085141ab53 2748774cdf8eeb99 34b0bcb5e19b48a8 391c0cb3c5c95a63 4ed8aa4ae3418acb 5b9cca4f7763e373 682e6ff3d6b2b8a3 748f82ee5defb2fc 78a5636f43172f60 84c87814a1f0ab72 8cc702081a6439ec 90befffa23631e28 a4506cebde82bde9 bef9a3f7b2c67915 c67178f2e372532b ca273eceea26619c d186b8c721c0c207 eada7dd6cde0eb1e f57d4f7fee6ed178 06f067aa72176fba 0a637dc5a2c898a6 113f9804bef90dae 1b710b35131c471b 28db77f523047d84 32caab7b40c72493 3c9ebe0a15c9bebc 431d67c49c100d4c 4cc5d4becb3e42b6 597f299cfc657e2a 5fcb6fab3ad6faec 6c44198c4a475817'));
  const H512 = hexWords64('6a09e667f3bcc908 bb67ae8584caa73b 3c6ef372fe94f82b a54ff53a5f1d36f1 510e527fade682d1 9b05688c2b3e6c1f 1f83d9abfb41bd6b 5be0cd19137e2179');
  const H384 = hexWords64('cbbb9d5dc1059ed8 629a292a367cd507 9159015a3070dd17 152fecd8f70e5939 67332667ffc00b31 8eb44a8768581511 db0c2e0d64f98fa7 47b5481dbefa4fa4');

  // Message padded to `blockBytes` with a big-endian bit length in the last `lenBytes`.
  function pad(msg, blockBytes, lenBytes) {
    const len = msg.length;
    const total = Math.ceil((len + 1 + lenBytes) / blockBytes) * blockBytes;
    const buf = new U8(total);
    buf.set(msg);
    buf[len] = 0x80;
    const dv = new DataView(buf.buffer);
    dv.setUint32(total - 8, Math.floor(len / 0x20000000));
    dv.setUint32(total - 4, (len << 3) >>> 0);
    return dv;
  }

  function sha1(msg) {
    const dv = pad(msg, 64, 8);
    const h = [0x67452301, 0xefcdab89 | 0, 0x98badcfe | 0, 0x10325476, 0xc3d2e1f0 | 0];
    const w = new I32(80);
    for (let off = 0; off < dv.byteLength; off += 64) {
      for (let t = 0; t < 16; t++) w[t] = dv.getInt32(off + 4 * t);
      for (let t = 16; t < 80; t++) w[t] = rotl(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);
      let [a, b, c, d, e] = h;
      for (let t = 0; t < 80; t++) {
        let f, k;
        if (t < 20) { f = (b & c) | (~b & d); k = 0x5a827999; }
        else if (t < 40) { f = b ^ c ^ d; k = 0x6ed9eba1; }
        else if (t < 60) { f = (b & c) | (b & d) | (c & d); k = 0x8f1bbcdc | 0; }
        else { f = b ^ c ^ d; k = 0xca62c1d6 | 0; }
        const tmp = (rotl(a, 5) + f + e + k + w[t]) | 0;
        e = d; d = c; c = rotl(b, 30); b = a; a = tmp;
      }
      h[0] = (h[0] + a) | 0; h[1] = (h[1] + b) | 0; h[2] = (h[2] + c) | 0; h[3] = (h[3] + d) | 0; h[4] = (h[4] + e) | 0;
    }
    return words(h, 5);
  }

  const rotr = (x, n) => (x >>> n) | (x << (32 - n));
  function sha256(msg) {
    const dv = pad(msg, 64, 8);
    const h = H256.slice();
    const w = new I32(64);
    for (let off = 0; off < dv.byteLength; off += 64) {
      for (let t = 0; t < 16; t++) w[t] = dv.getInt32(off + 4 * t);
      for (let t = 16; t < 64; t++) {
        const x = w[t - 15], y = w[t - 2];
        const s0 = rotr(x, 7) ^ rotr(x, 18) ^ (x >>> 3);
        const s1 = rotr(y, 17) ^ rotr(y, 19) ^ (y >>> 10);
        w[t] = (w[t - 16] + s0 + w[t - 7] + s1) | 0;
      }
      let [a, b, c, d, e, f, g, hh] = h;
      for (let t = 0; t < 64; t++) {
        const S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
        const ch = (e & f) ^ (~e & g);
        const t1 = (hh + S1 + ch + K256[t] + w[t]) | 0;
        const S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
        const maj = (a & b) ^ (a & c) ^ (b & c);
        const t2 = (S0 + maj) | 0;
        hh = g; g = f; f = e; e = (d + t1) | 0; d = c; c = b; b = a; a = (t1 + t2) | 0;
      }
      h[0] = (h[0] + a) | 0; h[1] = (h[1] + b) | 0; h[2] = (h[2] + c) | 0; h[3] = (h[3] + d) | 0;
      h[4] = (h[4] + e) | 0; h[5] = (h[5] + f) | 0; h[6] = (h[6] + g) | 0; h[7] = (h[7] + hh) | 0;
    }
    return words(h, 8);
  }

  // SHA-512 on (hi, lo) pairs of 32-bit words.
  function sha512(msg, init, outWords) {
    const dv = pad(msg, 128, 16);
    const h = new I32(init);
    const w = new I32(160);
    const v = new I32(16);
    // 64-bit rotate right of (hi, lo) by n, returned as [hi, lo] through r.
    let rh = 0, rl = 0;
    const rot = (hi, lo, n) => {
      if (n >= 32) { const t = hi; hi = lo; lo = t; n -= 32; }
      if (n === 0) { rh = hi; rl = lo; return; }
      rh = (hi >>> n) | (lo << (32 - n)); rl = (lo >>> n) | (hi << (32 - n));
    };
    for (let off = 0; off < dv.byteLength; off += 128) {
      for (let t = 0; t < 32; t++) w[t] = dv.getInt32(off + 4 * t);
      for (let t = 16; t < 80; t++) {
        const xh = w[2 * (t - 15)], xl = w[2 * (t - 15) + 1];
        rot(xh, xl, 1); let s0h = rh, s0l = rl;
        rot(xh, xl, 8); s0h ^= rh; s0l ^= rl;
        s0h ^= xh >>> 7; s0l ^= (xl >>> 7) | (xh << 25);
        const yh = w[2 * (t - 2)], yl = w[2 * (t - 2) + 1];
        rot(yh, yl, 19); let s1h = rh, s1l = rl;
        rot(yh, yl, 61); s1h ^= rh; s1l ^= rl;
        s1h ^= yh >>> 6; s1l ^= (yl >>> 6) | (yh << 26);
        const lo = (w[2 * (t - 16) + 1] >>> 0) + (s0l >>> 0) + (w[2 * (t - 7) + 1] >>> 0) + (s1l >>> 0);
        w[2 * t] = w[2 * (t - 16)] + s0h + w[2 * (t - 7)] + s1h + Math.floor(lo / 0x100000000);
        w[2 * t + 1] = lo;
      }
      v.set(h);
      for (let t = 0; t < 80; t++) {
        const ah = v[0], al = v[1], bh = v[2], bl = v[3], ch = v[4], cl = v[5], dh = v[6], dl = v[7];
        const eh = v[8], el = v[9], fh = v[10], fl = v[11], gh = v[12], gl = v[13], hh = v[14], hl = v[15];
        rot(eh, el, 14); let S1h = rh, S1l = rl;
        rot(eh, el, 18); S1h ^= rh; S1l ^= rl;
        rot(eh, el, 41); S1h ^= rh; S1l ^= rl;
        const chh = (eh & fh) ^ (~eh & gh), chl = (el & fl) ^ (~el & gl);
        const t1l = (hl >>> 0) + (S1l >>> 0) + (chl >>> 0) + (K512[2 * t + 1] >>> 0) + (w[2 * t + 1] >>> 0);
        const t1h = (hh + S1h + chh + K512[2 * t] + w[2 * t] + Math.floor(t1l / 0x100000000)) | 0;
        rot(ah, al, 28); let S0h = rh, S0l = rl;
        rot(ah, al, 34); S0h ^= rh; S0l ^= rl;
        rot(ah, al, 39); S0h ^= rh; S0l ^= rl;
        const mjh = (ah & bh) ^ (ah & ch) ^ (bh & ch), mjl = (al & bl) ^ (al & cl) ^ (bl & cl);
        const t2l = (S0l >>> 0) + (mjl >>> 0);
        const t2h = (S0h + mjh) | 0; // t2l's carry is taken below
        v[14] = gh; v[15] = gl; v[12] = fh; v[13] = fl; v[10] = eh; v[11] = el;
        const newEl = (dl >>> 0) + (t1l % 0x100000000);
        v[8] = (dh + t1h + Math.floor(newEl / 0x100000000)) | 0; v[9] = newEl;
        v[6] = ch; v[7] = cl; v[4] = bh; v[5] = bl; v[2] = ah; v[3] = al;
        const newAl = (t1l % 0x100000000) + t2l;
        v[0] = (t1h + t2h + Math.floor(newAl / 0x100000000)) | 0; v[1] = newAl;
      }
      for (let i = 0; i < 16; i += 2) {
        const lo = (h[i + 1] >>> 0) + (v[i + 1] >>> 0);
        h[i] = h[i] + v[i] + Math.floor(lo / 0x100000000);
        h[i + 1] = lo;
      }
    }
    return words(h, outWords);
  }

  function words(h, n) {
    const out = new U8(n * 4);
    const dv = new DataView(out.buffer);
    for (let i = 0; i < n; i++) dv.setInt32(4 * i, h[i]);
    return out;
  }

  const HASHES = {
    'SHA-1': { fn: sha1, block: 64, bits: 160 },
    'SHA-256': { fn: sha256, block: 64, bits: 256 },
    'SHA-384': { fn: (m) => sha512(m, H384, 12), block: 128, bits: 384 },
    'SHA-512': { fn: (m) => sha512(m, H512, 16), block: 128, bits: 512 },
  };

  function hmac(hashName, keyBytes, data) {
    const { fn, block } = HASHES[hashName];
    let k = keyBytes.length > block ? fn(keyBytes) : keyBytes;
    const padded = new U8(block);
    padded.set(k);
    const inner = new U8(block + data.length);
    const outer = new U8(block + HASHES[hashName].bits / 8);
    for (let i = 0; i < block; i++) { inner[i] = padded[i] ^ 0x36; outer[i] = padded[i] ^ 0x5c; }
    inner.set(data, block);
    outer.set(fn(inner), block);
    k = null;
    return fn(outer);
  }

  // ---- WebIDL-ish helpers ---------------------------------------------------------------------

  const notSupported = (what) => new DOMException(`${what} is not supported by this runtime`, 'NotSupportedError');
  // WebIDL "get a copy of the bytes held by the buffer source": a copy taken now (later writes
  // and a later detach do not reach it); a detached buffer holds no bytes. The intrinsic getters
  // are used, so a view subclass overriding buffer/byteOffset/byteLength changes nothing.
  const getter = (proto, key) => Object.getOwnPropertyDescriptor(proto, key).get;
  const TypedArrayProto = Object.getPrototypeOf(U8.prototype);
  const taBuffer = getter(TypedArrayProto, 'buffer'), taOffset = getter(TypedArrayProto, 'byteOffset');
  const taLength = getter(TypedArrayProto, 'byteLength'), taName = getter(TypedArrayProto, Symbol.toStringTag);
  const dvBuffer = getter(DataView.prototype, 'buffer');
  const abLength = getter(ArrayBuffer.prototype, 'byteLength'), abDetached = getter(ArrayBuffer.prototype, 'detached');
  const isArrayBuffer = (v) => { try { abLength.call(v); return true; } catch { return false; } };
  const isDetached = (b) => { try { return abDetached.call(b); } catch { return false; } }; // shared: never
  const isDataView = (v) => { try { dvBuffer.call(v); return true; } catch { return false; } };
  function bufferSource(data, what) {
    if (isView(data)) {
      if (isDataView(data)) {
        if (isDetached(dvBuffer.call(data))) return new U8(0);
        // byteLength/byteOffset of a DataView throw when it is out of bounds: no bytes then.
        try { return new U8(dvBuffer.call(data), data.byteOffset, data.byteLength).slice(); } catch { return new U8(0); }
      }
      const buffer = taBuffer.call(data);
      if (isDetached(buffer)) return new U8(0);
      return new U8(buffer, taOffset.call(data), taLength.call(data)).slice();
    }
    if (isArrayBuffer(data)) return isDetached(data) ? new U8(0) : new U8(data).slice();
    throw new TypeError(`Failed to execute '${what}' on 'SubtleCrypto': The provided value is not of type '(ArrayBuffer or ArrayBufferView)'.`);
  }
  // "Normalize an algorithm": the name member is read once; the members a particular
  // algorithm needs (hash, length) are read from the caller's object when that algorithm asks.
  function normalize(algorithm) {
    if (typeof algorithm === 'string') return { name: algorithm };
    if (algorithm === null || typeof algorithm !== 'object') throw new TypeError("Algorithm: the 'name' member is required.");
    const name = algorithm.name;
    if (name === undefined) throw new TypeError("Algorithm: the 'name' member is required.");
    return { name: String(name), get hash() { return algorithm.hash; }, get length() { return algorithm.length; } };
  }
  function hashName(algorithm) {
    const given = normalize(algorithm).name;
    const name = given.toUpperCase();
    if (!(name in HASHES)) throw notSupported(`Hash algorithm '${given}'`);
    return name;
  }
  const isHmac = (alg) => String(normalize(alg).name).toUpperCase() === 'HMAC';
  const toBuffer = (u8) => u8.buffer.byteLength === u8.byteLength ? u8.buffer : u8.slice().buffer;
  const b64url = (bytes) => host.require('base64')[INTERNAL].encode(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  const fromB64url = (s) => {
    const b = host.require('base64')[INTERNAL].forgivingDecode(String(s).replace(/-/g, '+').replace(/_/g, '/'));
    if (b === null) throw new DOMException('The JWK member "k" is not valid base64url.', 'DataError');
    return b;
  };
  // An async method: run the body now, settle with its value or its exception.
  const settle = (fn) => { try { return PromiseCtor.resolve(fn()); } catch (e) { return PromiseCtor.reject(e); } };

  // ---- CryptoKey ------------------------------------------------------------------------------

  const ILLEGAL = {};
  class CryptoKey {
    #type; #extractable; #algorithm; #usages; #secret;
    constructor(k = undefined, type, extractable, algorithm, usages, secret) {
      if (k !== ILLEGAL) throw new TypeError('Illegal constructor');
      this.#type = type; this.#extractable = extractable;
      this.#algorithm = freeze({ ...algorithm, hash: freeze({ ...algorithm.hash }) });
      this.#usages = freeze(usages.slice()); this.#secret = secret;
    }
    get type() { return this.#type; }
    get extractable() { return this.#extractable; }
    get algorithm() { return this.#algorithm; }
    get usages() { return this.#usages; }
    static _secret(key) { return key.#secret; }
    static _is(key) { return key !== null && typeof key === 'object' && #secret in key; }
  }
  const secretOf = CryptoKey._secret, isKey = CryptoKey._is;
  delete CryptoKey._secret; delete CryptoKey._is;
  Object.defineProperty(CryptoKey.prototype, Symbol.toStringTag, { value: 'CryptoKey', configurable: true });

  const HMAC_USAGES = ['sign', 'verify'];
  function hmacKey(alg, bytes, extractable, usages) {
    const hash = hashName(alg.hash === undefined ? (() => { throw new TypeError("HmacImportParams: the 'hash' member is required."); })() : alg.hash);
    const list = Array.from(usages, String);
    for (const u of list) if (!HMAC_USAGES.includes(u)) throw new DOMException(`Cannot create a key using the specified key usage '${u}'.`, 'SyntaxError');
    if (list.length === 0) throw new DOMException('Usages cannot be empty when creating a key.', 'SyntaxError');
    let length = bytes.length * 8;
    if (alg.length !== undefined) {
      const l = Number(alg.length);
      if (!(l <= length && l > length - 8)) throw new DOMException('The HMAC key length does not match the key data.', 'DataError');
      length = l;
    }
    if (length === 0) throw new DOMException('HMAC key data must not be empty.', 'DataError');
    const ordered = HMAC_USAGES.filter((u) => list.includes(u));
    return new CryptoKey(ILLEGAL, 'secret', !!extractable, { name: 'HMAC', length, hash: { name: hash } }, ordered, bytes);
  }
  function checkKey(key, alg, usage) {
    if (!isKey(key)) throw new TypeError("parameter 2 is not of type 'CryptoKey'.");
    if (!isHmac(alg) || key.algorithm.name !== 'HMAC') throw new DOMException('The requested operation is not valid for the provided key.', 'InvalidAccessError');
    if (!key.usages.includes(usage)) throw new DOMException(`The key does not allow the '${usage}' usage.`, 'InvalidAccessError');
  }

  class SubtleCrypto {
    constructor(k = undefined) { if (k !== ILLEGAL) throw new TypeError('Illegal constructor'); }
    digest(algorithm, data) {
      return settle(() => {
        // The bytes are copied before the algorithm is read (Web Crypto, digest() steps 2-3):
        // an algorithm whose getter detaches or rewrites the buffer does not change the input.
        const bytes = bufferSource(data, 'digest');
        const name = hashName(algorithm);
        return toBuffer(HASHES[name].fn(bytes));
      });
    }
    importKey(format, keyData, algorithm, extractable, keyUsages) {
      return settle(() => {
        const alg = normalize(algorithm);
        if (!isHmac(alg)) throw notSupported(`Algorithm '${alg.name}'`);
        if (format === 'raw') return hmacKey(alg, bufferSource(keyData, 'importKey'), extractable, keyUsages);
        if (format === 'jwk') {
          if (keyData === null || typeof keyData !== 'object' || keyData.kty !== 'oct') throw new DOMException("The JWK 'kty' member was not 'oct'.", 'DataError');
          if (keyData.ext === false && extractable) throw new DOMException("The JWK 'ext' member was false but the key is extractable.", 'DataError');
          return hmacKey(alg, fromB64url(keyData.k), extractable, keyUsages);
        }
        throw notSupported(`Key format '${format}'`);
      });
    }
    exportKey(format, key) {
      return settle(() => {
        if (!isKey(key)) throw new TypeError("parameter 2 is not of type 'CryptoKey'.");
        if (!key.extractable) throw new DOMException('The key is not extractable.', 'InvalidAccessError');
        const secret = secretOf(key);
        if (format === 'raw') return toBuffer(secret.slice());
        if (format === 'jwk') {
          return { kty: 'oct', k: b64url(secret), alg: 'HS' + key.algorithm.hash.name.slice(4),
            key_ops: key.usages.slice(), ext: true };
        }
        throw notSupported(`Key format '${format}'`);
      });
    }
    generateKey(algorithm, extractable, keyUsages) {
      return settle(() => {
        const alg = normalize(algorithm);
        if (!isHmac(alg)) throw notSupported(`Algorithm '${alg.name}'`);
        const hash = hashName(alg.hash);
        const bits = alg.length === undefined ? HASHES[hash].block * 8 : Number(alg.length);
        if (!(bits > 0)) throw new DOMException('The HMAC key length must be positive.', 'OperationError');
        const bytes = randomBytes(Math.ceil(bits / 8));
        return hmacKey({ ...alg, length: bits }, bytes, extractable, keyUsages);
      });
    }
    sign(algorithm, key, data) {
      return settle(() => {
        checkKey(key, algorithm, 'sign');
        return toBuffer(hmac(key.algorithm.hash.name, secretOf(key), bufferSource(data, 'sign')));
      });
    }
    verify(algorithm, key, signature, data) {
      return settle(() => {
        checkKey(key, algorithm, 'verify');
        const sig = bufferSource(signature, 'verify');
        const mac = hmac(key.algorithm.hash.name, secretOf(key), bufferSource(data, 'verify'));
        if (sig.length !== mac.length) return false;
        let diff = 0;
        for (let i = 0; i < mac.length; i++) diff |= mac[i] ^ sig[i];
        return diff === 0;
      });
    }
  }
  for (const name of ['encrypt', 'decrypt', 'deriveBits', 'deriveKey', 'wrapKey', 'unwrapKey']) {
    Object.defineProperty(SubtleCrypto.prototype, name, {
      value: { [name]() { return PromiseCtor.reject(notSupported(`SubtleCrypto.${name}()`)); } }[name],
      writable: true, configurable: true, enumerable: true,
    });
  }
  Object.defineProperty(SubtleCrypto.prototype, Symbol.toStringTag, { value: 'SubtleCrypto', configurable: true });

  // ---- Crypto ---------------------------------------------------------------------------------

  // getRandomValues accepts the integer typed arrays only (by their [[TypedArrayName]], which
  // a subclass or an own Symbol.toStringTag does not change).
  const INTEGER_ARRAYS = new Set(['Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array',
    'Int32Array', 'Uint32Array', 'BigInt64Array', 'BigUint64Array']);
  const MAX_RANDOM_BYTES = 65536;
  const subtle = new SubtleCrypto(ILLEGAL);
  const hex = (b) => (b < 16 ? '0' : '') + b.toString(16);

  class Crypto {
    constructor(k = undefined) { if (k !== ILLEGAL) throw new TypeError('Illegal constructor'); }
    get subtle() { return subtle; }
    getRandomValues(array) {
      if (!isView(array)) throw new TypeError("Failed to execute 'getRandomValues' on 'Crypto': parameter 1 is not of type 'ArrayBufferView'.");
      const name = isDataView(array) ? 'DataView' : taName.call(array);
      if (!INTEGER_ARRAYS.has(name)) {
        throw new DOMException(`Failed to execute 'getRandomValues' on 'Crypto': The provided ArrayBufferView is of type '${name}', which is not an integer array type; pass an Int8/16/32, Uint8/16/32, Uint8Clamped or BigInt64/BigUint64 array.`, 'TypeMismatchError');
      }
      const length = taLength.call(array);
      if (length > MAX_RANDOM_BYTES) {
        throw new DOMException(`Failed to execute 'getRandomValues' on 'Crypto': The ArrayBufferView's byte length (${length}) exceeds the number of bytes of entropy available via this API (${MAX_RANDOM_BYTES}); fill it in slices of at most ${MAX_RANDOM_BYTES} bytes.`, 'QuotaExceededError');
      }
      if (length > 0) new U8(taBuffer.call(array), taOffset.call(array), length).set(randomBytes(length));
      return array;
    }
    randomUUID() {
      const b = randomBytes(16);
      b[6] = (b[6] & 0x0f) | 0x40;
      b[8] = (b[8] & 0x3f) | 0x80;
      let s = '';
      for (let i = 0; i < 16; i++) s += (i === 4 || i === 6 || i === 8 || i === 10 ? '-' : '') + hex(b[i]);
      return s;
    }
  }
  Object.defineProperty(Crypto.prototype, Symbol.toStringTag, { value: 'Crypto', configurable: true });

  return {
    crypto: new Crypto(ILLEGAL), Crypto, SubtleCrypto, CryptoKey,
    [INTERNAL]: { randomBytes, digest: (name, bytes) => HASHES[name].fn(bytes) },
  };
}
