// Headers, Request, Response and fetch (Fetch Standard, https://fetch.spec.whatwg.org/).
// fetch() builds a Request, serves data: URLs inside the isolate, and hands http(s) requests to
// host.fetch as plain data ({method, url, headers, body, redirect}); the host follows redirects
// and applies the execution's outbound policy. A host rejection becomes fetch's TypeError with the
// same message. There is no CORS, no cache, no cookies and no forbidden-header filtering (as in
// other server runtimes): the host side owns the network.
(host) => {
  'use strict';
  const INTERNAL = Symbol.for('codemode.stdlib.internal');
  const { URL, URLSearchParams } = host.require('url');
  const urls = host.require('url')[INTERNAL];
  const blobs = host.require('blob')[INTERNAL];
  const enc = host.require('encoding')[INTERNAL];
  const hostFetch = host.fetch;
  const PromiseCtor = Promise;
  const inspectCustom = Symbol.for('nodejs.util.inspect.custom');
  const isView = ArrayBuffer.isView;
  const abByteLength = Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'byteLength').get;
  const isArrayBuffer = (v) => { try { abByteLength.call(v); return true; } catch { return false; } };
  const lazy = (id) => { let m = null; return () => (m === null ? (m = host.require(id)) : m); };
  const streamsMod = lazy('streams');
  const formdataMod = lazy('formdata');
  const abortMod = lazy('abort');
  const ILLEGAL = {};

  // ---- lexical helpers ----------------------------------------------------------------------

  const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
  const isToken = (s) => TOKEN.test(s);
  const HTTP_WS = /^[\t\n\r ]+|[\t\n\r ]+$/g;
  const normalizeValue = (v) => v.replace(HTTP_WS, '');
  // WebIDL ByteString: ToString (a Symbol throws), then every code unit at most 0xFF.
  const toByteString = (v, what) => {
    if (typeof v === 'symbol') throw new TypeError(`${what}: a Symbol cannot be converted to a ByteString.`);
    const s = String(v);
    for (let i = 0; i < s.length; i++) {
      if (s.charCodeAt(i) > 0xff) throw new TypeError(`${what}: '${s}' is not a valid ByteString.`);
    }
    return s;
  };

  // ---- MIME types (MIME Sniffing Standard) --------------------------------------------------

  const QUOTED_OK = (c) => c === 0x09 || (c >= 0x20 && c <= 0x7e) || (c >= 0x80 && c <= 0xff);
  function parseMimeType(input) {
    const s = input.replace(HTTP_WS, '');
    let p = 0;
    const until = (stop) => { const start = p; while (p < s.length && !stop.includes(s[p])) p++; return s.slice(start, p); };
    const type = until('/');
    if (type === '' || !isToken(type) || p >= s.length) return null;
    p++;
    let subtype = until(';').replace(/[\t\n\r ]+$/, '');
    if (subtype === '' || !isToken(subtype)) return null;
    const record = { type: type.toLowerCase(), subtype: subtype.toLowerCase(), parameters: new Map() };
    while (p < s.length) {
      p++; // ';'
      while (p < s.length && '\t\n\r '.includes(s[p])) p++;
      const name = until(';=').toLowerCase();
      if (p < s.length) {
        if (s[p] === ';') continue;
        p++; // '='
      }
      if (p >= s.length) break;
      let value;
      if (s[p] === '"') {
        value = '';
        p++;
        for (;;) {
          value += until('"\\');
          if (p >= s.length) break;
          const q = s[p];
          p++;
          if (q === '\\') {
            if (p >= s.length) { value += '\\'; break; }
            value += s[p]; p++;
          } else break;
        }
        until(';');
      } else {
        value = until(';').replace(/[\t\n\r ]+$/, '');
        if (value === '') continue;
      }
      let ok = name !== '' && isToken(name) && !record.parameters.has(name);
      for (let i = 0; ok && i < value.length; i++) ok = QUOTED_OK(value.charCodeAt(i));
      if (ok) record.parameters.set(name, value);
    }
    return record;
  }
  function serializeMimeType(r) {
    let out = `${r.type}/${r.subtype}`;
    for (const [name, value] of r.parameters) {
      out += `;${name}=`;
      out += value !== '' && isToken(value) ? value : `"${value.replace(/(["\\])/g, '\\$1')}"`;
    }
    return out;
  }

  // ---- Headers ------------------------------------------------------------------------------

  class Headers {
    #list = []; // [lowercase name, value]
    #guard = 'none';
    #sorted = null; // "sort and combine" of #list, dropped on every change
    constructor(init = undefined) {
      if (init === ILLEGAL) return;
      if (init !== undefined) fill(this, convertHeadersInit(init));
    }
    #check(name, value) {
      if (!isToken(name)) throw new TypeError(`Headers: '${name}' is not a valid HTTP header field name.`);
      if (value !== undefined && /[\0\r\n]/.test(value)) throw new TypeError(`Headers: '${value}' is not a valid HTTP header field value.`);
      if (this.#guard === 'immutable') throw new TypeError('Headers are immutable.');
    }
    append(name, value) {
      if (arguments.length < 2) throw new TypeError("Failed to execute 'append' on 'Headers': 2 arguments required.");
      name = toByteString(name, 'Headers.append'); value = normalizeValue(toByteString(value, 'Headers.append'));
      this.#check(name, value);
      this.#list.push([name.toLowerCase(), value]);
      this.#sorted = null;
    }
    delete(name) {
      name = toByteString(name, 'Headers.delete');
      this.#check(name);
      const lower = name.toLowerCase();
      this.#list = this.#list.filter(([n]) => n !== lower);
      this.#sorted = null;
    }
    get(name) {
      name = toByteString(name, 'Headers.get');
      if (!isToken(name)) throw new TypeError(`Headers: '${name}' is not a valid HTTP header field name.`);
      const lower = name.toLowerCase();
      const values = this.#list.filter(([n]) => n === lower).map(([, v]) => v);
      return values.length ? values.join(', ') : null;
    }
    getSetCookie() { return this.#list.filter(([n]) => n === 'set-cookie').map(([, v]) => v); }
    has(name) {
      name = toByteString(name, 'Headers.has');
      if (!isToken(name)) throw new TypeError(`Headers: '${name}' is not a valid HTTP header field name.`);
      const lower = name.toLowerCase();
      return this.#list.some(([n]) => n === lower);
    }
    set(name, value) {
      if (arguments.length < 2) throw new TypeError("Failed to execute 'set' on 'Headers': 2 arguments required.");
      name = toByteString(name, 'Headers.set'); value = normalizeValue(toByteString(value, 'Headers.set'));
      this.#check(name, value);
      const lower = name.toLowerCase();
      this.#sorted = null;
      const i = this.#list.findIndex(([n]) => n === lower);
      if (i === -1) { this.#list.push([lower, value]); return; }
      this.#list[i] = [lower, value];
      this.#list = this.#list.filter(([n], j) => j <= i || n !== lower);
    }
    forEach(callback, thisArg = undefined) {
      if (typeof callback !== 'function') throw new TypeError("Failed to execute 'forEach' on 'Headers': parameter 1 is not of type 'Function'.");
      // WebIDL: the pairs are read again after every call, so the callback's changes are seen.
      for (let i = 0; ; i++) {
        const pairs = sortAndCombine(this);
        if (i >= pairs.length) return;
        callback.call(thisArg, pairs[i][1], pairs[i][0], this);
      }
    }
    [inspectCustom](depth, options, inspect) {
      const obj = {};
      for (const [n, v] of sortAndCombine(this)) obj[n] = v;
      return `Headers ${inspect(obj, options)}`;
    }
    // Fetch "sort and combine": names in order, each once with its values joined, except
    // set-cookie, which appears once per value.
    static _sorted(h) {
      if (h.#sorted !== null) return h.#sorted;
      const names = [...new Set(h.#list.map(([n]) => n))].sort();
      const out = [];
      for (const n of names) {
        if (n === 'set-cookie') for (const v of h.getSetCookie()) out.push([n, v]);
        else out.push([n, h.get(n)]);
      }
      return (h.#sorted = out);
    }
    static _guard(h, g) { h.#guard = g; }
    static _list(h) { return h.#list; }
    static _is(h) { return h !== null && typeof h === 'object' && #list in h; }
  }
  const setGuard = Headers._guard, headerList = Headers._list, sortAndCombine = Headers._sorted, isHeaders = Headers._is;
  delete Headers._guard; delete Headers._list; delete Headers._sorted; delete Headers._is;

  // The pair iterator of WebIDL: %HeadersIteratorPrototype% (whose prototype is
  // %IteratorPrototype%) holds `next`; an iterator is a target, a kind and an index, and each
  // `next` reads the target's pairs afresh, so changes made while iterating are seen.
  const IteratorPrototype = Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]()));
  const iterators = new WeakMap();
  const HeadersIteratorPrototype = Object.create(IteratorPrototype, {
    next: {
      value: {
        next() {
          const it = this !== null && typeof this === 'object' ? iterators.get(this) : undefined;
          if (it === undefined) throw new TypeError("Illegal invocation: 'next' called on an object that is not a Headers Iterator.");
          const pairs = sortAndCombine(it.target);
          if (it.index >= pairs.length) return { value: undefined, done: true };
          const [name, value] = pairs[it.index++];
          return { value: it.kind === 'key' ? name : it.kind === 'value' ? value : [name, value], done: false };
        },
      }.next,
      writable: true, enumerable: true, configurable: true,
    },
    [Symbol.toStringTag]: { value: 'Headers Iterator', configurable: true },
  });
  const iterate = (target, kind) => {
    if (!isHeaders(target)) throw new TypeError('Illegal invocation: not a Headers');
    const it = Object.create(HeadersIteratorPrototype);
    iterators.set(it, { target, kind, index: 0 });
    return it;
  };
  const iterationMethods = {
    entries() { return iterate(this, 'key+value'); },
    keys() { return iterate(this, 'key'); },
    values() { return iterate(this, 'value'); },
  };
  for (const name of ['entries', 'keys', 'values']) {
    Object.defineProperty(Headers.prototype, name, { value: iterationMethods[name], writable: true, enumerable: true, configurable: true });
  }
  // WebIDL operations are enumerable; @@iterator is entries itself, not enumerable.
  for (const name of ['append', 'delete', 'get', 'getSetCookie', 'has', 'set', 'forEach']) {
    Object.defineProperty(Headers.prototype, name, { enumerable: true });
  }
  Object.defineProperty(Headers.prototype, Symbol.iterator, { value: Headers.prototype.entries, writable: true, configurable: true });
  Object.defineProperty(Headers.prototype, inspectCustom, { enumerable: false });
  Object.defineProperty(Headers.prototype, Symbol.toStringTag, { value: 'Headers', configurable: true });

  // HeadersInit = (sequence<sequence<ByteString>> or record<ByteString, ByteString>), converted
  // as WebIDL says, so a Proxy sees exactly these operations: one [[Get]] of @@iterator; then
  // either the iterator protocol (each item an iterable of ByteStrings), or [[OwnPropertyKeys]]
  // and, per key, [[GetOwnProperty]] and (if enumerable) [[Get]]. Names and values are checked
  // afterwards, when the converted list fills the Headers.
  const INIT_TYPE = "Failed to construct 'Headers': The provided value is not of type '(record<ByteString, ByteString> or sequence<sequence<ByteString>>)'; pass an object of name/value strings or a list of [name, value] pairs.";
  const isObject = (v) => v !== null && (typeof v === 'object' || typeof v === 'function');
  function sequenceFrom(iterable, method, convert) {
    const iterator = Reflect.apply(method, iterable, []);
    if (!isObject(iterator)) throw new TypeError("Failed to construct 'Headers': the iterator is not an object.");
    const next = iterator.next;
    const out = [];
    for (;;) {
      const step = Reflect.apply(next, iterator, []);
      if (!isObject(step)) throw new TypeError("Failed to construct 'Headers': the iterator result is not an object.");
      if (step.done) return out;
      out.push(convert(step.value));
    }
  }
  const iteratorMethod = (v) => {
    const method = v[Symbol.iterator];
    if (method === undefined || method === null) return undefined;
    if (typeof method !== 'function') throw new TypeError("Failed to construct 'Headers': the value's @@iterator is not a function.");
    return method;
  };
  const toPair = (item) => {
    const method = isObject(item) ? iteratorMethod(item) : undefined;
    if (method === undefined) throw new TypeError("Failed to construct 'Headers': each header must be a [name, value] pair.");
    return sequenceFrom(item, method, (x) => toByteString(x, 'Headers'));
  };
  function convertHeadersInit(init) {
    if (!isObject(init)) throw new TypeError(INIT_TYPE);
    const method = iteratorMethod(init);
    if (method !== undefined) return { pairs: sequenceFrom(init, method, toPair), record: false };
    const pairs = [];
    for (const key of Reflect.ownKeys(init)) {
      const desc = Reflect.getOwnPropertyDescriptor(init, key);
      if (desc !== undefined && desc.enumerable) {
        const name = toByteString(key, 'Headers');
        pairs.push([name, toByteString(Reflect.get(init, key), 'Headers')]);
      }
    }
    return { pairs, record: true };
  }
  function fill(headers, { pairs, record }) {
    for (const pair of pairs) {
      if (!record && pair.length !== 2) throw new TypeError(`Failed to construct 'Headers': a header must be a [name, value] pair, got ${pair.length} item(s).`);
      headers.append(pair[0], pair[1]);
    }
  }
  const newHeaders = (list, guard) => {
    const h = new Headers(ILLEGAL);
    for (const [n, v] of list) headerList(h).push([String(n).toLowerCase(), String(v)]);
    setGuard(h, guard);
    return h;
  };
  const copyHeaders = (h) => newHeaders(headerList(h), 'none');

  // ---- bodies -------------------------------------------------------------------------------

  // A body is { bytes: Uint8Array|null, stream: ReadableStream|null, used: boolean }.
  function extractBody(init, keepalive) {
    void keepalive;
    if (typeof init === 'string') return { body: { bytes: enc.utf8Encode(init), stream: null, used: false }, type: 'text/plain;charset=UTF-8' };
    if (init instanceof URLSearchParams) return { body: { bytes: enc.utf8Encode(init.toString()), stream: null, used: false }, type: 'application/x-www-form-urlencoded;charset=UTF-8' };
    if (blobs.isBlob(init)) return { body: { bytes: blobs.bytesOf(init), stream: null, used: false }, type: init.type || null };
    if (isView(init)) return { body: { bytes: new Uint8Array(init.buffer, init.byteOffset, init.byteLength).slice(), stream: null, used: false }, type: null };
    if (isArrayBuffer(init)) return { body: { bytes: new Uint8Array(init).slice(), stream: null, used: false }, type: null };
    if (init !== null && typeof init === 'object' && init.constructor && init[Symbol.toStringTag] === 'FormData' && init instanceof formdataMod().FormData) {
      const { bytes, type } = formdataMod()[INTERNAL].serializeMultipart(init);
      return { body: { bytes, stream: null, used: false }, type };
    }
    if (init !== null && typeof init === 'object' && init[Symbol.toStringTag] === 'ReadableStream' && init instanceof streamsMod().ReadableStream) {
      if (streamsMod()[INTERNAL].isLocked(init) || streamsMod()[INTERNAL].isDisturbed(init)) throw new TypeError('The body stream is locked or disturbed: pass a stream nothing has read yet.');
      return { body: { bytes: null, stream: init, used: false }, type: null };
    }
    return extractBody(String(init));
  }
  // The body's stream, made from its bytes the first time a program asks for it. A body already
  // read shows a closed stream that is disturbed and locked, as the one the standard reads is.
  function bodyStream(body) {
    if (body.stream === null) {
      const S = streamsMod();
      const bytes = body.used ? null : body.bytes;
      body.stream = new S.ReadableStream({
        type: 'bytes',
        start(c) { if (bytes !== null && bytes.length) c.enqueue(bytes.slice()); c.close(); },
      });
      if (body.used) { S[INTERNAL].setDisturbed(body.stream); new S.ReadableStreamDefaultReader(body.stream); }
    }
    return body.stream;
  }
  const bodyUsed = (body) => body !== null && (body.used || (body.stream !== null && streamsMod()[INTERNAL].isDisturbed(body.stream)));
  // Fetch "unusable": disturbed, or its stream locked to a reader.
  const unusable = (body) => bodyUsed(body) || (body !== null && body.stream !== null && streamsMod()[INTERNAL].isLocked(body.stream));
  const UNUSABLE = 'Body is unusable: it was already read or its stream is locked to a reader; clone() the Request or Response before reading it twice.';

  // Fetch "fully read body" with plain callbacks: no promise is resolved with an intermediate
  // object, so a program's Object.prototype.then never sees the bytes in transit.
  function readBodyBytes(body, success, failure) {
    if (body === null) { success(new Uint8Array(0)); return; }
    if (unusable(body)) { failure(new TypeError(UNUSABLE)); return; }
    if (body.stream === null) {
      const bytes = body.bytes;
      body.used = true;
      body.bytes = null;
      success(bytes);
      return;
    }
    streamsMod()[INTERNAL].readAllBytes(body.stream, success, failure);
  }
  // Fetch "consume body": a promise for convert(bytes), rejected on a wrong receiver or an
  // unusable body (a TypeError), or when convert throws.
  function consumeBody(self, getState, convert) {
    return new PromiseCtor((resolve, reject) => {
      const s = getState(self);
      readBodyBytes(s.body, (bytes) => { try { resolve(convert(bytes, s)); } catch (e) { reject(e); } }, reject);
    });
  }
  function cloneBody(body) {
    if (body === null) return null;
    if (unusable(body)) throw new TypeError('Body is unusable: it was already read or its stream is locked to a reader, so it cannot be cloned; clone() before reading.');
    if (body.stream === null) return { bytes: body.bytes, stream: null, used: false };
    const [a, b] = streamsMod()[INTERNAL].tee(body.stream);
    body.stream = a;
    return { bytes: null, stream: b, used: false };
  }

  // The Body mixin, installed on Request.prototype and Response.prototype.
  function installBody(proto, getState) {
    const consume = (self, convert) => consumeBody(self, getState, convert);
    const defs = {
      body: { get() { const s = getState(this); return s.body === null ? null : bodyStream(s.body); } },
      bodyUsed: { get() { return bodyUsed(getState(this).body); } },
      arrayBuffer: { value() { return consume(this, (b) => b.slice().buffer); } },
      bytes: { value() { return consume(this, (b) => b.slice()); } },
      text: { value() { return consume(this, (b) => enc.utf8Decode(b)); } },
      json: { value() { return consume(this, (b) => JSON.parse(enc.utf8Decode(b))); } },
      blob: {
        value() { return consume(this, (b, s) => blobs.fromBytes(b.slice(), s.headers.get('content-type') || '')); },
      },
      formData: {
        value() {
          return consume(this, (b, s) => {
            const mime = parseMimeType(s.headers.get('content-type') || '');
            const { FormData } = formdataMod();
            if (mime && mime.type === 'multipart' && mime.subtype === 'form-data' && mime.parameters.has('boundary')) {
              return formdataMod()[INTERNAL].parseMultipart(b, mime.parameters.get('boundary'));
            }
            if (mime && mime.type === 'application' && mime.subtype === 'x-www-form-urlencoded') {
              const fd = new FormData();
              for (const [n, v] of urls.parseForm(enc.utf8DecodeNoBOM(b))) fd.append(n, v);
              return fd;
            }
            throw new TypeError('Could not parse content as FormData.');
          });
        },
      },
    };
    for (const [k, d] of Object.entries(defs)) {
      Object.defineProperty(proto, k, { ...d, configurable: true, enumerable: true, ...(d.value ? { writable: true } : {}) });
    }
  }

  // ---- Request ------------------------------------------------------------------------------

  const METHODS = new Map(['DELETE', 'GET', 'HEAD', 'OPTIONS', 'POST', 'PUT'].map((m) => [m, m]));
  const enumOf = (value, allowed, what) => {
    const s = String(value);
    if (!allowed.includes(s)) throw new TypeError(`Failed to construct 'Request': The provided value '${s}' is not a valid enum value of type ${what}.`);
    return s;
  };

  const requestState = new WeakMap();
  const stateOf = (map, what) => (obj) => {
    const s = obj !== null && typeof obj === 'object' ? map.get(obj) : undefined;
    if (s === undefined) throw new TypeError(`Illegal invocation: not a ${what}`);
    return s;
  };
  const reqState = stateOf(requestState, 'Request');

  class Request {
    constructor(input, init = undefined) {
      if (arguments.length === 0) throw new TypeError("Failed to construct 'Request': 1 argument required, but only 0 present.");
      const opts = init == null ? {} : init;
      let base;
      if (input instanceof Request) {
        base = reqState(input);
      } else {
        let url;
        try { url = new URL(input); } catch { throw new TypeError(`Failed to construct 'Request': Invalid URL '${String(input)}'.`); }
        if (url.username !== '' || url.password !== '') throw new TypeError(`Failed to construct 'Request': Request cannot be constructed from a URL that includes credentials: ${url.href}`);
        base = null;
        input = url.href;
      }
      const s = {
        method: base ? base.method : 'GET',
        url: base ? base.url : input,
        headers: null,
        body: null,
        redirect: base ? base.redirect : 'follow',
        mode: base ? base.mode : 'cors',
        credentials: base ? base.credentials : 'same-origin',
        cache: base ? base.cache : 'default',
        referrer: base ? base.referrer : 'about:client',
        referrerPolicy: base ? base.referrerPolicy : '',
        integrity: base ? base.integrity : '',
        keepalive: base ? base.keepalive : false,
        signal: null,
      };
      if (opts.method !== undefined) {
        const m = toByteString(opts.method, 'Request');
        if (!isToken(m)) throw new TypeError(`Failed to construct 'Request': '${m}' is not a valid HTTP method.`);
        const upper = m.toUpperCase();
        if (upper === 'CONNECT' || upper === 'TRACE' || upper === 'TRACK') throw new TypeError(`Failed to construct 'Request': '${m}' HTTP method is unsupported.`);
        s.method = METHODS.get(upper) || m;
      }
      if (opts.redirect !== undefined) s.redirect = enumOf(opts.redirect, ['follow', 'error', 'manual'], 'RequestRedirect');
      if (opts.mode !== undefined) {
        s.mode = enumOf(opts.mode, ['navigate', 'same-origin', 'no-cors', 'cors'], 'RequestMode');
        if (s.mode === 'navigate') throw new TypeError("Failed to construct 'Request': Cannot construct a Request with a RequestInit whose mode member is set as 'navigate'.");
      }
      if (opts.credentials !== undefined) s.credentials = enumOf(opts.credentials, ['omit', 'same-origin', 'include'], 'RequestCredentials');
      if (opts.cache !== undefined) s.cache = enumOf(opts.cache, ['default', 'no-store', 'reload', 'no-cache', 'force-cache', 'only-if-cached'], 'RequestCache');
      if (opts.referrer !== undefined) s.referrer = opts.referrer === '' ? '' : String(opts.referrer);
      if (opts.referrerPolicy !== undefined) s.referrerPolicy = String(opts.referrerPolicy);
      if (opts.integrity !== undefined) s.integrity = String(opts.integrity);
      if (opts.keepalive !== undefined) s.keepalive = !!opts.keepalive;
      // Signal: follow the given one (or the input request's).
      const { AbortSignal } = abortMod();
      let parent = base ? base.signal : null;
      if (opts.signal !== undefined) {
        if (opts.signal !== null && !abortMod()[INTERNAL].isSignal(opts.signal)) throw new TypeError("Failed to construct 'Request': member signal is not of type AbortSignal.");
        parent = opts.signal;
      }
      s.signal = parent ? AbortSignal.any([parent]) : abortMod()[INTERNAL].newSignal();
      // Headers.
      s.headers = opts.headers !== undefined ? new Headers(opts.headers) : base ? copyHeaders(base.headers) : new Headers();
      // Body.
      const inputBody = base ? base.body : null;
      if ((opts.body !== undefined && opts.body !== null) || inputBody !== null) {
        if (s.method === 'GET' || s.method === 'HEAD') throw new TypeError("Failed to construct 'Request': Request with GET/HEAD method cannot have body.");
      }
      if (opts.body !== undefined && opts.body !== null) {
        const { body, type } = extractBody(opts.body, s.keepalive);
        if (body.stream !== null && opts.duplex !== 'half') throw new TypeError("Failed to construct 'Request': The duplex member must be specified for a request with a streaming body");
        s.body = body;
        if (type !== null && !s.headers.has('content-type')) s.headers.append('content-type', type);
      } else if (inputBody !== null) {
        if (unusable(inputBody)) throw new TypeError("Failed to construct 'Request': Cannot construct a Request with a Request object whose body was already read or is locked.");
        s.body = inputBody;
        if (input instanceof Request) {
          // The input request's body is taken over: reading it there now fails.
          reqState(input).body = { bytes: null, stream: null, used: true };
        }
      }
      requestState.set(this, s);
    }
    get method() { return reqState(this).method; }
    get url() { return reqState(this).url; }
    get headers() { return reqState(this).headers; }
    get destination() { return ''; }
    get referrer() {
      const r = reqState(this).referrer;
      return r === 'about:client' ? 'about:client' : r;
    }
    get referrerPolicy() { return reqState(this).referrerPolicy; }
    get mode() { return reqState(this).mode; }
    get credentials() { return reqState(this).credentials; }
    get cache() { return reqState(this).cache; }
    get redirect() { return reqState(this).redirect; }
    get integrity() { return reqState(this).integrity; }
    get keepalive() { return reqState(this).keepalive; }
    get isReloadNavigation() { return false; }
    get isHistoryNavigation() { return false; }
    get signal() { return reqState(this).signal; }
    get duplex() { return 'half'; }
    clone() {
      const s = reqState(this);
      const copy = Object.create(Request.prototype);
      const headers = copyHeaders(s.headers);
      requestState.set(copy, { ...s, headers, body: cloneBody(s.body), signal: abortMod().AbortSignal.any([s.signal]) });
      return copy;
    }
    [inspectCustom](depth, options, inspect) {
      const s = reqState(this);
      return `Request ${inspect({ method: s.method, url: s.url, headers: s.headers, body: s.body === null ? null : this.body, bodyUsed: this.bodyUsed, redirect: s.redirect, signal: s.signal }, options)}`;
    }
  }
  installBody(Request.prototype, reqState);
  Object.defineProperty(Request.prototype, inspectCustom, { enumerable: false });
  Object.defineProperty(Request.prototype, Symbol.toStringTag, { value: 'Request', configurable: true });

  // ---- Response -----------------------------------------------------------------------------

  const responseState = new WeakMap();
  const resState = stateOf(responseState, 'Response');
  const NULL_BODY = new Set([101, 103, 204, 205, 304]);
  const REDIRECT = new Set([301, 302, 303, 307, 308]);

  function initResponse(s, init, bodyWithType) {
    const opts = init == null ? {} : init;
    const status = opts.status === undefined ? 200 : Number(opts.status);
    if (!Number.isInteger(status) || status < 200 || status > 599) throw new RangeError(`Failed to construct 'Response': The status provided (${opts.status}) is outside the range [200, 599].`);
    const statusText = opts.statusText === undefined ? '' : toByteString(opts.statusText, 'Response');
    if (!/^[\t\x20-\x7e\x80-\xff]*$/.test(statusText)) throw new TypeError(`Failed to construct 'Response': Invalid statusText`);
    s.status = status;
    s.statusText = statusText;
    if (opts.headers !== undefined) s.headers = new Headers(opts.headers);
    if (bodyWithType !== null) {
      if (NULL_BODY.has(status)) throw new TypeError(`Failed to construct 'Response': Response with null body status cannot have body`);
      s.body = bodyWithType.body;
      if (bodyWithType.type !== null && !s.headers.has('content-type')) s.headers.append('content-type', bodyWithType.type);
    }
  }
  const newResponseState = () => ({ type: 'default', url: '', urlList: [], status: 200, statusText: '', headers: new Headers(), body: null, redirected: false });

  class Response {
    constructor(body = null, init = undefined) {
      const s = newResponseState();
      responseState.set(this, s);
      initResponse(s, init, body === null || body === undefined ? null : extractBody(body));
    }
    static error() {
      const r = Object.create(Response.prototype);
      const s = { ...newResponseState(), type: 'error', status: 0 };
      setGuard(s.headers, 'immutable');
      responseState.set(r, s);
      return r;
    }
    static redirect(url, status = 302) {
      let parsed;
      try { parsed = new URL(url); } catch { throw new TypeError(`Failed to execute 'redirect' on 'Response': Invalid URL '${String(url)}'.`); }
      status = Number(status);
      if (!REDIRECT.has(status)) throw new RangeError(`Failed to execute 'redirect' on 'Response': Invalid status code ${status}`);
      const r = Object.create(Response.prototype);
      const s = { ...newResponseState(), status };
      s.headers.set('location', parsed.href);
      setGuard(s.headers, 'immutable');
      responseState.set(r, s);
      return r;
    }
    static json(data, init = undefined) {
      const text = JSON.stringify(data);
      if (text === undefined) throw new TypeError("Failed to execute 'json' on 'Response': The data is not JSON serializable");
      const r = Object.create(Response.prototype);
      const s = newResponseState();
      responseState.set(r, s);
      initResponse(s, init, { body: { bytes: enc.utf8Encode(text), stream: null, used: false }, type: 'application/json' });
      return r;
    }
    get type() { return resState(this).type; }
    get url() { const u = resState(this).url; return u.includes('#') ? u.slice(0, u.indexOf('#')) : u; }
    get redirected() { return resState(this).redirected; }
    get status() { return resState(this).status; }
    get ok() { const st = resState(this).status; return st >= 200 && st <= 299; }
    get statusText() { return resState(this).statusText; }
    get headers() { return resState(this).headers; }
    clone() {
      const s = resState(this);
      const r = Object.create(Response.prototype);
      const headers = copyHeaders(s.headers);
      if (s.type === 'error' || s.headers === null) setGuard(headers, 'immutable');
      responseState.set(r, { ...s, headers, body: cloneBody(s.body) });
      return r;
    }
    [inspectCustom](depth, options, inspect) {
      const s = resState(this);
      return `Response ${inspect({ status: s.status, statusText: s.statusText, headers: s.headers, body: s.body === null ? null : this.body, bodyUsed: this.bodyUsed, ok: this.ok, redirected: s.redirected, type: s.type, url: this.url }, options)}`;
    }
  }
  installBody(Response.prototype, resState);
  Object.defineProperty(Response.prototype, inspectCustom, { enumerable: false });
  Object.defineProperty(Response.prototype, Symbol.toStringTag, { value: 'Response', configurable: true });

  // A response from the network (or a data: URL): any status, immutable headers.
  function networkResponse({ status, statusText, headers, body, url, redirected }) {
    const r = Object.create(Response.prototype);
    const s = { ...newResponseState(), type: 'basic', status, statusText: statusText || '', url: url || '',
      redirected: !!redirected, headers: newHeaders(headers, 'immutable'),
      body: body === null ? null : { bytes: body, stream: null, used: false } };
    responseState.set(r, s);
    return r;
  }

  // ---- data: URLs (Fetch Standard, "data: URL processor") -----------------------------------

  function processDataURL(href) {
    const record = urls.basicParse(href, null);
    let input = urls.serialize(record, true).slice(5);
    const comma = input.indexOf(',');
    if (comma === -1) return null;
    let mimeType = input.slice(0, comma).replace(/^[\t\n\f\r ]+|[\t\n\f\r ]+$/g, '');
    input = input.slice(comma + 1);
    let body = urls.percentDecode(input);
    const m = /;[\x20]*base64$/i.exec(mimeType);
    if (m) {
      let s = '';
      for (let i = 0; i < body.length; i++) s += String.fromCharCode(body[i]);
      body = host.require('base64')[INTERNAL].forgivingDecode(s);
      if (body === null) return null;
      mimeType = mimeType.slice(0, m.index);
    }
    if (mimeType.startsWith(';')) mimeType = 'text/plain' + mimeType;
    const parsed = parseMimeType(mimeType);
    return { type: parsed === null ? 'text/plain;charset=US-ASCII' : serializeMimeType(parsed), body: body.slice() };
  }

  // ---- fetch --------------------------------------------------------------------------------

  const networkError = (message, cause) => {
    const e = new TypeError(message);
    if (cause !== undefined) Object.defineProperty(e, 'cause', { value: cause, writable: true, configurable: true });
    return e;
  };

  async function fetchImpl(request) {
    const s = reqState(request);
    const signal = s.signal;
    if (signal.aborted) throw signal.reason;
    const url = new URL(s.url);
    const scheme = url.protocol.slice(0, -1);
    if (scheme === 'data') {
      const result = processDataURL(s.url);
      if (result === null) throw networkError('Failed to fetch: invalid data: URL.');
      return networkResponse({ status: 200, statusText: 'OK', headers: [['content-type', result.type]],
        body: s.method === 'HEAD' ? null : result.body, url: s.url });
    }
    if (scheme !== 'http' && scheme !== 'https') {
      throw networkError(`Failed to fetch: the '${scheme}:' scheme is not supported by this runtime.`);
    }
    // The request body is read with callbacks (no promise carries the bytes), then sent.
    return new PromiseCtor((resolve, reject) => {
      if (s.body === null) send(s, null, resolve, reject);
      else readBodyBytes(s.body, (bytes) => send(s, bytes, resolve, reject), reject);
    });
  }

  function send(s, bodyBytes, resolve, reject) {
    const signal = s.signal;
    const plain = {
      method: s.method,
      url: s.url,
      headers: headerList(s.headers).map(([n, v]) => [n, v]),
      body: bodyBytes,
      redirect: s.redirect,
    };
    let settled = false;
    const remove = abortMod()[INTERNAL].addAlgorithm(signal, (reason) => {
      if (settled) return;
      settled = true;
      reject(reason);
    });
    let pending;
    try { pending = Promise.resolve(hostFetch(plain)); } catch (e) { pending = Promise.reject(e); }
    pending.then((res) => {
      if (settled) return;
      settled = true;
      remove();
      const status = Number(res.status);
      const body = s.method === 'HEAD' || NULL_BODY.has(status) || res.body == null ? null
        : res.body instanceof Uint8Array ? res.body : new Uint8Array(res.body);
      resolve(networkResponse({ status, statusText: res.statusText, headers: res.headers || [], body,
        url: res.url || s.url, redirected: res.redirected }));
    }, (error) => {
      if (settled) return;
      settled = true;
      remove();
      const message = error !== null && typeof error === 'object' && 'message' in error ? String(error.message) : String(error);
      reject(networkError(message));
    });
  }

  function fetch(input, init = undefined) {
    if (arguments.length === 0) return Promise.reject(new TypeError("Failed to execute 'fetch': 1 argument required, but only 0 present."));
    let request;
    try { request = new Request(input, init); } catch (e) { return Promise.reject(e); }
    return fetchImpl(request);
  }

  return {
    Headers, Request, Response, fetch,
    [INTERNAL]: { parseMimeType, serializeMimeType, processDataURL },
  };
}
