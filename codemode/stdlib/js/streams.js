// Streams (WHATWG Streams Standard, https://streams.spec.whatwg.org/): ReadableStream with default
// readers, tee, pipeTo/pipeThrough, async iteration and ReadableStream.from; WritableStream with
// default writers; TransformStream; CountQueuingStrategy and ByteLengthQueuingStrategy.
// `type: 'bytes'` sources are accepted and read through default readers (chunks must be
// ArrayBufferViews); BYOB readers and ReadableByteStreamController are not provided.
(host) => {
  'use strict';
  const INTERNAL = Symbol.for('codemode.stdlib.internal');
  const PromiseCtor = Promise;
  const resolved = (v) => PromiseCtor.resolve(v);
  const rejected = (e) => PromiseCtor.reject(e);
  const slot = new WeakMap();
  const $ = (obj, what) => {
    const s = obj !== null && typeof obj === 'object' ? slot.get(obj) : undefined;
    if (s === undefined || (what && s.kind !== what)) throw new TypeError(`Illegal invocation: not a ${what || 'stream object'}`);
    return s;
  };
  const deferred = () => {
    let resolve, reject;
    const promise = new PromiseCtor((a, b) => { resolve = a; reject = b; });
    promise.catch(() => {});
    return { promise, resolve, reject };
  };
  const ILLEGAL = {};
  const call = (fn, self, args) => (typeof fn === 'function' ? Reflect.apply(fn, self, args) : undefined);
  const promiseCall = (fn, self, args) => { try { return resolved(call(fn, self, args)); } catch (e) { return rejected(e); } };
  function hwmOf(strategy, dflt) {
    if (strategy == null || strategy.highWaterMark === undefined) return dflt;
    const h = Number(strategy.highWaterMark);
    if (Number.isNaN(h) || h < 0) throw new RangeError('The highWaterMark of a queuing strategy must be a non-negative number.');
    return h;
  }
  const sizeOf = (strategy) => {
    if (strategy == null || strategy.size === undefined) return null;
    if (typeof strategy.size !== 'function') throw new TypeError('The size of a queuing strategy must be a function.');
    return strategy.size;
  };

  // ---- ReadableStream -----------------------------------------------------------------------

  class ReadableStream {
    constructor(underlyingSource = undefined, strategy = undefined) {
      const src = underlyingSource == null ? {} : underlyingSource;
      const s = { kind: 'readable', state: 'readable', reader: null, storedError: undefined, disturbed: false, controller: null };
      slot.set(this, s);
      const type = src.type === undefined ? undefined : String(src.type);
      if (type !== undefined && type !== 'bytes') throw new TypeError(`Failed to construct 'ReadableStream': '${type}' is not a valid stream type.`);
      const isBytes = type === 'bytes';
      const hwm = hwmOf(strategy, isBytes ? 0 : 1);
      const size = isBytes ? null : sizeOf(strategy);
      setupReadableController(this, src, hwm, size, isBytes);
    }
    get locked() { return $(this, 'readable').reader !== null; }
    cancel(reason = undefined) {
      let s;
      try { s = $(this, 'readable'); } catch (e) { return rejected(e); }
      if (s.reader !== null) return rejected(new TypeError('Cannot cancel a locked ReadableStream.'));
      return readableCancel(this, reason);
    }
    getReader(options = undefined) {
      $(this, 'readable');
      if (options != null && options.mode !== undefined) {
        if (String(options.mode) === 'byob') throw new TypeError('BYOB readers are not supported by this runtime; use a default reader.');
        throw new TypeError(`'${options.mode}' is not a valid reader mode.`);
      }
      return new ReadableStreamDefaultReader(this);
    }
    pipeThrough(transform, options = undefined) {
      $(this, 'readable');
      if (transform == null || !(transform.readable instanceof ReadableStream) || !(transform.writable instanceof WritableStream)) {
        throw new TypeError("Failed to execute 'pipeThrough' on 'ReadableStream': the transform must have readable and writable streams.");
      }
      if (this.locked) throw new TypeError('Cannot pipe a locked ReadableStream.');
      if (transform.writable.locked) throw new TypeError('Cannot pipe to a locked WritableStream.');
      pipe(this, transform.writable, options).catch(() => {});
      return transform.readable;
    }
    pipeTo(destination, options = undefined) {
      try {
        $(this, 'readable');
        if (!(destination instanceof WritableStream)) throw new TypeError("Failed to execute 'pipeTo' on 'ReadableStream': parameter 1 is not of type 'WritableStream'.");
        if (this.locked) throw new TypeError('Cannot pipe a locked ReadableStream.');
        if (destination.locked) throw new TypeError('Cannot pipe to a locked WritableStream.');
      } catch (e) { return rejected(e); }
      return pipe(this, destination, options);
    }
    tee() { return tee(this); }
    values(options = undefined) {
      const preventCancel = !!(options != null && options.preventCancel);
      return iterate(this.getReader(), preventCancel);
    }
    static from(asyncIterable) {
      if (asyncIterable instanceof ReadableStream) return asyncIterable;
      let it;
      const asyncMethod = asyncIterable != null ? asyncIterable[Symbol.asyncIterator] : undefined;
      if (typeof asyncMethod === 'function') it = asyncMethod.call(asyncIterable);
      else {
        const syncMethod = asyncIterable != null ? asyncIterable[Symbol.iterator] : undefined;
        if (typeof syncMethod !== 'function') throw new TypeError("Failed to execute 'from' on 'ReadableStream': the argument is not iterable.");
        const syncIt = syncMethod.call(asyncIterable);
        it = { next: () => { const r = syncIt.next(); return resolved(r.value).then((value) => ({ value, done: r.done })); },
          return: (v) => resolved(typeof syncIt.return === 'function' ? syncIt.return(v) : { value: v, done: true }) };
      }
      return new ReadableStream({
        pull: (c) => resolved(it.next()).then((r) => {
          if (r === null || typeof r !== 'object') throw new TypeError('The iterator result is not an object.');
          if (r.done) c.close(); else c.enqueue(r.value);
        }),
        cancel: (reason) => (typeof it.return === 'function' ? resolved(it.return(reason)).then(() => undefined) : undefined),
      }, { highWaterMark: 0 });
    }
  }
  Object.defineProperty(ReadableStream.prototype, Symbol.asyncIterator, { value: ReadableStream.prototype.values, writable: true, configurable: true });
  Object.defineProperty(ReadableStream.prototype, Symbol.toStringTag, { value: 'ReadableStream', configurable: true });

  async function* iterate(reader, preventCancel) {
    let finished = false;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) { finished = true; return; }
        yield value;
      }
    } catch (e) {
      finished = true;
      throw e;
    } finally {
      if (!finished && !preventCancel) await reader.cancel(undefined).catch(() => {});
      reader.releaseLock();
    }
  }

  class ReadableStreamDefaultController {
    constructor(key = undefined) { if (key !== ILLEGAL) throw new TypeError('Illegal constructor'); }
    get desiredSize() { return desiredSize($(this, 'rcontroller')); }
    close() {
      const c = $(this, 'rcontroller');
      if (!canCloseOrEnqueue(c)) throw new TypeError('The stream is not in a state that permits close.');
      c.closeRequested = true;
      if (c.queue.length === 0) { clearAlgorithms(c); readableClose(c.stream); }
    }
    enqueue(chunk = undefined) {
      const c = $(this, 'rcontroller');
      if (!canCloseOrEnqueue(c)) throw new TypeError('The stream is not in a state that permits enqueue.');
      if (c.isBytes && !ArrayBuffer.isView(chunk)) throw new TypeError('A byte stream chunk must be an ArrayBufferView.');
      const s = slot.get(c.stream);
      if (s.reader !== null && slot.get(s.reader).readRequests.length > 0) {
        slot.get(s.reader).readRequests.shift().chunk(chunk);
      } else {
        let size = 1;
        if (c.isBytes) size = chunk.byteLength;
        else if (c.size !== null) {
          try { size = Number(c.size(chunk)); } catch (e) { controllerError(c, e); throw e; }
          if (!(size >= 0) || size === Infinity) {
            const e = new RangeError('The chunk size must be a finite, non-negative number.');
            controllerError(c, e); throw e;
          }
        }
        c.queue.push({ chunk, size });
        c.queueSize += size;
      }
      callPullIfNeeded(c);
    }
    error(e = undefined) { controllerError($(this, 'rcontroller'), e); }
  }
  Object.defineProperty(ReadableStreamDefaultController.prototype, Symbol.toStringTag, { value: 'ReadableStreamDefaultController', configurable: true });

  function setupReadableController(stream, src, hwm, size, isBytes) {
    const controller = new ReadableStreamDefaultController(ILLEGAL);
    const c = { kind: 'rcontroller', stream, source: src, queue: [], queueSize: 0, started: false, closeRequested: false,
      pullAgain: false, pulling: false, hwm, size, isBytes, pull: src.pull, cancel: src.cancel, self: controller };
    slot.set(controller, c);
    slot.get(stream).controller = c;
    const start = call(src.start, src, [controller]);
    resolved(start).then(() => { c.started = true; callPullIfNeeded(c); }, (e) => controllerError(c, e));
  }
  function desiredSize(c) {
    const state = slot.get(c.stream).state;
    if (state === 'errored') return null;
    if (state === 'closed') return 0;
    return c.hwm - c.queueSize;
  }
  const canCloseOrEnqueue = (c) => !c.closeRequested && slot.get(c.stream).state === 'readable';
  function clearAlgorithms(c) { c.pull = undefined; c.cancel = undefined; c.size = null; }
  function callPullIfNeeded(c) {
    const s = slot.get(c.stream);
    if (!canCloseOrEnqueue(c) || !c.started) return;
    const waiting = s.reader !== null && slot.get(s.reader).readRequests.length > 0;
    if (!waiting && !(desiredSize(c) > 0)) return;
    if (c.pulling) { c.pullAgain = true; return; }
    c.pulling = true;
    promiseCall(c.pull, c.source, [c.self]).then(() => {
      c.pulling = false;
      if (c.pullAgain) { c.pullAgain = false; callPullIfNeeded(c); }
    }, (e) => controllerError(c, e));
  }
  function controllerError(c, e) {
    const s = slot.get(c.stream);
    if (s.state !== 'readable') return;
    c.queue = []; c.queueSize = 0;
    clearAlgorithms(c);
    readableError(c.stream, e);
  }
  function readableClose(stream) {
    const s = slot.get(stream);
    s.state = 'closed';
    if (s.reader === null) return;
    const r = slot.get(s.reader);
    r.closed.resolve(undefined);
    for (const req of r.readRequests.splice(0)) req.close();
  }
  function readableError(stream, e) {
    const s = slot.get(stream);
    s.state = 'errored';
    s.storedError = e;
    if (s.reader === null) return;
    const r = slot.get(s.reader);
    r.closed.reject(e);
    for (const req of r.readRequests.splice(0)) req.error(e);
  }
  function readableCancel(stream, reason) {
    const s = slot.get(stream);
    s.disturbed = true;
    if (s.state === 'closed') return resolved(undefined);
    if (s.state === 'errored') return rejected(s.storedError);
    readableClose(stream);
    const c = s.controller;
    c.queue = []; c.queueSize = 0;
    const cancel = c.cancel;
    clearAlgorithms(c);
    return promiseCall(cancel, c.source, [reason]).then(() => undefined);
  }

  class ReadableStreamDefaultReader {
    constructor(stream) {
      const s = $(stream, 'readable');
      if (s.reader !== null) throw new TypeError("Failed to construct 'ReadableStreamDefaultReader': This stream has already been locked for exclusive reading by another reader.");
      const r = { kind: 'reader', stream, readRequests: [], closed: deferred() };
      slot.set(this, r);
      s.reader = this;
      if (s.state === 'closed') r.closed.resolve(undefined);
      else if (s.state === 'errored') r.closed.reject(s.storedError);
    }
    get closed() { return $(this, 'reader').closed.promise; }
    read() {
      let r;
      try { r = $(this, 'reader'); } catch (e) { return rejected(e); }
      if (r.stream === null) return rejected(new TypeError('This reader has been released.'));
      const d = deferred();
      readerRead(r, { chunk: (value) => d.resolve({ value, done: false }),
        close: () => d.resolve({ value: undefined, done: true }), error: d.reject });
      return d.promise;
    }
    releaseLock() {
      const r = $(this, 'reader');
      if (r.stream === null) return;
      const s = slot.get(r.stream);
      const e = new TypeError('The reader was released.');
      for (const req of r.readRequests.splice(0)) req.error(e);
      if (s.state === 'readable') r.closed.reject(e);
      else { r.closed = deferred(); r.closed.reject(e); }
      s.reader = null;
      r.stream = null;
    }
    cancel(reason = undefined) {
      let r;
      try { r = $(this, 'reader'); } catch (e) { return rejected(e); }
      if (r.stream === null) return rejected(new TypeError('This reader has been released.'));
      return readableCancel(r.stream, reason);
    }
  }
  // ReadableStreamDefaultReaderRead with a read request of three steps (chunk, close, error),
  // called synchronously when data is queued. Internal readers (fetch bodies, tee) pass plain
  // callbacks: no promise is resolved with a { value, done } record, so nothing they do looks up
  // `then` on an object whose prototype a program may have changed.
  function readerRead(r, req) {
    const s = slot.get(r.stream);
    s.disturbed = true;
    if (s.state === 'closed') { req.close(); return; }
    if (s.state === 'errored') { req.error(s.storedError); return; }
    const c = s.controller;
    if (c.queue.length > 0) {
      const { chunk, size } = c.queue.shift();
      c.queueSize -= size;
      if (c.queue.length === 0) c.queueSize = 0;
      if (c.closeRequested && c.queue.length === 0) { clearAlgorithms(c); readableClose(r.stream); }
      else callPullIfNeeded(c);
      req.chunk(chunk);
      return;
    }
    r.readRequests.push(req);
    callPullIfNeeded(c);
  }
  Object.defineProperty(ReadableStreamDefaultReader.prototype, Symbol.toStringTag, { value: 'ReadableStreamDefaultReader', configurable: true });

  function tee(stream) {
    const reader = new ReadableStreamDefaultReader(stream);
    const isBytes = slot.get(stream).controller.isBytes;
    let reading = false, readAgain = false, canceled1 = false, canceled2 = false, reason1, reason2, c1, c2;
    const cancelDone = deferred();
    const pull = () => {
      if (reading) { readAgain = true; return resolved(undefined); }
      reading = true;
      const settled = (steps) => (v) => { resolved(undefined).then(() => steps(v)); };
      readerRead(slot.get(reader), {
        chunk: settled((value) => {
          reading = false;
          const second = isBytes && ArrayBuffer.isView(value) ? new value.constructor(value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength)) : value;
          if (!canceled1) try { c1.enqueue(value); } catch { /* closed */ }
          if (!canceled2) try { c2.enqueue(second); } catch { /* closed */ }
          if (readAgain) { readAgain = false; pull(); }
        }),
        close: settled(() => {
          reading = false;
          if (!canceled1) try { c1.close(); } catch { /* already closed */ }
          if (!canceled2) try { c2.close(); } catch { /* already closed */ }
          cancelDone.resolve(undefined);
        }),
        error: settled((e) => {
          reading = false;
          try { c1.error(e); } catch { /* ignored */ }
          try { c2.error(e); } catch { /* ignored */ }
          cancelDone.resolve(undefined);
        }),
      });
      return resolved(undefined);
    };
    const cancelBoth = () => cancelDone.resolve(readableCancel(stream, [reason1, reason2]));
    const branch1 = new ReadableStream({ type: isBytes ? 'bytes' : undefined, start: (c) => { c1 = c; }, pull,
      cancel: (r) => { canceled1 = true; reason1 = r; if (canceled2) cancelBoth(); return cancelDone.promise; } });
    const branch2 = new ReadableStream({ type: isBytes ? 'bytes' : undefined, start: (c) => { c2 = c; }, pull,
      cancel: (r) => { canceled2 = true; reason2 = r; if (canceled1) cancelBoth(); return cancelDone.promise; } });
    reader.closed.catch((e) => { try { c1.error(e); } catch { /* */ } try { c2.error(e); } catch { /* */ } cancelDone.resolve(undefined); });
    return [branch1, branch2];
  }

  function pipe(source, dest, options) {
    const opts = options == null ? {} : options;
    const preventClose = !!opts.preventClose, preventAbort = !!opts.preventAbort, preventCancel = !!opts.preventCancel;
    const signal = opts.signal;
    const abortMod = signal !== undefined ? host.require('abort')[INTERNAL] : null;
    if (signal !== undefined && !abortMod.isSignal(signal)) return rejected(new TypeError("Failed to execute 'pipeTo': member signal is not of type AbortSignal."));
    const reader = new ReadableStreamDefaultReader(source);
    const writer = new WritableStreamDefaultWriter(dest);
    slot.get(source).disturbed = true;
    const done = deferred();
    let shuttingDown = false;
    let pendingWrite = resolved(undefined);
    let removeAbort = null;
    const finalize = (isError, error) => {
      writer.releaseLock();
      reader.releaseLock();
      if (removeAbort) removeAbort();
      if (isError) done.reject(error); else done.resolve(undefined);
    };
    const shutdown = (action, isError, error) => {
      if (shuttingDown) return;
      shuttingDown = true;
      const wait = slot.get(dest).state === 'writable' ? pendingWrite.catch(() => {}) : resolved(undefined);
      wait.then(() => (action ? action() : undefined)).then(
        () => finalize(isError, error), (e) => finalize(true, e));
    };
    if (signal !== undefined) {
      const onAbort = () => {
        const error = signal.reason;
        const actions = [];
        shutdown(() => {
          if (!preventAbort && slot.get(dest).state === 'writable') actions.push(writableAbort(dest, error));
          if (!preventCancel && slot.get(source).state === 'readable') actions.push(readableCancel(source, error));
          return PromiseCtor.all(actions);
        }, true, error);
      };
      if (signal.aborted) { onAbort(); return done.promise; }
      removeAbort = abortMod.addAlgorithm(signal, onAbort);
    }
    reader.closed.then(() => {
      if (!preventClose) shutdown(() => writerCloseWithErrorPropagation(writer), false);
      else shutdown(null, false);
    }, (e) => {
      if (!preventAbort) shutdown(() => writableAbort(dest, e), true, e);
      else shutdown(null, true, e);
    });
    writer.closed.then(() => {
      const e = new TypeError('The destination stream closed before all data could be piped to it.');
      if (!preventCancel) shutdown(() => readableCancel(source, e), true, e);
      else shutdown(null, true, e);
    }, (e) => {
      if (!preventCancel) shutdown(() => readableCancel(source, e), true, e);
      else shutdown(null, true, e);
    });
    const ds = slot.get(dest);
    if (ds.state === 'closed' || ds.closeQueued) {
      const e = new TypeError('The destination stream is closed.');
      if (!preventCancel) shutdown(() => readableCancel(source, e), true, e);
      else shutdown(null, true, e);
    }
    (async () => {
      while (!shuttingDown) {
        try { await writer.ready; } catch { return; }
        if (shuttingDown) return;
        let result;
        try { result = await reader.read(); } catch { return; }
        if (result.done) return;
        pendingWrite = writer.write(result.value);
        pendingWrite.catch(() => {});
      }
    })();
    return done.promise;
  }
  function writerCloseWithErrorPropagation(writer) {
    const w = slot.get(writer);
    const s = slot.get(w.stream);
    if (s.closeQueued || s.state === 'closed') return resolved(undefined);
    if (s.state === 'errored') return rejected(s.storedError);
    return writer.close();
  }

  // ---- WritableStream -----------------------------------------------------------------------

  class WritableStream {
    constructor(underlyingSink = undefined, strategy = undefined) {
      const sink = underlyingSink == null ? {} : underlyingSink;
      if (sink.type !== undefined) throw new RangeError("Failed to construct 'WritableStream': Invalid type is specified.");
      const hwm = hwmOf(strategy, 1);
      const size = sizeOf(strategy);
      const controller = new WritableStreamDefaultController(ILLEGAL);
      const s = { kind: 'writable', state: 'writable', writer: null, storedError: undefined, sink, queue: [], queueSize: 0,
        hwm, size, started: false, inFlight: false, closeQueued: false, closed: false, controller, abortController: null };
      slot.set(this, s);
      slot.set(controller, { kind: 'wcontroller', stream: this });
      const start = (() => { try { return call(sink.start, sink, [controller]); } catch (e) { throw e; } })();
      resolved(start).then(() => { s.started = true; advance(this); }, (e) => { s.started = true; writableError(this, e); });
    }
    get locked() { return $(this, 'writable').writer !== null; }
    abort(reason = undefined) {
      let s;
      try { s = $(this, 'writable'); } catch (e) { return rejected(e); }
      if (s.writer !== null) return rejected(new TypeError('Cannot abort a locked WritableStream.'));
      return writableAbort(this, reason);
    }
    close() {
      let s;
      try { s = $(this, 'writable'); } catch (e) { return rejected(e); }
      if (s.writer !== null) return rejected(new TypeError('Cannot close a locked WritableStream.'));
      return writableClose(this);
    }
    getWriter() { return new WritableStreamDefaultWriter(this); }
  }
  Object.defineProperty(WritableStream.prototype, Symbol.toStringTag, { value: 'WritableStream', configurable: true });

  class WritableStreamDefaultController {
    constructor(key = undefined) { if (key !== ILLEGAL) throw new TypeError('Illegal constructor'); }
    get signal() {
      const s = slot.get($(this, 'wcontroller').stream);
      if (s.abortController === null) s.abortController = new (host.require('abort').AbortController)();
      return s.abortController.signal;
    }
    error(e = undefined) {
      const stream = $(this, 'wcontroller').stream;
      if (slot.get(stream).state === 'writable') writableError(stream, e);
    }
  }
  Object.defineProperty(WritableStreamDefaultController.prototype, Symbol.toStringTag, { value: 'WritableStreamDefaultController', configurable: true });

  const writableDesired = (s) => (s.state === 'errored' ? null : s.state === 'closed' ? 0 : s.hwm - s.queueSize);
  function updateReady(s) {
    if (s.writer === null) return;
    const w = slot.get(s.writer);
    const backpressure = s.state === 'writable' && !s.closeQueued && writableDesired(s) <= 0;
    if (backpressure && !w.backpressure) { w.ready = deferred(); w.backpressure = true; }
    else if (!backpressure && w.backpressure) { w.backpressure = false; w.ready.resolve(undefined); }
  }
  function advance(stream) {
    const s = slot.get(stream);
    if (!s.started || s.inFlight || s.state !== 'writable') return;
    const next = s.queue[0];
    if (next === undefined) return;
    s.inFlight = true;
    if (next.close) {
      promiseCall(s.sink.close, s.sink, []).then(() => {
        s.inFlight = false; s.queue.shift();
        s.state = 'closed';
        next.resolve(undefined);
        if (s.writer !== null) slot.get(s.writer).closed.resolve(undefined);
      }, (e) => { s.inFlight = false; s.queue.shift(); next.reject(e); writableError(stream, e); });
      return;
    }
    promiseCall(s.sink.write, s.sink, [next.chunk, s.controller]).then(() => {
      s.inFlight = false; s.queue.shift();
      s.queueSize -= next.size;
      next.resolve(undefined);
      updateReady(s);
      advance(stream);
    }, (e) => { s.inFlight = false; s.queue.shift(); next.reject(e); writableError(stream, e); });
  }
  function writableError(stream, e) {
    const s = slot.get(stream);
    if (s.state === 'errored' || s.state === 'closed') return;
    s.state = 'errored';
    s.storedError = e;
    const pending = s.inFlight ? s.queue.slice(1) : s.queue.splice(0);
    if (s.inFlight) s.queue.length = 1;
    for (const req of pending) req.reject(e);
    if (s.writer !== null) {
      const w = slot.get(s.writer);
      w.closed.reject(e);
      if (w.backpressure) w.ready.reject(e); else { w.ready = deferred(); w.ready.reject(e); }
      w.backpressure = false;
    }
  }
  function writableAbort(stream, reason) {
    const s = slot.get(stream);
    if (s.state === 'closed' || s.state === 'errored') return resolved(undefined);
    if (s.abortController !== null) s.abortController.abort(reason);
    writableError(stream, reason);
    return promiseCall(s.sink.abort, s.sink, [reason]).then(() => undefined);
  }
  function writableClose(stream) {
    const s = slot.get(stream);
    if (s.state === 'closed' || s.state === 'errored' || s.closeQueued) return rejected(new TypeError('The stream is closed or closing.'));
    s.closeQueued = true;
    const d = deferred();
    s.queue.push({ close: true, resolve: d.resolve, reject: d.reject });
    updateReady(s);
    if (s.writer !== null) { const w = slot.get(s.writer); if (w.backpressure) { w.backpressure = false; w.ready.resolve(undefined); } }
    advance(stream);
    return d.promise;
  }

  class WritableStreamDefaultWriter {
    constructor(stream) {
      const s = $(stream, 'writable');
      if (s.writer !== null) throw new TypeError("Failed to construct 'WritableStreamDefaultWriter': This stream has already been locked for exclusive writing by another writer.");
      const w = { kind: 'writer', stream, closed: deferred(), ready: deferred(), backpressure: false };
      slot.set(this, w);
      s.writer = this;
      if (s.state === 'writable') {
        if (!s.closeQueued && writableDesired(s) <= 0) w.backpressure = true;
        else w.ready.resolve(undefined);
      } else if (s.state === 'closed') { w.ready.resolve(undefined); w.closed.resolve(undefined); }
      else { w.ready.reject(s.storedError); w.closed.reject(s.storedError); }
    }
    get closed() { return $(this, 'writer').closed.promise; }
    get ready() { return $(this, 'writer').ready.promise; }
    get desiredSize() {
      const w = $(this, 'writer');
      if (w.stream === null) throw new TypeError('This writer has been released.');
      return writableDesired(slot.get(w.stream));
    }
    write(chunk = undefined) {
      let w;
      try { w = $(this, 'writer'); } catch (e) { return rejected(e); }
      if (w.stream === null) return rejected(new TypeError('This writer has been released.'));
      const s = slot.get(w.stream);
      if (s.state === 'errored') return rejected(s.storedError);
      if (s.state === 'closed' || s.closeQueued) return rejected(new TypeError('The stream is closed or closing.'));
      let size = 1;
      if (s.size !== null) {
        try { size = Number(s.size(chunk)); } catch (e) { writableError(w.stream, e); return rejected(e); }
      }
      const d = deferred();
      s.queue.push({ chunk, size, resolve: d.resolve, reject: d.reject });
      s.queueSize += size;
      updateReady(s);
      advance(w.stream);
      return d.promise;
    }
    close() {
      let w;
      try { w = $(this, 'writer'); } catch (e) { return rejected(e); }
      if (w.stream === null) return rejected(new TypeError('This writer has been released.'));
      return writableClose(w.stream);
    }
    abort(reason = undefined) {
      let w;
      try { w = $(this, 'writer'); } catch (e) { return rejected(e); }
      if (w.stream === null) return rejected(new TypeError('This writer has been released.'));
      return writableAbort(w.stream, reason);
    }
    releaseLock() {
      const w = $(this, 'writer');
      if (w.stream === null) return;
      const e = new TypeError('The writer was released.');
      if (w.backpressure) w.ready.reject(e); else { w.ready = deferred(); w.ready.reject(e); }
      w.closed = deferred(); w.closed.reject(e);
      slot.get(w.stream).writer = null;
      w.stream = null;
    }
  }
  Object.defineProperty(WritableStreamDefaultWriter.prototype, Symbol.toStringTag, { value: 'WritableStreamDefaultWriter', configurable: true });

  // ---- TransformStream ----------------------------------------------------------------------

  class TransformStreamDefaultController {
    constructor(key = undefined) { if (key !== ILLEGAL) throw new TypeError('Illegal constructor'); }
    get desiredSize() { return $(this, 'tcontroller').readable.desiredSize; }
    enqueue(chunk = undefined) {
      const t = $(this, 'tcontroller');
      try { t.readable.enqueue(chunk); } catch (e) { t.errorWritable(e); throw slot.get(t.readableStream).storedError ?? e; }
      if (t.readable.desiredSize <= 0) t.backpressure = true;
    }
    error(reason = undefined) {
      const t = $(this, 'tcontroller');
      try { t.readable.error(reason); } catch { /* closed already */ }
      t.errorWritable(reason);
    }
    terminate() {
      const t = $(this, 'tcontroller');
      try { t.readable.close(); } catch { /* closed already */ }
      t.errorWritable(new TypeError('The transform stream has been terminated.'));
    }
  }
  Object.defineProperty(TransformStreamDefaultController.prototype, Symbol.toStringTag, { value: 'TransformStreamDefaultController', configurable: true });

  class TransformStream {
    #readable; #writable;
    constructor(transformer = undefined, writableStrategy = undefined, readableStrategy = undefined) {
      const tr = transformer == null ? {} : transformer;
      if (tr.readableType !== undefined) throw new RangeError('Invalid readableType specified');
      if (tr.writableType !== undefined) throw new RangeError('Invalid writableType specified');
      const controller = new TransformStreamDefaultController(ILLEGAL);
      const t = { kind: 'tcontroller', readable: null, readableStream: null, backpressure: true, backpressureWaiter: null, errorWritable: null };
      slot.set(controller, t);
      const started = deferred();
      let writableController;
      const waitForPull = () => {
        if (!t.backpressure) return resolved(undefined);
        if (t.backpressureWaiter === null) t.backpressureWaiter = deferred();
        return t.backpressureWaiter.promise;
      };
      this.#writable = new WritableStream({
        start: (c) => { writableController = c; return started.promise; },
        write: (chunk) => waitForPull().then(() => {
          if (slot.get(t.readableStream).state !== 'readable') throw slot.get(t.readableStream).storedError ?? new TypeError('The readable side is closed.');
          if (typeof tr.transform === 'function') return promiseCall(tr.transform, tr, [chunk, controller]);
          controller.enqueue(chunk);
          return undefined;
        }),
        close: () => promiseCall(tr.flush, tr, [controller]).then(() => {
          if (slot.get(t.readableStream).state === 'errored') throw slot.get(t.readableStream).storedError;
          try { t.readable.close(); } catch { /* closed already */ }
        }, (e) => { try { t.readable.error(e); } catch { /* */ } throw e; }),
        abort: (reason) => promiseCall(tr.cancel, tr, [reason]).then(() => {
          try { t.readable.error(reason); } catch { /* */ }
        }),
      }, writableStrategy);
      this.#readable = new ReadableStream({
        start: (c) => { t.readable = c; return started.promise; },
        pull: () => {
          t.backpressure = false;
          if (t.backpressureWaiter !== null) { t.backpressureWaiter.resolve(undefined); t.backpressureWaiter = null; }
        },
        cancel: (reason) => promiseCall(tr.cancel, tr, [reason]).then(() => { t.errorWritable(reason); }),
      }, readableStrategy === undefined ? { highWaterMark: 0 } : readableStrategy);
      t.readableStream = this.#readable;
      t.backpressure = desiredSize(slot.get(this.#readable).controller) <= 0;
      t.errorWritable = (e) => {
        if (slot.get(this.#writable).state === 'writable') writableController.error(e);
        if (t.backpressureWaiter !== null) { t.backpressureWaiter.resolve(undefined); t.backpressureWaiter = null; }
      };
      try { started.resolve(call(tr.start, tr, [controller])); } catch (e) { started.reject(e); throw e; }
    }
    get readable() { return this.#readable; }
    get writable() { return this.#writable; }
  }
  Object.defineProperty(TransformStream.prototype, Symbol.toStringTag, { value: 'TransformStream', configurable: true });

  // ---- queuing strategies -------------------------------------------------------------------

  const countSize = function size() { return 1; };
  const byteSize = function size(chunk) { return chunk.byteLength; };
  class CountQueuingStrategy {
    #hwm;
    constructor(init) {
      if (init == null || init.highWaterMark === undefined) throw new TypeError("Failed to construct 'CountQueuingStrategy': required member highWaterMark is undefined.");
      this.#hwm = Number(init.highWaterMark);
    }
    get highWaterMark() { return this.#hwm; }
    get size() { return countSize; }
  }
  class ByteLengthQueuingStrategy {
    #hwm;
    constructor(init) {
      if (init == null || init.highWaterMark === undefined) throw new TypeError("Failed to construct 'ByteLengthQueuingStrategy': required member highWaterMark is undefined.");
      this.#hwm = Number(init.highWaterMark);
    }
    get highWaterMark() { return this.#hwm; }
    get size() { return byteSize; }
  }
  Object.defineProperty(CountQueuingStrategy.prototype, Symbol.toStringTag, { value: 'CountQueuingStrategy', configurable: true });
  Object.defineProperty(ByteLengthQueuingStrategy.prototype, Symbol.toStringTag, { value: 'ByteLengthQueuingStrategy', configurable: true });

  // For fetch bodies: whether a stream is disturbed, mark one disturbed, and read one whole
  // (Fetch "fully read": the stream stays locked; every chunk must be a Uint8Array). Success
  // and failure are callbacks, called once; a loop, not recursion, drains queued chunks.
  const isDisturbed = (stream) => slot.get(stream).disturbed;
  const setDisturbed = (stream) => { slot.get(stream).disturbed = true; };
  const taName = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Uint8Array.prototype), Symbol.toStringTag).get;
  function readAllBytes(stream, success, failure) {
    const r = slot.get(new ReadableStreamDefaultReader(stream));
    const chunks = [];
    let total = 0, inRead = false, again = false, done = false;
    const req = {
      chunk(value) {
        if (taName.call(value) !== 'Uint8Array') { done = true; failure(new TypeError('Body stream chunks must be Uint8Array.')); return; }
        chunks.push(value); total += value.length;
        if (inRead) again = true; else pump();
      },
      close() {
        done = true;
        const out = new Uint8Array(total);
        let o = 0;
        for (const c of chunks) { out.set(c, o); o += c.length; }
        success(out);
      },
      error(e) { done = true; failure(e); },
    };
    function pump() {
      do { again = false; inRead = true; readerRead(r, req); inRead = false; } while (again && !done);
    }
    pump();
  }

  return {
    ReadableStream, ReadableStreamDefaultReader, ReadableStreamDefaultController,
    WritableStream, WritableStreamDefaultWriter, WritableStreamDefaultController,
    TransformStream, TransformStreamDefaultController,
    ByteLengthQueuingStrategy, CountQueuingStrategy,
    [INTERNAL]: { isDisturbed, setDisturbed, isLocked: (stream) => slot.get(stream).reader !== null, readAllBytes, tee, isReadable: (v) => v instanceof ReadableStream },
  };
}
