// atob and btoa (HTML Standard, https://html.spec.whatwg.org/#atob), with the
// forgiving-base64 decode of https://infra.spec.whatwg.org/#forgiving-base64-decode.
(host) => {
  'use strict';
  const { DOMException } = host.require('domexception');
  const fromCharCode = String.fromCharCode;
  const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
  const VALUE = new Int16Array(128).fill(-1);
  for (let i = 0; i < 64; i++) VALUE[ALPHABET.charCodeAt(i)] = i;

  const invalid = (msg) => new DOMException(msg, 'InvalidCharacterError');

  // Decode to an array of byte values, or null on failure (shared with fetch's data: URLs).
  function forgivingDecode(input) {
    let data = '';
    for (let i = 0; i < input.length; i++) {
      const c = input.charCodeAt(i);
      if (c === 0x09 || c === 0x0a || c === 0x0c || c === 0x0d || c === 0x20) continue;
      data += input[i];
    }
    let len = data.length;
    if (len % 4 === 0 && len > 0 && data.charCodeAt(len - 1) === 0x3d) {
      len--;
      if (data.charCodeAt(len - 1) === 0x3d) len--;
    }
    if (len % 4 === 1) return null;
    const out = new Uint8Array((len * 3) >> 2);
    let buffer = 0, bits = 0, o = 0;
    for (let i = 0; i < len; i++) {
      const c = data.charCodeAt(i);
      const v = c < 128 ? VALUE[c] : -1;
      if (v < 0) return null;
      buffer = (buffer << 6) | v;
      bits += 6;
      if (bits >= 8) { bits -= 8; out[o++] = (buffer >> bits) & 0xff; }
    }
    return out;
  }

  function encode(bytes) {
    let out = '';
    const n = bytes.length;
    let i = 0;
    for (; i + 2 < n; i += 3) {
      const v = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
      out += ALPHABET[v >> 18] + ALPHABET[(v >> 12) & 63] + ALPHABET[(v >> 6) & 63] + ALPHABET[v & 63];
    }
    if (i < n) {
      const v = (bytes[i] << 16) | (i + 1 < n ? bytes[i + 1] << 8 : 0);
      out += ALPHABET[v >> 18] + ALPHABET[(v >> 12) & 63] + (i + 1 < n ? ALPHABET[(v >> 6) & 63] : '=') + '=';
    }
    return out;
  }

  function atob(data) {
    if (arguments.length === 0) throw new TypeError("Failed to execute 'atob': 1 argument required, but only 0 present.");
    const bytes = forgivingDecode(String(data));
    if (bytes === null) throw invalid("Failed to execute 'atob': The string to be decoded is not correctly encoded.");
    let out = '';
    for (let i = 0; i < bytes.length; i += 8192) out += fromCharCode.apply(null, bytes.subarray(i, i + 8192));
    return out;
  }

  function btoa(data) {
    if (arguments.length === 0) throw new TypeError("Failed to execute 'btoa': 1 argument required, but only 0 present.");
    const s = String(data);
    const bytes = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c > 0xff) throw invalid("Failed to execute 'btoa': The string to be encoded contains characters outside of the Latin1 range.");
      bytes[i] = c;
    }
    return encode(bytes);
  }

  return { atob, btoa, [Symbol.for('codemode.stdlib.internal')]: { forgivingDecode, encode } };
}
