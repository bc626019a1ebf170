// AbortController and AbortSignal (DOM Standard, https://dom.spec.whatwg.org/#aborting-ongoing-activities).
(host) => {
  'use strict';
  const INTERNAL = Symbol.for('codemode.stdlib.internal');
  const { EventTarget, Event } = host.require('events');
  const events = host.require('events')[INTERNAL];
  const { DOMException } = host.require('domexception');
  const setTimeoutRef = globalThis.setTimeout;

  const ILLEGAL = {};

  class AbortSignal extends EventTarget {
    #aborted = false;
    #reason = undefined;
    #algorithms = new Set();
    #dependent = false;
    #sources = [];
    #dependents = [];
    constructor(key = undefined) {
      if (key !== ILLEGAL) throw new TypeError('Illegal constructor');
      super();
    }
    get aborted() { return this.#aborted; }
    get reason() { return this.#reason; }
    throwIfAborted() { if (this.#aborted) throw this.#reason; }

    static abort(reason = undefined) {
      const signal = new AbortSignal(ILLEGAL);
      signal.#aborted = true;
      signal.#reason = reason === undefined ? new DOMException('This operation was aborted', 'AbortError') : reason;
      return signal;
    }
    static timeout(milliseconds) {
      const ms = Number(milliseconds);
      if (!Number.isFinite(ms) || ms < 0 || ms > Number.MAX_SAFE_INTEGER) {
        throw new TypeError(`Failed to execute 'timeout' on 'AbortSignal': Value is outside the 'unsigned long long' value range.`);
      }
      const signal = new AbortSignal(ILLEGAL);
      setTimeoutRef(() => {
        signalAbort(signal, new DOMException('signal timed out', 'TimeoutError'));
      }, Math.trunc(ms));
      return signal;
    }
    static any(signals) {
      const list = Array.from(signals);
      for (const s of list) {
        if (!(s instanceof AbortSignal)) throw new TypeError("Failed to execute 'any' on 'AbortSignal': Failed to convert value to 'AbortSignal'.");
      }
      const result = new AbortSignal(ILLEGAL);
      for (const s of list) {
        if (s.#aborted) { result.#aborted = true; result.#reason = s.#reason; return result; }
      }
      result.#dependent = true;
      for (const s of list) {
        const sources = s.#dependent ? s.#sources : [s];
        for (const source of sources) {
          if (result.#sources.includes(source)) continue;
          result.#sources.push(source);
          source.#dependents.push(result);
        }
      }
      return result;
    }
    static _abort(signal, reason) {
      if (signal.#aborted) return;
      signal.#aborted = true;
      signal.#reason = reason === undefined ? new DOMException('This operation was aborted', 'AbortError') : reason;
      const toAbort = [];
      for (const d of signal.#dependents) {
        if (d.#aborted) continue;
        d.#aborted = true;
        d.#reason = signal.#reason;
        toAbort.push(d);
      }
      runAbortSteps(signal);
      for (const d of toAbort) runAbortSteps(d);
    }
    static _steps(signal) {
      const algorithms = Array.from(signal.#algorithms);
      signal.#algorithms.clear();
      for (const fn of algorithms) {
        try { fn(signal.#reason); } catch (error) { try { host.require('globals').reportError(error); } catch { /* ignored */ } }
      }
      events.dispatchTrusted(signal, new Event('abort'));
    }
    static _add(signal, fn) { if (!signal.#aborted) signal.#algorithms.add(fn); return () => signal.#algorithms.delete(fn); }
    static _is(value) { return value !== null && typeof value === 'object' && #aborted in value; }
  }
  const signalAbort = AbortSignal._abort, runAbortSteps = AbortSignal._steps;
  const addAlgorithm = AbortSignal._add, isSignal = AbortSignal._is;
  delete AbortSignal._abort; delete AbortSignal._steps; delete AbortSignal._add; delete AbortSignal._is;
  events.defineEventHandler(AbortSignal.prototype, 'abort');
  Object.defineProperty(AbortSignal.prototype, Symbol.for('nodejs.util.inspect.custom'), {
    value(depth, options, inspect) { return `AbortSignal ${inspect({ aborted: this.aborted }, options)}`; },
    writable: true, configurable: true,
  });
  Object.defineProperty(AbortSignal.prototype, Symbol.toStringTag, { value: 'AbortSignal', configurable: true });

  class AbortController {
    #signal = new AbortSignal(ILLEGAL);
    get signal() { return this.#signal; }
    abort(reason = undefined) { signalAbort(this.#signal, reason); }
  }
  Object.defineProperty(AbortController.prototype, Symbol.toStringTag, { value: 'AbortController', configurable: true });

  return {
    AbortController, AbortSignal,
    [INTERNAL]: { isSignal, addAlgorithm, signalAbort, newSignal: () => new AbortSignal(ILLEGAL) },
  };
}
