// structuredClone (HTML Standard, https://html.spec.whatwg.org/#dom-structuredclone).
// Deep copy with cycles and shared references kept: primitives, boxed primitives, Date, RegExp,
// ArrayBuffer (optionally transferred) and its views, Map, Set, Error types, arrays, plain
// objects, and the serializable platform objects of this library (Blob, File, DOMException).
// Functions, symbols, WeakMap/WeakSet/WeakRef/Promise and other platform objects throw
// DataCloneError.
(host) => {
  'use strict';
  const INTERNAL = Symbol.for('codemode.stdlib.internal');
  const { DOMException } = host.require('domexception');
  const O = Object;
  const { keys, getOwnPropertyDescriptor, getPrototypeOf } = O;
  const isArray = Array.isArray;
  const isView = ArrayBuffer.isView;
  const brand = (proto, key) => {
    const get = getOwnPropertyDescriptor(proto, key).get;
    return (v) => { try { get.call(v); return true; } catch { return false; } };
  };
  const isArrayBuffer = brand(ArrayBuffer.prototype, 'byteLength');
  const isSharedArrayBuffer = typeof SharedArrayBuffer === 'function' ? brand(SharedArrayBuffer.prototype, 'byteLength') : () => false;
  const isMap = brand(Map.prototype, 'size');
  const isSet = brand(Set.prototype, 'size');
  const tryCall = (fn, v) => { try { fn.call(v); return true; } catch { return false; } };
  const isDate = (v) => tryCall(Date.prototype.getTime, v);
  const isRegExp = (v) => { try { RegExp.prototype.exec.call(v, ''); return true; } catch { return false; } };
  const objToString = (v) => O.prototype.toString.call(v);
  const ERROR_NAMES = new Set(['Error', 'EvalError', 'RangeError', 'ReferenceError', 'SyntaxError', 'TypeError', 'URIError']);
  const ERROR_CTORS = { Error, EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError };
  const TYPED = { Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array,
    Float32Array, Float64Array, BigInt64Array, BigUint64Array, DataView };
  if (typeof Float16Array === 'function') TYPED.Float16Array = Float16Array;

  const cannotClone = (v) => {
    let what;
    try { what = typeof v === 'function' ? (v.name ? `function ${v.name}` : 'function') : typeof v === 'symbol' ? v.toString() : objToString(v); }
    catch { what = 'value'; }
    return new DOMException(`${what} could not be cloned.`, 'DataCloneError');
  };

  // Platform objects of this library: serializable ones are cloned, the rest refused.
  function platformClone(value) {
    if (value instanceof DOMException) {
      const copy = new DOMException(value.message, value.name);
      if (typeof value.stack === 'string') O.defineProperty(copy, 'stack', { value: value.stack, writable: true, configurable: true });
      return { ok: true, value: copy };
    }
    let proto;
    try { proto = getPrototypeOf(value); } catch { return null; }
    if (proto === null || proto === O.prototype || proto === Array.prototype) return null;
    // Interfaces (ours and the engine's) carry their own @@toStringTag; plain classes do not.
    if (!O.prototype.hasOwnProperty.call(proto, Symbol.toStringTag)) return null;
    const blob = host.require('blob')[INTERNAL];
    if (blob.isBlob(value)) return { ok: true, value: blob.clone(value) };
    return { ok: false };
  }

  function clone(value, memory) {
    if (typeof value === 'symbol' || typeof value === 'function') throw cannotClone(value);
    if (value === null || typeof value !== 'object') return value;
    if (memory.has(value)) return memory.get(value);
    let out;
    const set = (v) => { memory.set(value, v); return v; };

    const boxed = [[Boolean, (v) => new Boolean(v)], [Number, (v) => new Number(v)], [BigInt, (v) => O(v)], [String, (v) => new String(v)]];
    for (const [P, make] of boxed) {
      let prim;
      try { prim = P.prototype.valueOf.call(value); } catch { continue; }
      return set(make(prim));
    }
    try { Symbol.prototype.valueOf.call(value); throw cannotClone(value); } catch (e) { if (e instanceof DOMException) throw e; }
    if (isDate(value)) return set(new Date(Date.prototype.getTime.call(value)));
    if (isRegExp(value)) return set(new RegExp(value.source, value.flags));
    if (isSharedArrayBuffer(value)) return set(value);
    if (isArrayBuffer(value)) {
      const copy = value.resizable ? (() => {
        const b = new ArrayBuffer(value.byteLength, { maxByteLength: value.maxByteLength });
        new Uint8Array(b).set(new Uint8Array(value));
        return b;
      })() : value.slice(0);
      return set(copy);
    }
    if (isView(value)) {
      const name = value instanceof DataView ? 'DataView' : value[Symbol.toStringTag];
      const Ctor = TYPED[name];
      if (!Ctor) throw cannotClone(value);
      const buffer = clone(value.buffer, memory);
      const length = value instanceof DataView ? value.byteLength : value.length;
      return set(new Ctor(buffer, value.byteOffset, length));
    }
    if (isMap(value)) {
      out = set(new Map());
      const entries = Array.from(Map.prototype.entries.call(value));
      for (const [k, v] of entries) out.set(clone(k, memory), clone(v, memory));
      return out;
    }
    if (isSet(value)) {
      out = set(new Set());
      const values = Array.from(Set.prototype.values.call(value));
      for (const v of values) out.add(clone(v, memory));
      return out;
    }
    if (value instanceof DOMException) return set(platformClone(value).value);
    if (value instanceof Error || objToString(value) === '[object Error]') {
      let name = 'Error';
      try { const n = value.name; if (ERROR_NAMES.has(n)) name = n; } catch { /* Error */ }
      const d = getOwnPropertyDescriptor(value, 'message');
      out = set(new ERROR_CTORS[name]());
      if (d && 'value' in d) O.defineProperty(out, 'message', { value: String(d.value), writable: true, configurable: true, enumerable: false });
      const stack = getOwnPropertyDescriptor(value, 'stack');
      if (stack && typeof stack.value === 'string') O.defineProperty(out, 'stack', { value: stack.value, writable: true, configurable: true, enumerable: false });
      else if (stack === undefined) delete out.stack;
      const cause = getOwnPropertyDescriptor(value, 'cause');
      if (cause && 'value' in cause) O.defineProperty(out, 'cause', { value: clone(cause.value, memory), writable: true, configurable: true, enumerable: false });
      return out;
    }
    if (value instanceof Promise || value instanceof WeakMap || value instanceof WeakSet ||
        (typeof WeakRef === 'function' && value instanceof WeakRef)) throw cannotClone(value);
    const platform = platformClone(value);
    if (platform !== null) {
      if (!platform.ok) throw cannotClone(value);
      return set(platform.value);
    }
    if (isArray(value)) out = set(new Array(value.length));
    else out = set({});
    for (const k of keys(value)) {
      out[k] = clone(value[k], memory);
    }
    return out;
  }

  function structuredClone(value, options = undefined) {
    if (arguments.length === 0) throw new TypeError("Failed to execute 'structuredClone': 1 argument required, but only 0 present.");
    const transfer = options == null || options.transfer === undefined ? [] : Array.from(options.transfer);
    const seen = new Set();
    for (const t of transfer) {
      if (!isArrayBuffer(t)) throw new DOMException('Value not transferable', 'DataCloneError');
      if (seen.has(t)) throw new DOMException('ArrayBuffer at index is a duplicate of an earlier ArrayBuffer.', 'DataCloneError');
      if (t.detached) throw new DOMException('An ArrayBuffer is detached and could not be cloned.', 'DataCloneError');
      seen.add(t);
    }
    const memory = new Map();
    for (const t of transfer) memory.set(t, t.slice(0));
    const result = clone(value, memory);
    for (const t of transfer) t.transfer(); // detach the originals
    return result;
  }

  return { structuredClone };
}
