// The global object's own interfaces (HTML Standard): `self`; the global as an EventTarget
// (addEventListener, removeEventListener, dispatchEvent, and globalThis instanceof EventTarget);
// ErrorEvent; reportError() and "report an exception", which the runtime also uses for an
// exception thrown by a timer callback or a microtask and events.js for a listener's.
// Reporting fires a cancelable `error` ErrorEvent at the global: first `onerror` (called as
// onerror(message, filename, lineno, colno, error); returning true cancels), then the
// listeners. When nothing cancels it, it is logged at level "error" as `Uncaught <value>`.
// An exception thrown while an error is being reported is logged, not reported again.
(host) => {
  'use strict';
  const INTERNAL = Symbol.for('codemode.stdlib.internal');
  const events = host.require('events');
  const { Event, EventTarget } = events;
  const G = globalThis;

  class ErrorEvent extends Event {
    #message; #filename; #lineno; #colno; #error;
    constructor(type, eventInitDict = undefined) {
      if (arguments.length === 0) throw new TypeError("Failed to construct 'ErrorEvent': 1 argument required, but only 0 present.");
      super(type, eventInitDict);
      const init = eventInitDict == null ? {} : eventInitDict;
      this.#message = init.message === undefined ? '' : String(init.message);
      this.#filename = init.filename === undefined ? '' : String(init.filename);
      this.#lineno = init.lineno === undefined ? 0 : Number(init.lineno) >>> 0;
      this.#colno = init.colno === undefined ? 0 : Number(init.colno) >>> 0;
      this.#error = init.error;
    }
    get message() { return this.#message; }
    get filename() { return this.#filename; }
    get lineno() { return this.#lineno; }
    get colno() { return this.#colno; }
    get error() { return this.#error; }
  }
  Object.defineProperty(ErrorEvent.prototype, Symbol.toStringTag, { value: 'ErrorEvent', configurable: true });

  events[INTERNAL].adoptTarget(G);
  try { Object.setPrototypeOf(G, EventTarget.prototype); } catch { /* the methods still work */ }
  // `onerror`: the first listener of the global's `error` events (registered before any the
  // program can add), with the standard's special arguments for an ErrorEvent.
  EventTarget.prototype.addEventListener.call(G, 'error', function (event) {
    const handler = G.onerror;
    if (typeof handler !== 'function') return;
    if (event instanceof ErrorEvent) {
      const r = Reflect.apply(handler, G, [event.message, event.filename, event.lineno, event.colno, event.error]);
      if (r === true) event.preventDefault();
    } else if (Reflect.apply(handler, G, [event]) === false) {
      event.preventDefault();
    }
  });

  const inspect = (e) => {
    try { return host.require('console')[INTERNAL].inspect(e); } catch { return String(e); }
  };
  const messageOf = (e) => {
    try {
      if (e instanceof Error) return `Uncaught ${e.name}: ${e.message}`;
      return `Uncaught ${String(e)}`;
    } catch { return 'Uncaught exception'; }
  };
  let reporting = false;
  // "report an exception": true when it was logged (nothing canceled the event).
  function reportException(e) {
    if (reporting) { host.log('error', `Uncaught ${inspect(e)}`); return true; }
    reporting = true;
    let canceled = false;
    try {
      const event = new ErrorEvent('error', { cancelable: true, message: messageOf(e), error: e });
      canceled = !events[INTERNAL].dispatchTrusted(G, event);
    } catch { /* reported below */ } finally {
      reporting = false;
    }
    if (!canceled) host.log('error', `Uncaught ${inspect(e)}`);
    return !canceled;
  }
  function reportError(e) {
    if (arguments.length === 0) throw new TypeError("Failed to execute 'reportError': 1 argument required, but only 0 present.");
    reportException(e);
  }
  const proto = EventTarget.prototype;
  return {
    self: G, reportError, ErrorEvent, onerror: null,
    addEventListener: proto.addEventListener,
    removeEventListener: proto.removeEventListener,
    dispatchEvent: proto.dispatchEvent,
    [INTERNAL]: { reportException },
  };
}
