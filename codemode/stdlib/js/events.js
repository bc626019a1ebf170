// Event, EventTarget, CustomEvent (DOM Standard, https://dom.spec.whatwg.org/#events).
// There is no tree here: dispatch reaches only the target itself (capture and bubble phases
// collapse into AT_TARGET). A listener that throws is reported (reportError) and dispatch goes on.
(host) => {
  'use strict';
  const INTERNAL = Symbol.for('codemode.stdlib.internal');
  const ArrayFrom = Array.from;
  const dateNow = Date.now;
  const timeOrigin = host.timeOrigin;

  const NONE = 0, CAPTURING_PHASE = 1, AT_TARGET = 2, BUBBLING_PHASE = 3;

  const report = (error) => {
    try { host.require('globals').reportError(error); } catch { /* nothing left to tell */ }
  };

  class Event {
    #type; #bubbles; #cancelable; #composed;
    #target = null; #currentTarget = null; #phase = NONE;
    #canceled = false; #stop = false; #stopImmediate = false; #inPassive = false;
    #dispatching = false; #trusted = false; #timeStamp;
    constructor(type, eventInitDict = undefined) {
      if (arguments.length === 0) throw new TypeError("Failed to construct 'Event': 1 argument required, but only 0 present.");
      const init = eventInitDict == null ? {} : eventInitDict;
      if (typeof init !== 'object' && typeof init !== 'function') {
        throw new TypeError("Failed to construct 'Event': The provided value is not of type 'EventInit'.");
      }
      this.#type = String(type);
      this.#bubbles = !!init.bubbles;
      this.#cancelable = !!init.cancelable;
      this.#composed = !!init.composed;
      this.#timeStamp = dateNow() - timeOrigin;
    }
    get type() { return this.#type; }
    get target() { return this.#target; }
    get srcElement() { return this.#target; }
    get currentTarget() { return this.#currentTarget; }
    get eventPhase() { return this.#phase; }
    get bubbles() { return this.#bubbles; }
    get cancelable() { return this.#cancelable; }
    get composed() { return this.#composed; }
    get defaultPrevented() { return this.#canceled; }
    get isTrusted() { return this.#trusted; }
    get timeStamp() { return this.#timeStamp; }
    get returnValue() { return !this.#canceled; }
    set returnValue(value) { if (!value) this.preventDefault(); }
    get cancelBubble() { return this.#stop; }
    set cancelBubble(value) { if (value) this.#stop = true; }
    composedPath() { return this.#currentTarget === null ? [] : [this.#currentTarget]; }
    stopPropagation() { this.#stop = true; }
    stopImmediatePropagation() { this.#stop = true; this.#stopImmediate = true; }
    preventDefault() { if (this.#cancelable && !this.#inPassive) this.#canceled = true; }
    initEvent(type, bubbles = false, cancelable = false) {
      if (this.#dispatching) return;
      this.#type = String(type); this.#bubbles = !!bubbles; this.#cancelable = !!cancelable;
      this.#stop = this.#stopImmediate = this.#canceled = false;
      this.#target = null;
    }
    static #check(event) {
      if (!(#type in event)) throw new TypeError("parameter 1 is not of type 'Event'.");
    }
    // Dispatch bookkeeping, reached only through EventTarget below.
    static _begin(event, target, trusted) {
      Event.#check(event);
      if (event.#dispatching) {
        throw new (host.require('domexception').DOMException)('The event is already being dispatched.', 'InvalidStateError');
      }
      event.#dispatching = true;
      if (trusted !== undefined) event.#trusted = trusted;
      event.#target = target;
      event.#currentTarget = target;
      event.#phase = AT_TARGET;
    }
    static _stoppedImmediately(event) { return event.#stopImmediate; }
    static _passive(event, passive) { event.#inPassive = passive; }
    static _end(event) {
      event.#dispatching = false;
      event.#phase = NONE;
      event.#currentTarget = null;
      event.#stop = false;
      event.#stopImmediate = false;
      return !event.#canceled;
    }
  }
  const begin = Event._begin, stoppedImmediately = Event._stoppedImmediately;
  const setPassive = Event._passive, end = Event._end;
  delete Event._begin; delete Event._stoppedImmediately; delete Event._passive; delete Event._end;

  for (const [name, value] of [['NONE', NONE], ['CAPTURING_PHASE', CAPTURING_PHASE],
    ['AT_TARGET', AT_TARGET], ['BUBBLING_PHASE', BUBBLING_PHASE]]) {
    const d = { value, enumerable: true, writable: false, configurable: false };
    Object.defineProperty(Event, name, d);
    Object.defineProperty(Event.prototype, name, d);
  }
  Object.defineProperty(Event.prototype, Symbol.toStringTag, { value: 'Event', configurable: true });
  Object.defineProperty(Event.prototype, Symbol.for('nodejs.util.inspect.custom'), {
    value(depth, options, inspect) {
      const name = this[Symbol.toStringTag];
      return `${name} ${inspect({ type: this.type, defaultPrevented: this.defaultPrevented, cancelable: this.cancelable, timeStamp: this.timeStamp }, options)}`;
    },
    writable: true, configurable: true,
  });

  class CustomEvent extends Event {
    #detail;
    constructor(type, eventInitDict = undefined) {
      if (arguments.length === 0) throw new TypeError("Failed to construct 'CustomEvent': 1 argument required, but only 0 present.");
      super(type, eventInitDict);
      this.#detail = eventInitDict == null || eventInitDict.detail === undefined ? null : eventInitDict.detail;
    }
    get detail() { return this.#detail; }
    initCustomEvent(type, bubbles = false, cancelable = false, detail = null) {
      this.initEvent(type, bubbles, cancelable);
      this.#detail = detail;
    }
  }
  Object.defineProperty(CustomEvent.prototype, Symbol.toStringTag, { value: 'CustomEvent', configurable: true });

  const flattenOptions = (options) => {
    if (typeof options === 'boolean') return { capture: options };
    if (options == null) return { capture: false };
    return { capture: !!options.capture, once: !!options.once, passive: options.passive,
      signal: options.signal };
  };

  // target -> Map(type -> array of {callback, capture, once, passive, removed}). A WeakMap
  // rather than a private field, so that the global object, which no constructor made, can
  // be a target too (adoptTarget).
  const targets = new WeakMap();
  // (`this` undefined or null is the global object, as Web IDL says for a bare call such as
  // `addEventListener(...)`.)
  const listenersOf = (target, what) => {
    const map = targets.get(target === undefined || target === null ? globalThis : target);
    if (map === undefined) throw new TypeError(`Failed to execute '${what}' on 'EventTarget': Illegal invocation`);
    return map;
  };

  class EventTarget {
    constructor() { targets.set(this, new Map()); }
    addEventListener(type, callback, options = undefined) {
      const listeners = listenersOf(this, 'addEventListener');
      const target = this === undefined || this === null ? globalThis : this;
      if (arguments.length < 2) throw new TypeError("Failed to execute 'addEventListener' on 'EventTarget': 2 arguments required.");
      const { capture, once, passive, signal } = flattenOptions(options);
      if (callback === null || callback === undefined) return;
      if (typeof callback !== 'function' && typeof callback !== 'object') {
        throw new TypeError("Failed to execute 'addEventListener' on 'EventTarget': parameter 2 is not of type 'Object'.");
      }
      if (signal !== undefined) {
        const abort = host.require('abort');
        if (!abort[INTERNAL].isSignal(signal)) throw new TypeError("Failed to read the 'signal' property from 'AddEventListenerOptions': parameter is not of type 'AbortSignal'.");
        if (signal.aborted) return;
      }
      type = String(type);
      let list = listeners.get(type);
      if (!list) { list = []; listeners.set(type, list); }
      for (const l of list) if (l.callback === callback && l.capture === capture) return;
      const listener = { callback, capture, once: !!once, passive: passive === undefined ? false : !!passive, removed: false };
      list.push(listener);
      if (signal !== undefined) {
        host.require('abort')[INTERNAL].addAlgorithm(signal, () => {
          EventTarget.prototype.removeEventListener.call(target, type, callback, { capture });
        });
      }
    }
    removeEventListener(type, callback, options = undefined) {
      const listeners = listenersOf(this, 'removeEventListener');
      if (arguments.length < 2) throw new TypeError("Failed to execute 'removeEventListener' on 'EventTarget': 2 arguments required.");
      const { capture } = flattenOptions(options);
      const list = listeners.get(String(type));
      if (!list) return;
      const i = list.findIndex((l) => l.callback === callback && l.capture === capture);
      if (i !== -1) { list[i].removed = true; list.splice(i, 1); }
    }
    dispatchEvent(event) {
      listenersOf(this, 'dispatchEvent');
      if (!(event instanceof Event)) throw new TypeError("Failed to execute 'dispatchEvent' on 'EventTarget': parameter 1 is not of type 'Event'.");
      return dispatch(this === undefined || this === null ? globalThis : this, event, undefined);
    }
  }
  Object.defineProperty(EventTarget.prototype, Symbol.toStringTag, { value: 'EventTarget', configurable: true });

  function dispatch(target, event, trusted) {
    begin(event, target, trusted);
    try {
      const list = targets.get(target).get(event.type);
      if (list && list.length) {
        for (const l of ArrayFrom(list)) {
          if (l.removed) continue;
          if (l.once) EventTarget.prototype.removeEventListener.call(target, event.type, l.callback, { capture: l.capture });
          setPassive(event, l.passive);
          try {
            if (typeof l.callback === 'function') {
              Reflect.apply(l.callback, target, [event]);
            } else {
              const handle = l.callback.handleEvent;
              if (typeof handle !== 'function') throw new TypeError("'handleEvent' is not a function");
              Reflect.apply(handle, l.callback, [event]);
            }
          } catch (error) {
            report(error);
          }
          setPassive(event, false);
          if (stoppedImmediately(event)) break;
        }
      }
    } finally {
      return end(event);
    }
  }

  // `on<type>` event handler attributes, for EventTarget subclasses of other modules.
  const handlers = new WeakMap();
  const defineEventHandler = (proto, type) => {
    Object.defineProperty(proto, 'on' + type, {
      configurable: true, enumerable: true,
      get() { const h = handlers.get(this); return (h && h[type] && h[type].value) || null; },
      set(value) {
        let h = handlers.get(this);
        if (!h) { h = Object.create(null); handlers.set(this, h); }
        const fn = typeof value === 'function' || (value !== null && typeof value === 'object') ? value : null;
        if (!h[type]) {
          if (fn === null) return;
          const slot = { value: fn };
          h[type] = slot;
          this.addEventListener(type, function (event) {
            const f = slot.value;
            if (typeof f !== 'function') return undefined;
            const r = Reflect.apply(f, this, [event]);
            if (r === false) event.preventDefault();
            return r;
          });
        } else {
          h[type].value = fn;
        }
      },
    });
  };

  return {
    Event, EventTarget, CustomEvent,
    [INTERNAL]: {
      dispatchTrusted: (target, event) => dispatch(target, event, true), defineEventHandler,
      // Makes `object` (the global object) an EventTarget that no constructor made.
      adoptTarget: (object) => { if (!targets.has(object)) targets.set(object, new Map()); },
    },
  };
}
