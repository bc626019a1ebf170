// performance.now() and performance.timeOrigin (High Resolution Time,
// https://w3c.github.io/hr-time/); performance is an EventTarget, as Performance inherits
// from it. The clock is Date.now() against host.timeOrigin, so now()
// has millisecond resolution (coarser than the spec's microseconds, which also denies
// programs a fine timer). Also: mark/measure are not provided (see docs/divergences.md).
(host) => {
  'use strict';
  const dateNow = Date.now;
  const origin = Number(host.timeOrigin);
  let last = 0;
  const ILLEGAL = {};
  const { EventTarget } = host.require('events');
  class Performance extends EventTarget {
    constructor(key = undefined) {
      if (key !== ILLEGAL) throw new TypeError('Illegal constructor');
      super();
    }
    get timeOrigin() { return origin; }
    now() {
      // Monotonic even if the wall clock steps back.
      const t = dateNow() - origin;
      if (t > last) last = t;
      return last;
    }
    toJSON() { return { timeOrigin: origin }; }
  }
  Object.defineProperty(Performance.prototype, Symbol.toStringTag, { value: 'Performance', configurable: true });
  return { performance: new Performance(ILLEGAL), Performance };
}
