// structuredClone (HTML Standard, https://html.spec.whatwg.org/#dom-structuredclone).
// Deep copy with cycles and shared references kept: primitives, boxed primitives, Date, RegExp,
// ArrayBuffer (resizable ones stay resizable with their maxByteLength; optionally transferred)
// and its views (length-tracking views stay length-tracking; an out-of-bounds view throws), Map,
// Set, Error types, arrays, plain objects, and the serializable platform objects of this library
// (Blob, File, DOMException). Every type is recognised by its internal slots, read through the
// intrinsic getters, so an instance of a subclass clones as its nearest serializable base (a
// subclass of Map as a Map, of Uint8Array as a Uint8Array) whatever it overrides. Functions,
// symbols, WeakMap/WeakSet/WeakRef/Promise and other platform objects throw DataCloneError.
(host) => {
  'use strict';
  const INTERNAL = Symbol.for('codemode.stdlib.internal');
  const { DOMException } = host.require('domexception');
  const O = Object;
  const { keys, getOwnPropertyDescriptor, getPrototypeOf, defineProperty } = O;
  const hasOwn = O.prototype.hasOwnProperty;
  const isArray = Array.isArray;
  const isView = ArrayBuffer.isView;
  const getter = (proto, key) => getOwnPropertyDescriptor(proto, key).get;
  const brand = (get) => (v) => { try { get.call(v); return true; } catch { return false; } };
  const tryCall = (fn, v) => { try { fn.call(v); return true; } catch { return false; } };

  const abByteLength = getter(ArrayBuffer.prototype, 'byteLength');
  const abMaxByteLength = getter(ArrayBuffer.prototype, 'maxByteLength');
  const abResizable = getter(ArrayBuffer.prototype, 'resizable');
  const abDetached = getter(ArrayBuffer.prototype, 'detached');
  const abResize = ArrayBuffer.prototype.resize;
  const abTransfer = ArrayBuffer.prototype.transfer;
  const isArrayBuffer = brand(abByteLength);
  const isSharedArrayBuffer = typeof SharedArrayBuffer === 'function' ? brand(getter(SharedArrayBuffer.prototype, 'byteLength')) : () => false;
  const TypedArrayProto = getPrototypeOf(Uint8Array.prototype);
  const taName = getter(TypedArrayProto, Symbol.toStringTag); // undefined for anything else
  const taBuffer = getter(TypedArrayProto, 'buffer');
  const taByteOffset = getter(TypedArrayProto, 'byteOffset');
  const taByteLength = getter(TypedArrayProto, 'byteLength');
  const taLength = getter(TypedArrayProto, 'length');
  const taKeys = TypedArrayProto.keys; // throws TypeError on an out-of-bounds or detached view
  const dvBuffer = getter(DataView.prototype, 'buffer');
  const dvByteOffset = getter(DataView.prototype, 'byteOffset'); // throws when out of bounds
  const dvByteLength = getter(DataView.prototype, 'byteLength'); // throws when out of bounds
  const isDataView = brand(dvBuffer);
  const isMap = brand(getter(Map.prototype, 'size'));
  const isSet = brand(getter(Set.prototype, 'size'));
  const isDate = (v) => tryCall(Date.prototype.getTime, v);
  const reSource = getter(RegExp.prototype, 'source');
  const isRegExp = (v) => v !== RegExp.prototype && tryCall(reSource, v);
  // [[OriginalFlags]] through the per-flag getters, which read the slot (the `flags` getter
  // reads overridable properties instead).
  const FLAG_GETTERS = [['d', 'hasIndices'], ['g', 'global'], ['i', 'ignoreCase'], ['m', 'multiline'],
    ['s', 'dotAll'], ['u', 'unicode'], ['v', 'unicodeSets'], ['y', 'sticky']]
    .filter(([, k]) => hasOwn.call(RegExp.prototype, k)).map(([f, k]) => [f, getter(RegExp.prototype, k)]);
  const regExpFlags = (re) => FLAG_GETTERS.map(([f, get]) => (get.call(re) ? f : '')).join('');
  const isError = typeof Error.isError === 'function' ? Error.isError : (v) => v instanceof Error;
  const ERROR_CTORS = { Error, EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError };
  const TYPED = { Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array,
    Float32Array, Float64Array, BigInt64Array, BigUint64Array };
  if (typeof Float16Array === 'function') TYPED.Float16Array = Float16Array;
  const BOXED = [[Boolean, (v) => new Boolean(v)], [Number, (v) => new Number(v)], [BigInt, (v) => O(v)], [String, (v) => new String(v)]];
  const objToString = (v) => O.prototype.toString.call(v);

  const dataCloneError = (message) => new DOMException(message, 'DataCloneError');
  const cannotClone = (v) => {
    let what;
    try { what = typeof v === 'function' ? (v.name ? `function ${v.name}` : 'function') : typeof v === 'symbol' ? v.toString() : objToString(v); }
    catch { what = 'value'; }
    return dataCloneError(`${what} could not be cloned.`);
  };

  // A platform object: something on its prototype chain (below Object.prototype) carries a
  // non-writable data @@toStringTag, as every interface of this library and the engine does; a
  // class written in the program (an accessor @@toStringTag, or none) is an ordinary object.
  function isPlatformObject(value) {
    for (let proto = getPrototypeOf(value); proto !== null && proto !== O.prototype && proto !== Array.prototype; proto = getPrototypeOf(proto)) {
      const d = getOwnPropertyDescriptor(proto, Symbol.toStringTag);
      if (d !== undefined && 'value' in d && !d.writable) return true;
    }
    return false;
  }

  // ---- ArrayBuffers and views ---------------------------------------------------------------

  function copyBuffer(buffer) {
    const length = abByteLength.call(buffer);
    const copy = abResizable.call(buffer) ? new ArrayBuffer(length, { maxByteLength: abMaxByteLength.call(buffer) }) : new ArrayBuffer(length);
    new Uint8Array(copy).set(new Uint8Array(buffer));
    return copy;
  }

  // Whether a view of a resizable buffer tracks the buffer's length ([[ArrayLength]]/[[ByteLength]]
  // auto). Nothing reads that slot directly, so the buffer is resized by one element and back
  // (restoring any bytes the probe cut off); a fixed-length view's byteLength does not follow.
  function tracksLength(view, buffer, elementSize, byteLengthOf) {
    const length = abByteLength.call(buffer), max = abMaxByteLength.call(buffer);
    const before = byteLengthOf(view);
    if (length + elementSize <= max) {
      abResize.call(buffer, length + elementSize);
      const after = byteLengthOf(view);
      abResize.call(buffer, length);
      return after === before + elementSize;
    }
    if (length < elementSize || before < elementSize) return false;
    const saved = new Uint8Array(buffer, length - elementSize, elementSize).slice();
    abResize.call(buffer, length - elementSize);
    let after = -1;
    try { after = byteLengthOf(view); } catch { /* out of bounds: fixed length */ }
    abResize.call(buffer, length);
    new Uint8Array(buffer, length - elementSize).set(saved);
    return after === before - elementSize;
  }

  function cloneView(value, memory) {
    if (isDataView(value)) {
      let byteOffset, byteLength;
      try { byteOffset = dvByteOffset.call(value); byteLength = dvByteLength.call(value); }
      catch { throw dataCloneError('A DataView whose buffer shrank below it (or was detached) could not be cloned.'); }
      const buffer = dvBuffer.call(value);
      const tracking = !isSharedArrayBuffer(buffer) && abResizable.call(buffer) && tracksLength(value, buffer, 1, (v) => dvByteLength.call(v));
      const copy = clone(buffer, memory);
      return tracking ? new DataView(copy, byteOffset) : new DataView(copy, byteOffset, byteLength);
    }
    const name = taName.call(value);
    const Ctor = TYPED[name];
    if (Ctor === undefined) throw cannotClone(value);
    if (!tryCall(taKeys, value)) throw dataCloneError(`A ${name} whose buffer shrank below it (or was detached) could not be cloned.`);
    const buffer = taBuffer.call(value);
    const tracking = !isSharedArrayBuffer(buffer) && abResizable.call(buffer) && tracksLength(value, buffer, Ctor.BYTES_PER_ELEMENT, (v) => taByteLength.call(v));
    const byteOffset = taByteOffset.call(value), length = taLength.call(value);
    const copy = clone(buffer, memory);
    return tracking ? new Ctor(copy, byteOffset) : new Ctor(copy, byteOffset, length);
  }

  // ---- errors ------------------------------------------------------------------------------

  function cloneError(value, memory, set) {
    let name = value.name; // HTML: ? Get(value, "name"), an exception propagates
    if (typeof name !== 'string' || !hasOwn.call(ERROR_CTORS, name)) name = 'Error';
    const d = getOwnPropertyDescriptor(value, 'message');
    const message = d !== undefined && 'value' in d ? String(d.value) : undefined;
    const out = set(new ERROR_CTORS[name]());
    if (message !== undefined) defineProperty(out, 'message', { value: message, writable: true, configurable: true, enumerable: false });
    const stack = getOwnPropertyDescriptor(value, 'stack');
    if (stack && typeof stack.value === 'string') defineProperty(out, 'stack', { value: stack.value, writable: true, configurable: true, enumerable: false });
    else if (stack === undefined) delete out.stack;
    const cause = getOwnPropertyDescriptor(value, 'cause');
    if (cause && 'value' in cause) defineProperty(out, 'cause', { value: clone(cause.value, memory), writable: true, configurable: true, enumerable: false });
    return out;
  }

  // ---- the walk (HTML StructuredSerializeInternal, then deserialization, in one pass) --------

  function clone(value, memory) {
    if (typeof value === 'symbol' || typeof value === 'function') throw cannotClone(value);
    if (value === null || typeof value !== 'object') return value;
    if (memory.has(value)) return memory.get(value);
    const set = (v) => { memory.set(value, v); return v; };

    for (const [P, make] of BOXED) {
      let prim;
      try { prim = P.prototype.valueOf.call(value); } catch { continue; }
      return set(make(prim));
    }
    if (tryCall(Symbol.prototype.valueOf, value)) throw cannotClone(value);
    if (isDate(value)) return set(new Date(Date.prototype.getTime.call(value)));
    if (isRegExp(value)) return set(new RegExp(reSource.call(value), regExpFlags(value)));
    if (isSharedArrayBuffer(value)) return set(value);
    if (isArrayBuffer(value)) {
      if (abDetached.call(value)) throw dataCloneError('A detached ArrayBuffer could not be cloned.');
      return set(copyBuffer(value));
    }
    if (isView(value)) return set(cloneView(value, memory));
    if (isMap(value)) {
      const out = set(new Map());
      const entries = Array.from(Map.prototype.entries.call(value));
      for (const [k, v] of entries) out.set(clone(k, memory), clone(v, memory));
      return out;
    }
    if (isSet(value)) {
      const out = set(new Set());
      const values = Array.from(Set.prototype.values.call(value));
      for (const v of values) out.add(clone(v, memory));
      return out;
    }
    if (value instanceof DOMException) {
      const copy = new DOMException(value.message, value.name);
      if (typeof value.stack === 'string') defineProperty(copy, 'stack', { value: value.stack, writable: true, configurable: true });
      return set(copy);
    }
    if (isError(value)) return cloneError(value, memory, set);
    if (value instanceof Promise || value instanceof WeakMap || value instanceof WeakSet ||
        (typeof WeakRef === 'function' && value instanceof WeakRef) ||
        (typeof FinalizationRegistry === 'function' && value instanceof FinalizationRegistry)) throw cannotClone(value);
    let out;
    if (isArray(value)) out = set(new Array(value.length));
    else if (isPlatformObject(value)) {
      const blob = host.require('blob')[INTERNAL];
      if (blob.isBlob(value)) return set(blob.clone(value));
      throw cannotClone(value);
    } else out = set({});
    for (const k of keys(value)) {
      // A getter may delete a later key: HTML reads only keys still present.
      if (hasOwn.call(value, k)) out[k] = clone(value[k], memory);
    }
    return out;
  }

  function structuredClone(value, options = undefined) {
    if (arguments.length === 0) throw new TypeError("Failed to execute 'structuredClone': 1 argument required, but only 0 present.");
    if (options !== undefined && options !== null && typeof options !== 'object' && typeof options !== 'function') {
      throw new TypeError("Failed to execute 'structuredClone': The provided options are not an object; pass { transfer: [buffers] } or nothing.");
    }
    const transfer = options == null || options.transfer === undefined ? [] : Array.from(options.transfer);
    const seen = new Set();
    for (const t of transfer) {
      if (!isArrayBuffer(t)) throw dataCloneError('Value not transferable: only ArrayBuffers can be transferred.');
      if (seen.has(t)) throw dataCloneError('ArrayBuffer at index is a duplicate of an earlier ArrayBuffer.');
      if (abDetached.call(t)) throw dataCloneError('An ArrayBuffer is detached and could not be cloned.');
      seen.add(t);
    }
    const memory = new Map();
    for (const t of transfer) memory.set(t, copyBuffer(t));
    const result = clone(value, memory);
    for (const t of transfer) abTransfer.call(t); // detach the originals
    return result;
  }

  return { structuredClone };
}
