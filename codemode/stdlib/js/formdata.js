// FormData (XMLHttpRequest Standard, https://xhr.spec.whatwg.org/#interface-formdata), plus the
// multipart/form-data serializer and parser that Request/Response bodies use.
// There is no DOM: a form element argument is refused with TypeError (as Node and Deno do).
(host) => {
  'use strict';
  const INTERNAL = Symbol.for('codemode.stdlib.internal');
  const { Blob, File } = host.require('blob');
  const blobs = host.require('blob')[INTERNAL];
  const enc = host.require('encoding')[INTERNAL];
  const toUSV = (v) => String(v).toWellFormed();
  const inspectCustom = Symbol.for('nodejs.util.inspect.custom');

  function entryValue(value, filename, argCount) {
    if (value instanceof Blob) {
      const name = argCount > 2 ? toUSV(filename) : blobs.isFile(value) ? value.name : 'blob';
      if (blobs.isFile(value) && argCount <= 2) return value;
      return new File([value], name, { type: value.type, lastModified: blobs.isFile(value) ? value.lastModified : undefined });
    }
    if (argCount > 2) throw new TypeError("Failed to execute on 'FormData': parameter 2 is not of type 'Blob'.");
    return toUSV(value);
  }

  class FormData {
    #list = [];
    constructor(form = undefined, submitter = undefined) {
      if (form !== undefined) throw new TypeError("Failed to construct 'FormData': there are no form elements in this runtime; call new FormData() without arguments.");
      void submitter;
    }
    append(name, value, filename = undefined) {
      if (arguments.length < 2) throw new TypeError("Failed to execute 'append' on 'FormData': 2 arguments required.");
      this.#list.push([toUSV(name), entryValue(value, filename, arguments.length)]);
    }
    delete(name) { name = toUSV(name); this.#list = this.#list.filter(([n]) => n !== name); }
    get(name) { name = toUSV(name); const e = this.#list.find(([n]) => n === name); return e ? e[1] : null; }
    getAll(name) { name = toUSV(name); return this.#list.filter(([n]) => n === name).map(([, v]) => v); }
    has(name) { name = toUSV(name); return this.#list.some(([n]) => n === name); }
    set(name, value, filename = undefined) {
      if (arguments.length < 2) throw new TypeError("Failed to execute 'set' on 'FormData': 2 arguments required.");
      name = toUSV(name);
      const entry = [name, entryValue(value, filename, arguments.length)];
      const i = this.#list.findIndex(([n]) => n === name);
      if (i === -1) { this.#list.push(entry); return; }
      this.#list[i] = entry;
      this.#list = this.#list.filter(([n], j) => j <= i || n !== name);
    }
    forEach(callback, thisArg = undefined) {
      if (typeof callback !== 'function') throw new TypeError("Failed to execute 'forEach' on 'FormData': parameter 1 is not of type 'Function'.");
      for (let i = 0; i < this.#list.length; i++) callback.call(thisArg, this.#list[i][1], this.#list[i][0], this);
    }
    *entries() { for (let i = 0; i < this.#list.length; i++) yield [this.#list[i][0], this.#list[i][1]]; }
    *keys() { for (let i = 0; i < this.#list.length; i++) yield this.#list[i][0]; }
    *values() { for (let i = 0; i < this.#list.length; i++) yield this.#list[i][1]; }
    [inspectCustom](depth, options, inspect) {
      return `FormData ${inspect(this.#list.map(([name, value]) => ({ name, value })), options)}`;
    }
    static _list(fd) { return fd.#list; }
  }
  const listOf = FormData._list;
  delete FormData._list;
  Object.defineProperty(FormData.prototype, Symbol.iterator, { value: FormData.prototype.entries, writable: true, configurable: true });
  Object.defineProperty(FormData.prototype, inspectCustom, { enumerable: false });
  Object.defineProperty(FormData.prototype, Symbol.toStringTag, { value: 'FormData', configurable: true });

  // ---- multipart/form-data ------------------------------------------------------------------

  const escapeName = (s) => s.replace(/\n/g, '%0A').replace(/\r/g, '%0D').replace(/"/g, '%22');
  const normalizeNewlines = (s) => s.replace(/\r(?!\n)|(?<!\r)\n/g, '\r\n');

  function serializeMultipart(fd) {
    const random = host.require('crypto')[INTERNAL].randomBytes(12);
    let boundary = '----formdata-codemode-';
    for (const b of random) boundary += (b % 36).toString(36);
    const chunks = [];
    let total = 0;
    const push = (bytes) => { chunks.push(bytes); total += bytes.length; };
    for (const [name, value] of listOf(fd)) {
      let head = `--${boundary}\r\nContent-Disposition: form-data; name="${escapeName(normalizeNewlines(name))}"`;
      if (typeof value === 'string') {
        push(enc.utf8Encode(`${head}\r\n\r\n${normalizeNewlines(value)}\r\n`));
      } else {
        head += `; filename="${escapeName(value.name)}"\r\nContent-Type: ${value.type || 'application/octet-stream'}\r\n\r\n`;
        push(enc.utf8Encode(head));
        push(blobs.bytesOf(value));
        push(enc.utf8Encode('\r\n'));
      }
    }
    push(enc.utf8Encode(`--${boundary}--\r\n`));
    const out = new Uint8Array(total);
    let o = 0;
    for (const c of chunks) { out.set(c, o); o += c.length; }
    return { bytes: out, type: `multipart/form-data; boundary=${boundary}` };
  }

  const latin1 = (bytes) => { let s = ''; for (let i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]); return s; };
  function indexOf(bytes, needle, from) {
    outer: for (let i = from; i <= bytes.length - needle.length; i++) {
      for (let j = 0; j < needle.length; j++) if (bytes[i + j] !== needle[j]) continue outer;
      return i;
    }
    return -1;
  }

  // Parse a multipart/form-data body into a FormData; throws TypeError when malformed.
  function parseMultipart(bytes, boundary) {
    const fail = () => new TypeError('Failed to parse the body as multipart/form-data.');
    const delim = enc.utf8Encode(`--${boundary}`);
    const fd = new FormData();
    let pos = indexOf(bytes, delim, 0);
    if (pos === -1) throw fail();
    pos += delim.length;
    for (;;) {
      if (bytes[pos] === 0x2d && bytes[pos + 1] === 0x2d) return fd; // closing delimiter
      if (bytes[pos] !== 0x0d || bytes[pos + 1] !== 0x0a) throw fail();
      pos += 2;
      const headerEnd = indexOf(bytes, [0x0d, 0x0a, 0x0d, 0x0a], pos);
      if (headerEnd === -1) throw fail();
      const headers = latin1(bytes.subarray(pos, headerEnd)).split('\r\n');
      let name = null, filename = null, type = '';
      for (const line of headers) {
        const colon = line.indexOf(':');
        if (colon === -1) continue;
        const key = line.slice(0, colon).trim().toLowerCase();
        const value = line.slice(colon + 1).trim();
        if (key === 'content-disposition') {
          const n = /(?:^|;)\s*name="([^"]*)"/i.exec(value);
          const f = /(?:^|;)\s*filename="([^"]*)"/i.exec(value);
          if (n) name = n[1];
          if (f) filename = f[1];
        } else if (key === 'content-type') {
          type = value;
        }
      }
      if (name === null) throw fail();
      const bodyStart = headerEnd + 4;
      const next = indexOf(bytes, enc.utf8Encode(`\r\n--${boundary}`), bodyStart);
      if (next === -1) throw fail();
      const body = bytes.slice(bodyStart, next);
      const decodeName = (s) => enc.utf8Decode(Uint8Array.from(s, (c) => c.charCodeAt(0)))
        .replace(/%0A/gi, '\n').replace(/%0D/gi, '\r').replace(/%22/g, '"');
      if (filename !== null) {
        fd.append(decodeName(name), new File([body], decodeName(filename), { type }));
      } else {
        fd.append(decodeName(name), enc.utf8Decode(body));
      }
      pos = next + 2 + delim.length;
    }
  }

  return { FormData, [INTERNAL]: { listOf, serializeMultipart, parseMultipart } };
}
