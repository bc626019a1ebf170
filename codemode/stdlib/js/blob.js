// Blob and File (File API, https://w3c.github.io/FileAPI/). A Blob holds its bytes in memory.
(host) => {
  'use strict';
  const INTERNAL = Symbol.for('codemode.stdlib.internal');
  const enc = host.require('encoding')[INTERNAL];
  const U8 = Uint8Array;
  const isView = ArrayBuffer.isView;
  const abByteLength = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'byteLength').get;
  const isArrayBuffer = (v) => { try { abByteLength.call(v); return true; } catch { return false; } };
  const inspectCustom = Symbol.for('nodejs.util.inspect.custom');

  const normalizeType = (t) => {
    const s = String(t);
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x20 || c > 0x7e) return '';
    }
    return s.toLowerCase();
  };

  function concat(chunks, total) {
    const out = new U8(total);
    let o = 0;
    for (const c of chunks) { out.set(c, o); o += c.length; }
    return out;
  }

  function processParts(parts, endings) {
    const chunks = [];
    let total = 0;
    if (parts === undefined) return new U8(0);
    if (parts === null || typeof parts !== 'object' || typeof parts[Symbol.iterator] !== 'function') {
      throw new TypeError("Failed to construct 'Blob': The provided value cannot be converted to a sequence.");
    }
    for (const part of parts) {
      let bytes;
      if (isView(part)) bytes = new U8(part.buffer, part.byteOffset, part.byteLength).slice();
      else if (isArrayBuffer(part)) bytes = new U8(part).slice();
      else if (part instanceof Blob) bytes = bytesOf(part);
      else {
        let s = String(part).toWellFormed();
        if (endings === 'native') s = s.replace(/\r\n?/g, '\n');
        bytes = enc.utf8Encode(s);
      }
      chunks.push(bytes);
      total += bytes.length;
    }
    return chunks.length === 1 ? chunks[0] : concat(chunks, total);
  }

  const ILLEGAL = {};
  let bytesOf;

  class Blob {
    #bytes; #type;
    constructor(blobParts = undefined, options = undefined) {
      if (blobParts === ILLEGAL) { this.#bytes = options.bytes; this.#type = options.type; return; }
      const opts = options == null ? {} : options;
      if (typeof opts !== 'object' && typeof opts !== 'function') throw new TypeError("Failed to construct 'Blob': The provided value is not of type 'BlobPropertyBag'.");
      const endings = opts.endings === undefined ? 'transparent' : String(opts.endings);
      if (endings !== 'transparent' && endings !== 'native') throw new TypeError(`Failed to construct 'Blob': The provided value '${endings}' is not a valid enum value of type EndingType.`);
      this.#bytes = processParts(blobParts, endings);
      this.#type = opts.type === undefined ? '' : normalizeType(opts.type);
    }
    get size() { return this.#bytes.length; }
    get type() { return this.#type; }
    slice(start = undefined, end = undefined, contentType = undefined) {
      const size = this.#bytes.length;
      const rel = (v, dflt) => {
        if (v === undefined) return dflt;
        const n = Math.trunc(Number(v)) || 0;
        return n < 0 ? Math.max(size + n, 0) : Math.min(n, size);
      };
      const from = rel(start, 0), to = rel(end, size);
      const span = Math.max(to - from, 0);
      const type = contentType === undefined ? '' : normalizeType(contentType);
      return new Blob(ILLEGAL, { bytes: this.#bytes.subarray(from, from + span), type });
    }
    text() { return Promise.resolve(enc.utf8Decode(this.#bytes)); }
    arrayBuffer() { return Promise.resolve(this.#bytes.slice().buffer); }
    bytes() { return Promise.resolve(this.#bytes.slice()); }
    stream() {
      const { ReadableStream } = host.require('streams');
      const bytes = this.#bytes;
      let offset = 0;
      return new ReadableStream({
        type: 'bytes',
        pull(controller) {
          if (offset >= bytes.length) { controller.close(); return; }
          const end = Math.min(offset + 65536, bytes.length);
          controller.enqueue(bytes.slice(offset, end));
          offset = end;
        },
      });
    }
    [inspectCustom](depth, options, inspect) {
      return `${this[Symbol.toStringTag]} ${inspect({ size: this.size, type: this.type }, options)}`;
    }
    static _bytes(blob) { return blob.#bytes; }
    static _is(v) { return v !== null && typeof v === 'object' && #bytes in v; }
  }
  bytesOf = Blob._bytes;
  const isBlob = Blob._is;
  delete Blob._bytes; delete Blob._is;
  Object.defineProperty(Blob.prototype, inspectCustom, { enumerable: false });
  Object.defineProperty(Blob.prototype, Symbol.toStringTag, { value: 'Blob', configurable: true });

  class File extends Blob {
    #name; #lastModified;
    constructor(fileBits, fileName, options = undefined) {
      if (arguments.length < 2) throw new TypeError(`Failed to construct 'File': 2 arguments required, but only ${arguments.length} present.`);
      super(fileBits, options);
      this.#name = String(fileName).toWellFormed();
      const lm = options == null || options.lastModified === undefined ? Date.now() : Number(options.lastModified);
      this.#lastModified = Number.isFinite(lm) ? Math.trunc(lm) : 0;
    }
    get name() { return this.#name; }
    get lastModified() { return this.#lastModified; }
    get webkitRelativePath() { return ''; }
    [inspectCustom](depth, options, inspect) {
      return `File ${inspect({ size: this.size, type: this.type, name: this.name, lastModified: this.lastModified }, options)}`;
    }
    static _is(v) { return v !== null && typeof v === 'object' && #name in v; }
  }
  const isFile = File._is;
  delete File._is;
  Object.defineProperty(File.prototype, inspectCustom, { enumerable: false });
  Object.defineProperty(File.prototype, Symbol.toStringTag, { value: 'File', configurable: true });

  const fromBytes = (bytes, type) => new Blob(ILLEGAL, { bytes, type: normalizeType(type) });
  const clone = (blob) => isFile(blob)
    ? new File([blob], blob.name, { type: blob.type, lastModified: blob.lastModified })
    : fromBytes(bytesOf(blob), blob.type);

  return {
    Blob, File,
    [INTERNAL]: { bytesOf, isBlob, isFile, fromBytes, clone },
  };
}
