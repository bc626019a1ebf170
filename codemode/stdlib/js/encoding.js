// TextEncoder, TextDecoder, TextEncoderStream, TextDecoderStream
// (Encoding Standard, https://encoding.spec.whatwg.org/).
// Decoders: UTF-8, UTF-16LE, UTF-16BE and windows-1252; every WHATWG label of those resolves.
// Any other encoding's label (and "replacement") throws RangeError, as for an unknown label.
(host) => {
  'use strict';
  const INTERNAL = Symbol.for('codemode.stdlib.internal');
  const fromCharCode = String.fromCharCode;
  const U8 = Uint8Array;
  const isView = ArrayBuffer.isView;
  const abByteLength = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'byteLength').get;
  const sabByteLength = typeof SharedArrayBuffer === 'function'
    ? Object.getOwnPropertyDescriptor(SharedArrayBuffer.prototype, 'byteLength').get : null;

  const LABELS = new Map();
  const addLabels = (name, labels) => { for (const l of labels.split(' ')) LABELS.set(l, name); };
  addLabels('utf-8', 'unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8');
  addLabels('utf-16le', 'csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le');
  addLabels('utf-16be', 'unicodefffe utf-16be');
  addLabels('windows-1252', 'ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 ' +
    'iso-ir-100 iso8859-1 iso88591 iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii windows-1252 x-cp1252');

  // windows-1252 bytes 0x80..0x9F (the rest is ISO-8859-1).
  const CP1252 = [0x20AC, 0x81, 0x201A, 0x192, 0x201E, 0x2026, 0x2020, 0x2021, 0x2C6, 0x2030,
    0x160, 0x2039, 0x152, 0x8D, 0x17D, 0x8F, 0x90, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022, 0x2013,
    0x2014, 0x2DC, 0x2122, 0x161, 0x203A, 0x153, 0x9D, 0x17E, 0x178];

  const trimAsciiWhitespace = (s) => s.replace(/^[\t\n\f\r ]+|[\t\n\f\r ]+$/g, '');
  const getEncoding = (label) => LABELS.get(trimAsciiWhitespace(String(label)).toLowerCase()) || null;

  // BufferSource -> Uint8Array over the same memory.
  function bytesOf(input, what) {
    if (isView(input)) return new U8(input.buffer, input.byteOffset, input.byteLength);
    if (input !== null && typeof input === 'object') {
      try { abByteLength.call(input); return new U8(input); } catch { /* not an ArrayBuffer */ }
      if (sabByteLength) {
        try { sabByteLength.call(input); return new U8(input); } catch { /* not shared either */ }
      }
    }
    throw new TypeError(`Failed to execute '${what}': The provided value is not of type '(ArrayBuffer or ArrayBufferView)'.`);
  }

  // ---- UTF-8 encode -------------------------------------------------------------------------

  function utf8Length(s) {
    let n = 0;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x80) n += 1;
      else if (c < 0x800) n += 2;
      else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) { n += 4; i++; }
      else n += 3;
    }
    return n;
  }

  // Writes s (lone surrogates -> U+FFFD) into out from 0; returns {read, written}.
  function utf8Write(s, out) {
    const cap = out.length;
    let i = 0, o = 0;
    const n = s.length;
    while (i < n) {
      let c = s.charCodeAt(i);
      if (c < 0x80) {
        if (o >= cap) break;
        out[o++] = c; i++;
        continue;
      }
      let units = 1;
      if (c >= 0xd800 && c <= 0xdfff) {
        const d = i + 1 < n ? s.charCodeAt(i + 1) : 0;
        if (c <= 0xdbff && (d & 0xfc00) === 0xdc00) { c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00); units = 2; }
        else c = 0xfffd;
      }
      if (c < 0x800) {
        if (o + 2 > cap) break;
        out[o++] = 0xc0 | (c >> 6); out[o++] = 0x80 | (c & 63);
      } else if (c < 0x10000) {
        if (o + 3 > cap) break;
        out[o++] = 0xe0 | (c >> 12); out[o++] = 0x80 | ((c >> 6) & 63); out[o++] = 0x80 | (c & 63);
      } else {
        if (o + 4 > cap) break;
        out[o++] = 0xf0 | (c >> 18); out[o++] = 0x80 | ((c >> 12) & 63);
        out[o++] = 0x80 | ((c >> 6) & 63); out[o++] = 0x80 | (c & 63);
      }
      i += units;
    }
    return { read: i, written: o };
  }

  function utf8Encode(s) {
    const out = new U8(utf8Length(s));
    utf8Write(s, out);
    return out;
  }

  // ---- decoders (each: push(bytes, flush) -> string, throwing via onError when fatal) ----------

  const CHUNK = 8192;
  class Sink {
    constructor() { this.parts = ''; this.units = []; }
    add(c) {
      this.units.push(c);
      if (this.units.length >= CHUNK) this.drain();
    }
    addCodePoint(cp) {
      if (cp < 0x10000) this.add(cp);
      else { cp -= 0x10000; this.add(0xd800 + (cp >> 10)); this.add(0xdc00 + (cp & 0x3ff)); }
    }
    drain() { if (this.units.length) { this.parts += fromCharCode.apply(null, this.units); this.units = []; } }
    done() { this.drain(); return this.parts; }
  }

  class Utf8Decoder {
    constructor(fatal) { this.fatal = fatal; this.need = 0; this.seen = 0; this.cp = 0; this.lower = 0x80; this.upper = 0xbf; }
    error(sink) {
      if (this.fatal) throw new TypeError("Failed to execute 'decode' on 'TextDecoder': The encoded data was not valid for encoding utf-8");
      sink.add(0xfffd);
    }
    push(bytes, flush) {
      const sink = new Sink();
      const n = bytes.length;
      let i = 0;
      while (i < n) {
        const b = bytes[i];
        if (this.need === 0) {
          if (b < 0x80) {
            // ASCII run: copy straight through.
            let j = i;
            while (j < n && bytes[j] < 0x80) j++;
            if (j - i > 16) {
              sink.drain();
              for (let k = i; k < j; k += CHUNK) sink.parts += fromCharCode.apply(null, bytes.subarray(k, Math.min(j, k + CHUNK)));
            } else {
              for (let k = i; k < j; k++) sink.add(bytes[k]);
            }
            i = j;
            continue;
          }
          if (b >= 0xc2 && b <= 0xdf) { this.need = 1; this.cp = b & 0x1f; }
          else if (b >= 0xe0 && b <= 0xef) {
            if (b === 0xe0) this.lower = 0xa0;
            if (b === 0xed) this.upper = 0x9f;
            this.need = 2; this.cp = b & 0xf;
          } else if (b >= 0xf0 && b <= 0xf4) {
            if (b === 0xf0) this.lower = 0x90;
            if (b === 0xf4) this.upper = 0x8f;
            this.need = 3; this.cp = b & 0x7;
          } else this.error(sink);
          i++;
          continue;
        }
        if (b < this.lower || b > this.upper) {
          this.need = this.seen = this.cp = 0; this.lower = 0x80; this.upper = 0xbf;
          this.error(sink);
          continue; // reprocess this byte
        }
        this.lower = 0x80; this.upper = 0xbf;
        this.cp = (this.cp << 6) | (b & 0x3f);
        this.seen++;
        i++;
        if (this.seen === this.need) {
          sink.addCodePoint(this.cp);
          this.need = this.seen = this.cp = 0;
        }
      }
      if (flush && this.need !== 0) {
        this.need = this.seen = this.cp = 0; this.lower = 0x80; this.upper = 0xbf;
        this.error(sink);
      }
      return sink.done();
    }
  }

  class Utf16Decoder {
    constructor(fatal, bigEndian) { this.fatal = fatal; this.be = bigEndian; this.lead = -1; this.surrogate = -1; }
    error(sink) {
      if (this.fatal) throw new TypeError(`Failed to execute 'decode' on 'TextDecoder': The encoded data was not valid for encoding ${this.be ? 'utf-16be' : 'utf-16le'}`);
      sink.add(0xfffd);
    }
    push(bytes, flush) {
      const sink = new Sink();
      for (let i = 0; i < bytes.length; i++) {
        const b = bytes[i];
        if (this.lead === -1) { this.lead = b; continue; }
        const unit = this.be ? (this.lead << 8) | b : (b << 8) | this.lead;
        this.lead = -1;
        if (this.surrogate !== -1) {
          const lead = this.surrogate;
          this.surrogate = -1;
          if (unit >= 0xdc00 && unit <= 0xdfff) { sink.add(lead); sink.add(unit); continue; }
          this.error(sink);
          // fall through: the unit is processed afresh
        }
        if (unit >= 0xd800 && unit <= 0xdbff) { this.surrogate = unit; continue; }
        if (unit >= 0xdc00 && unit <= 0xdfff) { this.error(sink); continue; }
        sink.add(unit);
      }
      if (flush && (this.lead !== -1 || this.surrogate !== -1)) {
        this.lead = -1; this.surrogate = -1;
        this.error(sink);
      }
      return sink.done();
    }
  }

  class SingleByteDecoder {
    push(bytes) {
      const sink = new Sink();
      for (let i = 0; i < bytes.length; i++) {
        const b = bytes[i];
        sink.add(b >= 0x80 && b < 0xa0 ? CP1252[b - 0x80] : b);
      }
      return sink.done();
    }
  }

  const makeDecoder = (encoding, fatal) => {
    switch (encoding) {
      case 'utf-8': return new Utf8Decoder(fatal);
      case 'utf-16le': return new Utf16Decoder(fatal, false);
      case 'utf-16be': return new Utf16Decoder(fatal, true);
      default: return new SingleByteDecoder();
    }
  };

  // ---- the interfaces -----------------------------------------------------------------------

  class TextEncoder {
    get encoding() { return 'utf-8'; }
    encode(input = '') { return utf8Encode(String(input)); }
    encodeInto(source, destination) {
      if (arguments.length < 2) throw new TypeError("Failed to execute 'encodeInto' on 'TextEncoder': 2 arguments required.");
      if (!(destination instanceof U8)) throw new TypeError("Failed to execute 'encodeInto' on 'TextEncoder': parameter 2 is not of type 'Uint8Array'.");
      return utf8Write(String(source), destination);
    }
  }
  Object.defineProperty(TextEncoder.prototype, Symbol.toStringTag, { value: 'TextEncoder', configurable: true });

  class TextDecoder {
    #encoding; #fatal; #ignoreBOM; #decoder = null; #bomSeen = false; #streaming = false;
    constructor(label = 'utf-8', options = undefined) {
      const encoding = getEncoding(label);
      if (encoding === null) throw new RangeError(`Failed to construct 'TextDecoder': The encoding label provided ('${String(label)}') is invalid.`);
      const opts = options == null ? {} : options;
      this.#encoding = encoding;
      this.#fatal = !!opts.fatal;
      this.#ignoreBOM = !!opts.ignoreBOM;
    }
    get encoding() { return this.#encoding; }
    get fatal() { return this.#fatal; }
    get ignoreBOM() { return this.#ignoreBOM; }
    decode(input = undefined, options = undefined) {
      const bytes = input === undefined ? new U8(0) : bytesOf(input, "decode' on 'TextDecoder");
      const stream = !!(options != null && options.stream);
      if (!this.#streaming || this.#decoder === null) {
        this.#decoder = makeDecoder(this.#encoding, this.#fatal);
        this.#bomSeen = false;
      }
      this.#streaming = stream;
      let out;
      try {
        out = this.#decoder.push(bytes, !stream);
      } catch (error) {
        this.#decoder = null;
        this.#streaming = false;
        throw error;
      }
      if (!this.#ignoreBOM && !this.#bomSeen && out.length > 0 && this.#encoding !== 'windows-1252') {
        this.#bomSeen = true;
        if (out.charCodeAt(0) === 0xfeff) out = out.slice(1);
      }
      if (!stream) this.#decoder = null;
      return out;
    }
  }
  Object.defineProperty(TextDecoder.prototype, Symbol.toStringTag, { value: 'TextDecoder', configurable: true });

  class TextEncoderStream {
    #stream;
    constructor() {
      const { TransformStream } = host.require('streams');
      let pending = '';
      this.#stream = new TransformStream({
        transform(chunk, controller) {
          let s = pending + String(chunk);
          pending = '';
          const last = s.charCodeAt(s.length - 1);
          if (last >= 0xd800 && last <= 0xdbff) { pending = s[s.length - 1]; s = s.slice(0, -1); }
          if (s.length) controller.enqueue(utf8Encode(s));
        },
        flush(controller) { if (pending) controller.enqueue(new U8([0xef, 0xbf, 0xbd])); },
      });
    }
    get encoding() { return 'utf-8'; }
    get readable() { return this.#stream.readable; }
    get writable() { return this.#stream.writable; }
  }
  Object.defineProperty(TextEncoderStream.prototype, Symbol.toStringTag, { value: 'TextEncoderStream', configurable: true });

  class TextDecoderStream {
    #decoder; #stream;
    constructor(label = 'utf-8', options = undefined) {
      const decoder = new TextDecoder(label, options);
      const { TransformStream } = host.require('streams');
      this.#decoder = decoder;
      this.#stream = new TransformStream({
        transform(chunk, controller) {
          const s = decoder.decode(bytesOf(chunk, "TextDecoderStream' transform"), { stream: true });
          if (s) controller.enqueue(s);
        },
        flush(controller) { const s = decoder.decode(); if (s) controller.enqueue(s); },
      });
    }
    get encoding() { return this.#decoder.encoding; }
    get fatal() { return this.#decoder.fatal; }
    get ignoreBOM() { return this.#decoder.ignoreBOM; }
    get readable() { return this.#stream.readable; }
    get writable() { return this.#stream.writable; }
  }
  Object.defineProperty(TextDecoderStream.prototype, Symbol.toStringTag, { value: 'TextDecoderStream', configurable: true });

  // Shared with other modules: fast UTF-8 both ways, BufferSource coercion, label lookup.
  const utf8DecodeNoBOM = (bytes) => new Utf8Decoder(false).push(bytes, true);
  const utf8Decode = (bytes) => { // "UTF-8 decode": a leading BOM is dropped
    const s = utf8DecodeNoBOM(bytes);
    return s.charCodeAt(0) === 0xfeff ? s.slice(1) : s;
  };
  return {
    TextEncoder, TextDecoder, TextEncoderStream, TextDecoderStream,
    [INTERNAL]: { utf8Encode, utf8Decode, utf8DecodeNoBOM, bytesOf, getEncoding },
  };
}
