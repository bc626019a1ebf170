// The long-line copier: what the runtime (runtime.js, "the outbound journal") loads on the
// first line of 16,384 UTF-16 units or more in an isolate, through a synchronous request,
// so that no isolate carries it in its snapshot. One function expression: called with the
// runtime's captured built-ins, it returns copy(line, n, units, at), which puts line's n
// UTF-16 units into units (a Uint16Array) at index at and says whether it could, or null
// when WebAssembly is not the engine's own any more (a program replaced or deleted what it
// needs): the runtime then keeps its interpreter loop.
//
// The copy is a WebAssembly function: the engine's js-string builtin intoCharCodeArray
// takes the string's units into a GC array in one step, a loop stores them into the
// module's memory, and one TypedArray.prototype.set moves them into the journal. The
// module (185 bytes below):
//   (module
//     (type $units (array (mut i16)))
//     (import "wasm:js-string" "intoCharCodeArray"
//       (func $into (param externref (ref null $units) i32) (result i32)))
//     (import "c" "m" (memory 1))
//     (global $buffer (mut (ref null $units)) (ref.null $units))
//     (func (export "put") (param $s externref) (param $n i32)
//       (local $i i32) (local $b (ref null $units))
//       (if (ref.is_null (global.get $buffer))
//         (then (global.set $buffer (array.new_default $units (local.get $n)))))
//       (if (i32.lt_u (array.len (global.get $buffer)) (local.get $n))
//         (then (global.set $buffer (array.new_default $units (local.get $n)))))
//       (local.set $b (global.get $buffer))
//       (drop (call $into (local.get $s) (local.get $b) (i32.const 0)))
//       (block $done
//         (loop $next
//           (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
//           (i32.store16 (i32.shl (local.get $i) (i32.const 1))
//                        (array.get_u $units (local.get $b) (local.get $i)))
//           (local.set $i (i32.add (local.get $i) (i32.const 1)))
//           (br $next)))))
(function makeCopier(rt) {  // rt: the runtime's captures (copierBuiltins)
  'use strict';
  // (By index: destructuring would go through Array.prototype's iterator, a program's to replace.)
  const G = rt[0];
  const ReflectApply = rt[1];
  const FunctionToString = rt[2];
  const getOwnPropertyDescriptor = rt[3];
  const Uint8ArrayCtor = rt[4];
  const Uint16ArrayCtor = rt[5];
  const typedArraySet = rt[6];
  const byteLength = rt[7];
  const BYTES = [0,97,115,109,1,0,0,0,1,17,3,94,119,1,96,3,111,99,0,127,1,127,96,2,111,127,0,2,43,2,14,119,97,115,109,58,106,115,45,115,116,114,105,110,103,17,105,110,116,111,67,104,97,114,67,111,100,101,65,114,114,97,121,0,1,1,99,1,109,2,0,1,3,2,1,2,6,7,1,99,0,1,208,0,11,7,7,1,3,112,117,116,0,1,10,89,1,87,2,1,127,1,99,0,35,0,209,4,64,32,1,251,7,0,36,0,11,35,0,251,15,32,1,73,4,64,32,1,251,7,0,36,0,11,35,0,33,3,32,0,32,3,65,0,16,0,26,2,64,3,64,32,2,32,1,79,13,1,32,2,65,1,116,32,3,32,2,251,13,0,59,1,0,32,2,65,1,106,33,2,12,0,11,11,11];
  const isNative = (f, name) => typeof f === 'function' &&
    ReflectApply(FunctionToString, f, []) === `function ${name}() { [native code] }`;
  const W = G.WebAssembly;
  const exportsOf = (getOwnPropertyDescriptor(W.Instance.prototype, 'exports') || {}).get;
  const bufferOf = (getOwnPropertyDescriptor(W.Memory.prototype, 'buffer') || {}).get;
  const grow = W.Memory.prototype.grow;
  const Module = W.Module;
  const Instance = W.Instance;
  const Memory = W.Memory;
  if (!(isNative(Module, 'Module') && isNative(Instance, 'Instance') && isNative(Memory, 'Memory') &&
        isNative(exportsOf, 'get exports') && isNative(bufferOf, 'get buffer') && isNative(grow, 'grow'))) {
    return null;
  }
  // (Filled by index: a typed array made from an array would read it through its iterator.)
  const bytes = new Uint8ArrayCtor(BYTES.length);
  for (let i = 0; i < BYTES.length; i++) bytes[i] = BYTES[i];
  const module = new Module(bytes, { builtins: ['js-string'] });
  const memory = new Memory({ initial: 1 });
  const put = ReflectApply(exportsOf, new Instance(module, { c: { m: memory } }), []).put;
  if (typeof put !== 'function') return null;
  return function copy(line, n, units, at) {
    let buffer = ReflectApply(bufferOf, memory, []);
    const room = ReflectApply(byteLength, buffer, []);
    if (room < 2 * n) {
      ReflectApply(grow, memory, [((2 * n - room + 65535) / 65536) | 0]);
      buffer = ReflectApply(bufferOf, memory, []);
    }
    put(line, n);
    ReflectApply(typedArraySet, units, [new Uint16ArrayCtor(buffer, 0, n), at]);
    return true;
  };
})
