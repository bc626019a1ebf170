// navigator.userAgent (HTML Standard; ECMA-429 asks for a single product token, e.g. the
// runtime's name). The value comes from the executor as host.userAgent.
(host) => {
  'use strict';
  const userAgent = String(host.userAgent);
  const ILLEGAL = {};
  class Navigator {
    constructor(key = undefined) { if (key !== ILLEGAL) throw new TypeError('Illegal constructor'); }
    get userAgent() { return userAgent; }
  }
  Object.defineProperty(Navigator.prototype, Symbol.toStringTag, { value: 'Navigator', configurable: true });
  return { navigator: new Navigator(ILLEGAL), Navigator };
}
