// The runtime installed in every fresh isolate before a program runs.
//
// Two stages. The script itself (a block: every name below stays out of the global
// scope) runs once per child, into the V8 startup snapshot every isolate of that child
// starts from (see snapshot.py); where no snapshot can be used, it runs once per isolate.
// The child writes its configuration (a JSON string literal, the same for every isolate of
// the child) into the slot on the first line of the block before evaluating. The script
// leaves one hook behind, an accessor `__codemode_boot` on Function.prototype, so that
// the child reaches it from the bell (the one function it holds) without evaluating a
// script: reading it from the bell takes the bell, removes the hook and returns `[api]`,
// the argument array of every later call. The first call of `api` (the setup) then gets
// what each isolate must have of its own (a random seed, a time origin) as `this`, makes
// what a snapshot cannot hold (the shared channel buffers), and returns the channel.
// Both happen once per isolate, before anything else runs in it.
// A script's top level is compiled once; the same code as a function expression was parsed
// twice (a pre-parse when evaluated, a full parse when called), which cost a trivial run
// about 0.5 ms when the script still ran per isolate.
//
// Functions every run calls are written `const f = (function f(...) {...});`: V8 compiles
// a parenthesized function expression with the script (while the child is idle) instead
// of pre-parsing it then and parsing it again on the first call, inside the run. That took
// a trivial run's time inside the isolate from ~0.72 to ~0.47 ms. Everything else stays a
// lazily compiled arrow function.
//
// `bell` is a one-way notification into the child's Python, handed over by reading the
// boot hook from it (see above). It carries no data (reading an
// argument would need the isolate, which may be busy), it only says "the journal has
// something". Python then reads the journal straight from shared memory, or calls
// `api` with the pump operation, which returns what did not fit as one JSON string.
// Everything that leaves the isolate is a string.
//
// Outbox messages:  ["c", id, provider, tool, argsJson]   tool call
//                   ["f", id, requestJson]                 fetch (plain data)
//                   ["l", level, text]                     one log entry
//                   ["d", resultJson|null]                 run finished with a value
//                   ["D"]                                  ... a long one: the child takes it
//                   ["e", errorText, kind]                 run failed (ceiling, memory, result)
//                   ["t", errorText, name, stack, compiling]  the program threw (compiling:
//                                                          1 when its code did not compile)
// Inbox messages:   [id, body]                             reply to a call or fetch
//
// Built-ins used here are captured now, so a program that monkeypatches them later can
// only break its own run, never the framing of what crosses.
'use strict';
{
  const configJson = CODEMODE_CONFIG;
  let bell = null;
  const G = globalThis;
  const JSONparse = JSON.parse;
  const JSONstringify = JSON.stringify;
  const ObjectDefineProperty = Object.defineProperty;
  const ObjectCreate = Object.create;
  const ReflectApply = Reflect.apply;
  const PromiseCtor = Promise;
  const PromiseResolve = Promise.resolve.bind(Promise);
  const PromiseThen = Promise.prototype.then;
  const MapCtor = Map;
  const MapGet = Map.prototype.get;
  const MapSize = Object.getOwnPropertyDescriptor(Map.prototype, 'size').get;
  const MapSet = Map.prototype.set;
  const MapDelete = Map.prototype.delete;
  const MapHas = Map.prototype.has;
  const WeakMapCtor = WeakMap;
  const WeakMapGet = WeakMap.prototype.get;
  const WeakMapSet = WeakMap.prototype.set;
  const ArrayPush = Array.prototype.push;
  const ErrorCtor = Error;
  const TypeErrorCtor = TypeError;
  const RangeErrorCtor = RangeError;
  const StringCtor = String;
  const indirectEval = G.eval;
  const waitAsync = Atomics.waitAsync;
  const ProxyCtor = Proxy;
  const dateNow = Date.now;
  const FunctionPrototype = Function.prototype;

  const config = JSONparse(configJson);
  let network = 'host';
  // The channels' offsets inside the one SharedArrayBuffer boot() makes per isolate (a
  // snapshot cannot hold one); until then, these views are null.
  const layout = config.layout;
  let channel = null;
  let control = null;
  const maxMessage = config.maxMessageBytes;
  const maxLogs = config.maxLogEntries;
  const texts = config.texts;

  // ---- the outbound journal ------------------------------------------------------
  // Every message leaves as one JSON line written straight into a journal: a
  // SharedArrayBuffer that Python reads without entering the isolate. So Python can take
  // messages while the isolate is still busy (and after it wedged: the lines written before
  // a loop that never yields are still there when the deadline ends the run), and a
  // message costs one wake-up, not a call into the isolate.
  //   header (Int32): [0] units written, [1] bell armed (Python clears it before reading),
  //                   [2] 1 once the journal is full
  // When the journal is full, the rest of the run's messages wait in the outbox, which
  // Python takes with pump() (in order: the journal never resumes).
  const JOURNAL_UNITS = config.journalUnits;
  let journalHead = null;
  let journalUnits = null;
  const atomicsStore = Atomics.store;
  const atomicsExchange = Atomics.exchange;
  let journalPos = 0;
  let journalFull = false;
  let outbox = [];
  let finished = false;
  // While the snapshot is made, the sources of the modules loaded into it (see preload);
  // null in every isolate.
  let preloading = null;
  // Messages are flat arrays of strings, numbers and null. They are encoded here by hand,
  // so a program that gives Array.prototype or Object.prototype a toJSON (or replaces
  // String.prototype.charCodeAt) can break only its own run's results, never the framing
  // of what crosses: JSON.stringify of a primitive never consults toJSON.
  const StringCharCodeAt = String.prototype.charCodeAt;
  const StringIndexOf = String.prototype.indexOf;
  const StringSlice = String.prototype.slice;
  const encodeMessage = (function encodeMessage(msg) {
    let line = '[';
    for (let i = 0; i < msg.length; i++) {
      const v = msg[i];
      line += (i === 0 ? '' : ',') + (v === null || v === undefined ? 'null'
        : typeof v === 'number' ? StringCtor(v) : JSONstringify(StringCtor(v)));
    }
    return line + ']\n';
  });
  const ring = (function ring() {
    if (ReflectApply(atomicsExchange, Atomics, [journalHead, 1, 1]) === 0) bell();
  });
  // A long line is copied by a small WebAssembly function (copier.js) instead of this
  // interpreter, which spends ~600 instructions on each UTF-16 unit of a fresh isolate's
  // journal (~100 ns a unit in a slow phase: a 100 KB result added ~7 ms to a run). Making
  // it costs an isolate ~0.8 ms there (compiling, a memory, an instance, its first call),
  // so it is made only for a line of 16,384 units or more, and then used for every line of
  // 1,024 or more. Its code comes with a synchronous request (only while the journal has
  // room for the request: an answer to one in the outbox would never come), so the
  // snapshot every isolate reads does not carry it. When it cannot be made (WebAssembly no
  // longer the engine's own, say) or fails, the isolate keeps the loop below.
  let copier;  // copier.js's copy(line, n, units, at) once made; null when it cannot be
  const copierBuiltins = [G, ReflectApply, Function.prototype.toString, Object.getOwnPropertyDescriptor,
    Uint8Array, Uint16Array, Object.getPrototypeOf(Uint16Array.prototype).set,
    Object.getOwnPropertyDescriptor(ArrayBuffer.prototype, 'byteLength').get];
  const makeCopier = (function makeCopier() {
    copier = null;  // (whatever the making reaches does not make it again)
    try {
      const made = indirectEval(hostSync(config.copierRequest))(copierBuiltins);
      if (typeof made === 'function') copier = made;
    } catch (e) { /* the loop stays */ }
  });
  const copyLong = (function copyLong(line, n) {
    try {
      return copier(line, n, journalUnits, journalPos) === true;
    } catch (e) {
      copier = null;
      return false;
    }
  });
  // The journal's last SYNC_RESERVE units are for synchronous requests ('s'): the isolate
  // waits for their answer, so they must reach Python without a pump, also once the rest
  // of the run's messages go to the outbox (a module first touched after a flood of logs
  // used to wait out the 5 s request timeout and throw). Their order against the outbox
  // does not matter: Python only answers them.
  const SYNC_RESERVE = 1024;
  const send = (function send(msg) {
    const sync = msg[0] === 's';
    const line = encodeMessage(msg);
    if (!journalFull || sync) {
      const n = line.length;
      const room = sync ? JOURNAL_UNITS : JOURNAL_UNITS - SYNC_RESERVE;
      // (made before the journal's room is looked at: its request is a line of its own)
      if (n >= 16384 && copier === undefined && journalPos + n <= room) makeCopier();
      if (journalPos + n <= room) {
        if (n >= 1024 && copier && copyLong(line, n)) {
          // (copied in WebAssembly)
        } else if (line.charCodeAt === StringCharCodeAt) {
          for (let i = 0; i < n; i++) journalUnits[journalPos + i] = line.charCodeAt(i);
        } else {
          for (let i = 0; i < n; i++) journalUnits[journalPos + i] = ReflectApply(StringCharCodeAt, line, [i]);
        }
        journalPos += n;
        ReflectApply(atomicsStore, Atomics, [journalHead, 0, journalPos]);
        ring();
        return;
      }
      if (!journalFull) {
        journalFull = true;
        ReflectApply(atomicsStore, Atomics, [journalHead, 2, 1]);
      }
    }
    ReflectApply(ArrayPush, outbox, [line]);
    ring();
  });
  const pending = new MapCtor();
  let nextId = 1;

  const then = (function then(p, onOk, onErr) {
    return ReflectApply(PromiseThen, p, [onOk, onErr]);
  });

  // ---- the inbound channel -------------------------------------------------------
  // Python writes text into this SharedArrayBuffer (UTF-16 code units after an 8-byte
  // header holding the count) and then calls feed/pump/start with no arguments: a call
  // that needs no argument array, so Python never has to touch a busy isolate.
  let inboundCount = null;
  let inboundUnits = null;
  let fed = '';
  const fromCharCode = StringCtor.fromCharCode;
  // The first n elements of a typed array as a string, one char per element (UTF-16 units
  // from a channel, or bytes as latin-1), in slices small enough for one apply.
  const unitsToString = (function unitsToString(view, n) {
    let text = '';
    for (let i = 0; i < n; i += 8192) {
      text += ReflectApply(fromCharCode, null, view.subarray(i, n < i + 8192 ? n : i + 8192));
    }
    return text;
  });
  const feed = (function feed() {
    fed += unitsToString(inboundUnits, inboundCount[0]);
    inboundCount[0] = 0;
  });
  const takeFed = (function takeFed() {
    feed();
    const text = fed;
    fed = '';
    return text;
  });

  const deliver = (function deliver() {
    const inboxJson = takeFed();
    if (inboxJson) {
      const inbox = JSONparse(inboxJson);
      for (let i = 0; i < inbox.length; i++) {
        const id = inbox[i][0];
        const body = inbox[i][1];
        const entry = ReflectApply(MapGet, pending, [id]);
        if (entry === undefined) continue; // a stale reply: drop it
        ReflectApply(MapDelete, pending, [id]);
        entry(body);
      }
    }
  });
  // Answers a bell put into the inbound channel while control[1] asked it to wait for
  // them (control[3] set: see callTool and park), delivered as that bell returns.
  const takeWaited = (function takeWaited() {
    control[1] = 0;
    if (control[3] !== 0) {
      control[3] = 0;
      deliver();
    }
  });
  const pump = (function pump() {
    deliver();
    if (outbox.length === 0) return '';
    const out = outbox;
    outbox = [];
    let text = '';
    for (let i = 0; i < out.length; i++) text += out[i];
    return text;
  });

  // ---- logs ----------------------------------------------------------------------
  let logCount = 0;
  let logsDropped = 0;
  const log = (function log(level, text) {
    if (finished || preloading !== null) return;
    text = StringCtor(text);
    if (logCount >= maxLogs) {
      logsDropped++;
      return;
    }
    logCount++;
    if (text.length > maxMessage) {
      text = text.slice(0, maxMessage) + texts.logTruncated;
    }
    send(['l', StringCtor(level), text]);
  });

  // ---- unhandled rejections --------------------------------------------------------
  // The engine reports no unhandled rejection to the embedder, so the global Promise is
  // a subclass that notes its own rejections and forgets them once a handler is attached
  // (then/catch/finally, or an await, which calls then). At the end of the run each
  // rejection still unhandled becomes an error-level log entry. Promises this cannot see:
  // those an async function returns and the engine's own internal ones (see
  // docs/threat-model.md, "Unhandled rejections").
  const unhandled = new MapCtor();
  const handled = new WeakSet();
  class TrackedPromise extends PromiseCtor {
    constructor(executor) {
      let early = null;
      let self = null;
      super((resolve, reject) => {
        if (typeof executor !== 'function') {
          throw new TypeErrorCtor(`Promise resolver ${typeof executor} is not a function`);
        }
        return executor(resolve, (reason) => {
          if (self === null) early = { reason };
          else if (!handled.has(self)) ReflectApply(MapSet, unhandled, [self, reason]);
          reject(reason);
        });
      });
      self = this;
      if (early !== null && !handled.has(this)) ReflectApply(MapSet, unhandled, [this, early.reason]);
    }
    then(onFulfilled, onRejected) {
      handled.add(this);
      ReflectApply(MapDelete, unhandled, [this]);
      return ReflectApply(PromiseThen, this, [onFulfilled, onRejected]);
    }
    static get [Symbol.species]() { return this; }
    static [Symbol.hasInstance](value) {
      // async functions still return the engine's own promises: keep instanceof true.
      return value instanceof PromiseCtor;
    }
  }
  ObjectDefineProperty(TrackedPromise, 'name', { value: 'Promise' });
  ObjectDefineProperty(G, 'Promise', {
    value: TrackedPromise, writable: true, configurable: true, enumerable: false,
  });

  // ---- the tool bridge -----------------------------------------------------------
  // A tool call's answer arrives after the program's call has returned, so the error its
  // rejection makes has no frame of the program. The call's site is kept instead (an Error
  // made as the call is, its stack not yet read), and the error's stack as the executor
  // reads it (errorStack) takes its frames from there: a failed call that the program does
  // not catch is reported at the line that made it. The program's own view of the error
  // is unchanged.
  const callSites = new WeakMapCtor();
  const toolError = (message, site) => {
    const e = new ErrorCtor(message);
    ReflectApply(WeakMapSet, callSites, [e, site]);
    return e;
  };
  const settleTool = (provider, tool, resolve, reject, site) => (body) => {
    let envelope;
    try {
      envelope = JSONparse(body);
    } catch (e) {
      reject(toolError(`${provider}.${tool} failed: ${texts.badEnvelope}`, site));
      return;
    }
    if (envelope !== null && typeof envelope === 'object') {
      if (typeof envelope.error === 'string') {
        reject(toolError(envelope.error, site));
        return;
      }
      if ('result' in envelope) {
        resolve(envelope.result);
        return;
      }
    }
    reject(toolError(`${provider}.${tool} failed: ${texts.badEnvelope}`, site));
  };

  const callTool = (provider, tool, args) => new TrackedPromise((resolve, reject) => {
    if (finished) {
      reject(new ErrorCtor(texts.runEnded));
      return;
    }
    let argsJson;
    try {
      argsJson = JSONstringify(args);
    } catch (e) {
      reject(new TypeErrorCtor(
        `Arguments to ${provider}.${tool} must be JSON data: ${e && e.message}`));
      return;
    }
    if (argsJson === undefined) argsJson = '[]';
    if (argsJson.length > maxMessage) {
      reject(new RangeErrorCtor(texts.argsCeiling));
      return;
    }
    const id = nextId++;
    ReflectApply(MapSet, pending, [id, settleTool(provider, tool, resolve, reject, new ErrorCtor())]);
    // The only call open: its bell may wait briefly for the answer (control[1] = 2) and
    // put it into the inbound channel (control[3]), delivered here before the call returns.
    const alone = ReflectApply(MapSize, pending, []) === 1;
    if (alone) control[1] = 2;
    send(['c', id, provider, tool, argsJson]);
    if (alone) takeWaited();
  });

  const makeProvider = (name, declared) => new ProxyCtor(ObjectCreate(null), {
    get(_target, prop) {
      if (typeof prop !== 'string') return undefined;
      // `await provider` must not turn into a tool call named "then".
      if (prop === 'then' && !declared.includes('then')) return undefined;
      return (...args) => callTool(name, prop, args);
    },
    has() { return true; },
    set() { return false; },
    defineProperty() { return false; },
    deleteProperty() { return false; },
    ownKeys() { return []; },
    getOwnPropertyDescriptor() { return undefined; },
    getPrototypeOf() { return null; },
    setPrototypeOf() { return false; },
  });

  // ---- fetch transport (the stdlib's fetch calls host.fetch) ----------------------
  const hostFetch = (request) => new TrackedPromise((resolve, reject) => {
    if (finished) {
      reject(new TypeErrorCtor(texts.runEnded));
      return;
    }
    if (network === 'none') {
      reject(new TypeErrorCtor(texts.networkDisabled));
      return;
    }
    const plain = {
      method: StringCtor(request.method),
      url: StringCtor(request.url),
      headers: request.headers,
      body: request.body ? encodeBody(request.body) : null,
      redirect: request.redirect || 'follow',
    };
    const requestJson = JSONstringify(plain);
    if (requestJson.length > maxMessage) {
      reject(new RangeErrorCtor(texts.fetchCeiling));
      return;
    }
    const id = nextId++;
    ReflectApply(MapSet, pending, [id, (body) => {
      const reply = JSONparse(body);
      if (reply.error !== undefined) {
        reject(new TypeErrorCtor(reply.error));
        return;
      }
      reply.body = decodeBody(reply.body);
      resolve(reply);
    }]);
    send(['f', id, requestJson]);
  });
  // Bodies cross as latin-1 strings (one char per byte): exact and cheap to build.
  const encodeBody = (bytes) => unitsToString(bytes, bytes.length);
  const decodeBody = (s) => {
    const out = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) out[i] = ReflectApply(StringCharCodeAt, s, [i]);
    return out;
  };

  // ---- timers --------------------------------------------------------------------
  // Atomics.waitAsync with a timeout is a macrotask scheduled by V8's own platform:
  // no host round trip per timer. A zero delay still yields to the task queue.
  let cell = null;
  const timers = new MapCtor();
  let nextTimer = 1;
  const MAX_TIMERS = config.maxTimers;
  const arm = (id, delay) => {
    const wait = ReflectApply(waitAsync, Atomics, [cell, 0, 0, delay > 0 ? delay : 0.001]);
    then(wait.value, () => fire(id));
  };
  const fire = (id) => {
    const t = ReflectApply(MapGet, timers, [id]);
    if (t === undefined || finished) return;
    if (t.repeat) {
      arm(id, t.delay);
    } else {
      ReflectApply(MapDelete, timers, [id]);
    }
    try {
      ReflectApply(t.fn, undefined, t.args);
    } catch (e) {
      reportException(e);
    }
  };
  // An exception a timer callback or a microtask throws reaches no caller: it is reported
  // as HTML says (the standard library's globals module fires an `error` ErrorEvent at the
  // global, then logs it unless a listener canceled it); without that module, it is logged.
  const reportException = (e) => {
    try {
      requireModule('globals')[INTERNAL_KEY].reportException(e);
      return;
    } catch (ignored) { /* logged below */ }
    try { log('error', `Uncaught ${errorText(e)}`); } catch (ignored) { /* nothing left */ }
  };
  const INTERNAL_KEY = Symbol.for('codemode.stdlib.internal');
  const addTimer = (fn, delay, args, repeat) => {
    if (typeof fn !== 'function') {
      throw new TypeErrorCtor('The callback passed to setTimeout/setInterval must be a function.');
    }
    if (timers.size >= MAX_TIMERS) {
      throw new RangeErrorCtor(texts.timerFlood);
    }
    delay = +delay;
    if (!(delay > 0)) delay = 0;
    if (delay > 2147483647) delay = 1;
    const id = nextTimer++;
    ReflectApply(MapSet, timers, [id, { fn, delay, args, repeat }]);
    arm(id, delay);
    return id;
  };
  const clearTimer = (id) => { ReflectApply(MapDelete, timers, [+id]); };
  const define = (name, value) => ObjectDefineProperty(G, name, {
    value, writable: true, configurable: true, enumerable: false,
  });
  define('setTimeout', function setTimeout(fn, delay, ...args) {
    return addTimer(fn, delay, args, false);
  });
  define('setInterval', function setInterval(fn, delay, ...args) {
    return addTimer(fn, delay, args, true);
  });
  define('clearTimeout', function clearTimeout(id) { clearTimer(id); });
  define('clearInterval', function clearInterval(id) { clearTimer(id); });
  define('queueMicrotask', function queueMicrotask(fn) {
    if (typeof fn !== 'function') {
      throw new TypeErrorCtor('The callback passed to queueMicrotask must be a function.');
    }
    then(PromiseResolve(), () => {
      try {
        fn();
      } catch (e) {
        reportException(e);
      }
    });
  });

  // ---- the standard library, compiled on first touch ------------------------------
  // Sources are not copied into every isolate: the first touch of a module's global asks
  // the child for it synchronously. The request goes out through the journal; the answer
  // comes back in a buffer of its own that this thread polls with Atomics.wait (Python
  // cannot notify a V8 waiter, so the wait is sliced). A trivial run loads nothing.
  let syncHead = null;
  let syncUnits = null;
  const atomicsLoad = Atomics.load;
  const atomicsWait = Atomics.wait;
  let syncSeq = 0;
  const hostSync = (request) => {
    const seq = ++syncSeq;
    send(['s', seq, request]);
    const deadline = dateNow() + config.syncTimeoutMs;
    while (ReflectApply(atomicsLoad, Atomics, [syncHead, 0]) !== seq) {
      ReflectApply(atomicsWait, Atomics, [syncHead, 0, seq - 1, 0.05]);
      if (dateNow() > deadline) throw new ErrorCtor(`The host did not answer a request for ${request}.`);
    }
    return unitsToString(syncUnits, syncHead[1]);
  };
  const sources = ObjectCreate(null);
  const loaded = new MapCtor();
  const lazyGetters = ObjectCreate(null);
  const ObjectGetOwnPropertyDescriptor = Object.getOwnPropertyDescriptor;
  const host = ObjectCreate(null);
  const requireModule = (id) => {
    if (ReflectApply(MapHas, loaded, [id])) return ReflectApply(MapGet, loaded, [id]);
    if (!(id in config.modules)) throw new ErrorCtor(`No standard library module '${id}'.`);
    const source = preloading !== null && id in preloading ? preloading[id] : hostSync(id);
    const factory = indirectEval(source);
    const exportsObj = factory(host);
    ReflectApply(MapSet, loaded, [id, exportsObj]);
    const names = config.modules[id];
    for (let i = 0; i < names.length; i++) {
      // Replace only names still holding the lazy accessor: a global the program
      // overwrote before this module was pulled in (by another module) keeps its value.
      const current = ObjectGetOwnPropertyDescriptor(G, names[i]);
      if (current !== undefined && current.get === lazyGetters[names[i]]) {
        define(names[i], exportsObj[names[i]]);
      }
    }
    return exportsObj;
  };
  host.require = requireModule;
  host.log = log;
  host.userAgent = config.userAgent;
  host.fetch = hostFetch;
  // host.seed and host.timeOrigin are each isolate's own: boot() sets them and freezes host.
  const moduleIds = Object.keys(config.modules);
  // In a function, not at top level: the loop would make V8 compile the whole script
  // a second time (baseline code for a script that runs once).
  const installLazyGlobals = (function installLazyGlobals() {
    for (let m = 0; m < moduleIds.length; m++) {
      const id = moduleIds[m];
      const names = config.modules[id];
      for (let i = 0; i < names.length; i++) {
        const name = names[i];
        // One function is both the getter and the setter (a setter is always called with
        // its value, a getter never with an argument): every isolate deserializes what
        // this loop made in the snapshot, one function per global fewer.
        const access = function (value) {
          if (arguments.length !== 0) {
            define(name, value);
            return undefined;
          }
          requireModule(id);
          return G[name];
        };
        lazyGetters[name] = access;
        ObjectDefineProperty(G, name, {
          configurable: true,
          enumerable: false,
          get: access,
          set: access,
        });
      }
    }
  });
  installLazyGlobals();
  if (!('console' in config.modules) && !moduleIds.some((id) => config.modules[id].includes('console'))) {
    // Fallback console when the standard library ships none: plain string joining.
    const fmt = (args) => args.map((a) => (typeof a === 'string' ? a : (() => {
      try { return JSONstringify(a); } catch (e) { return StringCtor(a); }
    })())).join(' ');
    define('console', {
      log: (...a) => log('log', fmt(a)), info: (...a) => log('info', fmt(a)),
      warn: (...a) => log('warn', fmt(a)), error: (...a) => log('error', fmt(a)),
      debug: (...a) => log('debug', fmt(a)),
    });
  }

  // ---- the result ----------------------------------------------------------------
  const describe = (v) => (typeof v === 'function' ? 'a function'
    : typeof v === 'symbol' ? 'a symbol' : typeof v === 'bigint' ? 'a BigInt' : typeof v);
  const encodeResult = (function encodeResult(value) {
    if (value === undefined) return null;
    let bad = null;
    const replacer = function (key, v) {
      const t = typeof v;
      if (bad === null && (t === 'function' || t === 'symbol' || t === 'bigint')) {
        bad = key === '' ? describe(v) : `${describe(v)} at key '${key}'`;
      }
      return v;
    };
    let text;
    try {
      text = JSONstringify(value, replacer);
    } catch (e) {
      const message = e && e.message ? StringCtor(e.message) : StringCtor(e);
      if (/circular/i.test(message)) {
        throw new TypeErrorCtor(`${texts.resultCycle} (${message.split('\n')[0]})`);
      }
      if (bad !== null) throw new TypeErrorCtor(`${texts.resultBad} It contains ${bad}.`);
      throw e;
    }
    if (bad !== null) throw new TypeErrorCtor(`${texts.resultBad} It contains ${bad}.`);
    return text === undefined ? null : text;
  });

  const errorText = (function errorText(e) {
    try {
      if (e instanceof ErrorCtor || (e !== null && typeof e === 'object' && 'message' in e)) {
        const m = StringCtor(e.message);
        return m === '' ? StringCtor(e.name || 'Error') : m;
      }
      return StringCtor(e);
    } catch (inner) {
      return 'The program threw a value that cannot be turned into text.';
    }
  });

  // A result (or a handler's response) of TAKE_MIN UTF-16 units or more does not go
  // through the journal: it waits here, the journal says ["D"], and the child takes it as
  // the value of a call of its own (api with `this` 2, see take), which the engine turns
  // into Python text natively. Copied into the journal, each unit costs this interpreter
  // ~600 instructions in a fresh isolate, on top of escaping the JSON text once more for
  // its line: the 1 KB result of the benchmark's (b) cost a run ~1.3 M of ~12 M. The take
  // costs about what ~40 units do (measured under callgrind: at 25 units either way is
  // the same, at 80 the take saves ~140 k instructions, at 225 ~260 k).
  const TAKE_MIN = 64;
  let resultText = null;
  const finish = (function finish(msg) {
    if (finished) return;
    // Reported through log(), so the entry cap and the line ceiling hold for them too.
    unhandled.forEach((reason) => log('error', `Unhandled promise rejection: ${errorText(reason)}`));
    unhandled.clear();
    finished = true;
    if (logsDropped > 0) {
      send(['l', 'warn', texts.logsDropped.replace('{n}', StringCtor(logsDropped))]);
    }
    if (msg[0] === 'd' && msg[1] !== null && msg[1].length >= TAKE_MIN) {
      resultText = msg[1];
      send(['D']);
      return;
    }
    send(msg);
  });
  const take = (function take() {
    const text = resultText;
    resultText = null;
    return text;  // (null only if asked twice: the child then ends the run with an error)
  });

  const isHandler = (v) => typeof v === 'function' ||
    (v !== null && typeof v === 'object' && typeof v.fetch === 'function');
  const succeed = (function succeed(value) {
    if (retain && handler === null && isHandler(value)) {
      // The run returned a request handler: keep this isolate alive for invocations.
      handler = value;
      finish(['h']);
      return;
    }
    let text;
    try {
      text = encodeResult(value);
    } catch (e) {
      finish(['e', errorText(e), 'result']);
      return;
    }
    if (text !== null && text.length > maxMessage) {
      finish(['e', texts.resultCeiling, 'ceiling']);
      return;
    }
    finish(['d', text]);
  });
  // Allocation failures V8 reports as catchable RangeErrors are the memory bound too.
  const allocationFailure = /^(Invalid string length|Array buffer allocation failed|Invalid typed array length|Maximum Buffer size)/;
  // What a thrown value says of itself beyond its message: its name and its stack text
  // (the child keeps the program's own frames of it: codemode/_positions.py). Read in a
  // try: a program may have made either a throwing getter.
  const errorName = (function errorName(e) {
    try {
      if (e !== null && (typeof e === 'object' || typeof e === 'function')) {
        const name = e.name;
        return typeof name === 'string' ? name : '';
      }
    } catch (inner) { /* no name */ }
    return '';
  });
  // The stack is read through the engine's own accessor only, and with a program's
  // Error.prepareStackTrace set aside for the read: either may be the program's code (a
  // getter or a formatter that loops, throws or answers anything), and the executor's
  // reading of a stack must not run it. A formatter that cannot be set aside (an accessor,
  // a frozen property) means no stack.
  const errorStack = (function errorStack(e) {
    if (e === null || typeof e !== 'object') return '';
    const stack = engineStack(e);
    const site = ReflectApply(WeakMapGet, callSites, [e]);
    if (site === undefined) return stack;
    // A tool call's rejection: its own first line, the frames of the call's site.
    const frames = engineStack(site);
    const cut = ReflectApply(StringIndexOf, frames, ['\n']);
    const head = ReflectApply(StringIndexOf, stack, ['\n']);
    if (cut < 0) return stack;
    const joined = (head < 0 ? stack : ReflectApply(StringSlice, stack, [0, head])) +
      ReflectApply(StringSlice, frames, [cut]);
    return joined.length > maxStack ? ReflectApply(StringSlice, joined, [0, maxStack]) : joined;
  });
  const engineStack = (function engineStack(e) {
    try {
      const own = ObjectGetOwnPropertyDescriptor(e, 'stack');
      if (own === undefined || own.get !== engineStackGet) return '';
      const format = ObjectGetOwnPropertyDescriptor(ErrorCtor, 'prepareStackTrace');
      if (format !== undefined && !(format.writable === true && 'value' in format)) return '';
      if (format !== undefined) ErrorCtor.prepareStackTrace = undefined;
      let stack;
      try {
        stack = ReflectApply(engineStackGet, e, []);
      } finally {
        if (format !== undefined) ErrorCtor.prepareStackTrace = format.value;
      }
      if (typeof stack === 'string') return stack.length > maxStack ? stack.slice(0, maxStack) : stack;
    } catch (inner) { /* no stack */ }
    return '';
  });
  const engineStackGet = ObjectGetOwnPropertyDescriptor(new ErrorCtor(), 'stack').get;
  const maxStack = config.maxStackChars;
  const fail = (function fail(e, compiling) {
    const text = errorText(e);
    if (e instanceof RangeErrorCtor && allocationFailure.test(text)) {
      finish(['e', texts.memory, 'memory']);
      return;
    }
    finish(['t', text, errorName(e), errorStack(e), compiling === true ? 1 : 0]);
  });

  // ---- start ---------------------------------------------------------------------
  let retain = false;
  let handler = null;
  const start = (function start() {
    const payload = JSONparse(takeFed());
    const code = payload[0];
    const providers = payload[1];
    network = payload[2];
    retain = payload[3] === true;
    const bundle = payload[4];
    const inputsJson = payload[5];
    for (let i = 0; i < providers.length; i++) {
      const name = providers[i][0];
      const tools = providers[i][1];
      define(name, makeProvider(name, tools));
    }
    if (typeof bundle === 'string') {
      // The run's modules: a loader that import() (rewritten to __cmi_) resolves against.
      try {
        const loader = indirectEval(bundle)({ eval: indirectEval });
        ObjectDefineProperty(G, '__cmi_', { value: loader.import });
      } catch (e) {
        fail(e);
        return;
      }
    }
    let fn;
    let inputs;
    try {
      if (typeof inputsJson === 'string') inputs = JSONparse(inputsJson);
      // Under its own source URL, so that its frames can be told from the runtime's.
      fn = indirectEval('(' + code + '\n)\n//# sourceURL=' + config.programUrl);
    } catch (e) {
      if (e instanceof SyntaxError) {
        // The hint only helps when the code is statements (it compiles as a function
        // body); a genuine syntax error inside a good arrow gets the engine's words alone.
        let statements = false;
        try {
          indirectEval('(async function () {\n' + code + '\n})');
          statements = true;
        } catch (inner) { /* not a function body either */ }
        fail(statements ? new SyntaxError(`${errorText(e)}. ${texts.entryForm}`) : e, true);
      } else {
        fail(e);
      }
      return;
    }
    if (typeof fn !== 'function') {
      fail(new TypeErrorCtor(`${texts.entryForm} The code evaluated to ${
        fn === null ? 'null' : describe(fn)} instead.`));
      return;
    }
    let value;
    try {
      // The run's inputs, when it has any, are the entry function's one argument.
      value = typeof inputsJson === 'string' ? fn(inputs) : fn();
    } catch (e) {
      fail(e);
      return;
    }
    then(PromiseResolve(value), succeed, fail);
  });

  // ---- invocations of a retained handler -----------------------------------------
  // Each invocation is a run of its own: its own clock (kept by the host), logs and
  // unhandled rejections; state the program keeps in its closures survives between them.
  // Timers that come due between invocations are dropped.
  const invoke = () => {
    const payload = JSONparse(takeFed());
    const plain = payload[0];
    const net = payload[1];
    network = net;
    finished = false;
    resultText = null;
    logCount = 0;
    logsDropped = 0;
    unhandled.clear();
    let pendingResponse;
    try {
      const init = { method: plain.method, headers: plain.headers };
      if (plain.body !== null && plain.method !== 'GET' && plain.method !== 'HEAD') {
        init.body = decodeBody(plain.body);
      }
      const request = new G.Request(plain.url, init);
      pendingResponse = typeof handler === 'function'
        ? handler(request) : handler.fetch(request);
    } catch (e) {
      fail(e);
      return;
    }
    then(PromiseResolve(pendingResponse), (response) => {
      if (!(response instanceof G.Response)) {
        fail(new TypeErrorCtor(texts.handlerResponse));
        return;
      }
      const headers = [];
      response.headers.forEach((value, name) => { ReflectApply(ArrayPush, headers, [[name, value]]); });
      then(response.arrayBuffer(), (buffer) => {
        const body = encodeBody(new Uint8Array(buffer));
        const text = JSONstringify({
          status: response.status, statusText: response.statusText, headers, body,
        });
        if (text.length > maxMessage) {
          finish(['e', texts.responseCeiling, 'ceiling']);
          return;
        }
        finish(['d', text]);
      }, fail);
    }, fail);
  };

  // ---- the one entry point -------------------------------------------------------
  // Python writes an operation code into the control word, then calls this with no
  // arguments (a call that needs no argument array never waits for a busy isolate).
  const operations = [null, start, pump, feed, invoke];
  // The boot hook's value is the argument array of every call: [api]. Python takes api
  // out of it; the first call, the setup, comes with the isolate's own values as `this`
  // (see boot) and returns the channel. Later calls get `undefined` (or a park's or a
  // take's number) and the same array, which they ignore.
  // The park: a task the child posts to this isolate's thread once a call has left. It
  // runs after the program's microtasks, rings the bell with control[1] = 1, and Python,
  // on this thread, waits there for answers (at most control[2] ms: timers are the
  // engine's own tasks, which cannot run meanwhile), puts them into the inbound channel and
  // sets control[3]; they are delivered here. Its value says whether calls are still open
  // (the child then parks again).
  const park = (function park() {
    if (finished || ReflectApply(MapSize, pending, []) === 0) return '';
    control[2] = ReflectApply(MapSize, timers, []) > 0 ? 1 : 10;
    control[1] = 1;
    bell();
    takeWaited();
    return ReflectApply(MapSize, pending, []) > 0 ? '1' : '';
  });
  const api = (function api() {
    if (channel === null) return boot(this);
    if (this === 1) return park();
    if (this === 2) return take();
    return operations[control[0]]();
  });

  // ---- boot: what each isolate needs of its own ------------------------------------
  // One SharedArrayBuffer carries every channel between this isolate and the child's
  // Python (offsets in config.layout): a control word, the inbound buffer, the outbound
  // journal and the synchronous-answer buffer. One buffer means one conversion when the
  // child prepares the isolate.
  // The child reaches the runtime through the bell, the function it made in this isolate:
  // it reads this hook from it (the bell's prototype is Function.prototype), which takes
  // the bell as its receiver and leaves nothing behind. Reading a property costs the
  // isolate no compilation, where a boot script cost each isolate one.
  ObjectDefineProperty(FunctionPrototype, '__codemode_boot', {
    get: (function takeBell() {
      delete FunctionPrototype.__codemode_boot;
      delete G.__codemode_preload;  // still here when no snapshot was made
      bell = this;
      return [api];
    }),
    enumerable: false, configurable: true,
  });
  // The setup: `values` is `seed timeOrigin` (64 hex characters of entropy, then ms since
  // the epoch), the isolate's own.
  const boot = (function boot(values) {
    const seed = values.slice(0, 64);  // (no program has run yet: the built-ins are intact)
    const timeOrigin = +values.slice(65);
    channel = new SharedArrayBuffer(layout.total);
    control = new Int32Array(channel, 0, 4);
    journalHead = new Int32Array(channel, layout.journal, 4);
    journalUnits = new Uint16Array(channel, layout.journal + 16, JOURNAL_UNITS);
    inboundCount = new Int32Array(channel, layout.inbound, 1);
    inboundUnits = new Uint16Array(channel, layout.inbound + 8, config.inboundUnits);
    syncHead = new Int32Array(channel, layout.sync, 4);
    syncUnits = new Uint16Array(channel, layout.sync + 16, config.syncUnits);
    cell = new Int32Array(new SharedArrayBuffer(4));
    host.seed = seed;
    host.timeOrigin = timeOrigin;
    Object.freeze(host);
    return channel;
  });

  // ---- preload: modules that are part of the snapshot -------------------------------
  // Called once, while the child makes its snapshot, with {id: source} of the modules
  // every isolate should start with (console: most programs log, and loading it on first
  // touch costs that run ~11 M instructions; in the snapshot it costs each isolate ~0.9 M,
  // measured under callgrind). Each is
  // loaded as on first touch, then exercised (logging goes nowhere meanwhile), so that the
  // functions a log line runs are compiled into the snapshot too. Only data a module makes
  // at load is kept: a module that reads host.seed or host.timeOrigin at load cannot be
  // preloaded (they are each isolate's own, set by boot).
  // Not parenthesized: compiled only when called (once per child, never in an isolate).
  const preload = function preload(sources) {
    delete G.__codemode_preload;
    preloading = sources;
    try {
      const ids = Object.keys(sources);
      for (let i = 0; i < ids.length; i++) requireModule(ids[i]);
      if (ReflectApply(MapHas, loaded, ['console'])) {
        // Only what most log lines run (text, numbers, a small object and array): each
        // function compiled here is deserialized by every isolate, used or not. Measured
        // in instructions per run against exercising every kind of value and every level:
        // a trivial run -2.9%, a run logging text -3.0%, one logging an object and an
        // Error -0.6% (the rarer paths compile on first use for less than every isolate
        // paid to carry them); not exercising at all cost a run logging an object +40%.
        G.console.log('text', 0, { a: 1, b: [1, 'x'] });
      }
      // What most runs call, compiled here so that every isolate has its bytecode from
      // the snapshot: the tool path (arrow functions, compiled on first use, unlike the
      // parenthesized functions above) and the result's replacer (an inner function).
      // Measured side by side: 10 tool calls and a 1 KB result, throughput +8%. Nothing
      // leaves: with the run marked finished, the call rejects at once.
      finished = true;
      try {
        const call = makeProvider('warm', ['call']).call({ a: [1] });
        call.then(undefined, () => 0);
        settleTool('warm', 'call', () => 0, () => 0)('{"result":1}');
        encodeResult({ a: [1, 'b', null, { c: true }] });
      } finally {
        finished = false;
      }
    } finally {
      preloading = null;
    }
  };
  ObjectDefineProperty(G, '__codemode_preload', {
    value: preload, writable: false, configurable: true, enumerable: false,
  });
}
