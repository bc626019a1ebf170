// `self` (the global object itself, as on Window and WorkerGlobalScope) and reportError()
// (HTML Standard, https://html.spec.whatwg.org/#dom-reporterror). With no window to fire an
// ErrorEvent at, a reported error is logged at level "error" as `Uncaught <inspected value>`.
(host) => {
  'use strict';
  const INTERNAL = Symbol.for('codemode.stdlib.internal');
  function reportError(e) {
    if (arguments.length === 0) throw new TypeError("Failed to execute 'reportError': 1 argument required, but only 0 present.");
    let text;
    try { text = host.require('console')[INTERNAL].inspect(e); } catch { text = String(e); }
    host.log('error', `Uncaught ${text}`);
  }
  return { self: globalThis, reportError };
}
