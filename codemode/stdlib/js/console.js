// console (Console Standard, https://console.spec.whatwg.org/), printing values the way
// Node's console / util.inspect does: `{ a: 1, b: 'x' }`, `[ 1, 2, 3 ]`, `[Object]` past depth 2,
// `[Function: f]`, Map/Set, errors with their stack, `<ref *1>` ... `[Circular *1]`.
// Every call becomes one entry through host.log(level, text).
(host) => {
  'use strict';
  const log = host.log;
  const O = Object;
  const { keys, getOwnPropertyNames, getOwnPropertySymbols, getOwnPropertyDescriptor, getPrototypeOf } = O;
  const objToString = (v) => O.prototype.toString.call(v);
  const isArray = Array.isArray;
  const isView = ArrayBuffer.isView;
  const fnToString = (f) => Function.prototype.toString.call(f);
  const errorToString = (e) => Error.prototype.toString.call(e);
  const dateNow = Date.now;
  const inspectCustom = Symbol.for('nodejs.util.inspect.custom');
  const mapSize = getOwnPropertyDescriptor(Map.prototype, 'size').get;
  const setSize = getOwnPropertyDescriptor(Set.prototype, 'size').get;
  const mapEntries = (m) => Map.prototype.entries.call(m);
  const setValues = (s) => Set.prototype.values.call(s);
  const dateToISO = (d) => Date.prototype.toISOString.call(d);
  const dateGetTime = (d) => Date.prototype.getTime.call(d);
  const regexpToString = (r) => RegExp.prototype.toString.call(r);
  const typedArrayTag = getOwnPropertyDescriptor(getPrototypeOf(Uint8Array.prototype), Symbol.toStringTag).get;
  const abByteLength = getOwnPropertyDescriptor(ArrayBuffer.prototype, 'byteLength').get;
  const kIdent = /^[a-zA-Z_][a-zA-Z_0-9]*$/;

  const DEFAULTS = { depth: 2, showHidden: false, breakLength: 80, compact: 3,
    maxArrayLength: 100, maxStringLength: 10000, customInspect: true, sorted: false };

  const is = (tag) => (v) => { try { return objToString(v) === tag; } catch { return false; } };
  const brand = (getter) => (v) => { try { getter.call(v); return true; } catch { return false; } };
  const isMap = brand(mapSize), isSet = brand(setSize);
  const isDate = brand(Date.prototype.getTime);
  const isRegExp = (v) => { try { RegExp.prototype.exec.call(v, ''); return true; } catch { return false; } };
  const isArrayBuffer = brand(abByteLength);
  const isError = (v) => v instanceof Error || is('[object Error]')(v);
  const isArguments = is('[object Arguments]');
  const isBoxed = (v) => {
    for (const [P, name] of [[Number, 'Number'], [String, 'String'], [Boolean, 'Boolean'], [Symbol, 'Symbol'], [BigInt, 'BigInt']]) {
      try { P.prototype.valueOf.call(v); return name; } catch { /* next */ }
    }
    return null;
  };

  // ---- strings ------------------------------------------------------------------------------

  const META = [];
  for (let i = 0; i < 0x20; i++) META[i] = '\\x' + i.toString(16).toUpperCase().padStart(2, '0');
  META[8] = '\\b'; META[9] = '\\t'; META[10] = '\\n'; META[12] = '\\f'; META[13] = '\\r';
  META[0x27] = "\\'"; META[0x5c] = '\\\\'; META[0x7f] = '\\x7F';

  function strEscape(str) {
    let quote = "'";
    if (str.includes("'")) {
      if (!str.includes('"')) quote = '"';
      else if (!str.includes('`') && !str.includes('${')) quote = '`';
    }
    let out = '';
    for (let i = 0; i < str.length; i++) {
      const c = str.charCodeAt(i);
      if (c === quote.charCodeAt(0) || c === 0x5c || c < 0x20 || c === 0x7f) {
        out += c === 0x27 ? (quote === "'" ? "\\'" : "'") : META[c];
      } else if (c >= 0xd800 && c <= 0xdfff) {
        const d = str.charCodeAt(i + 1);
        if (c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff) { out += str[i] + str[i + 1]; i++; }
        else out += '\\u' + c.toString(16);
      } else {
        out += str[i];
      }
    }
    return quote + out + quote;
  }

  function formatString(ctx, value) {
    let trailer = '';
    if (value.length > ctx.maxStringLength) {
      const remaining = value.length - ctx.maxStringLength;
      value = value.slice(0, ctx.maxStringLength);
      trailer = `... ${remaining} more character${remaining > 1 ? 's' : ''}`;
    }
    if (ctx.compact !== true && value.length > 16 && value.length > ctx.breakLength - ctx.indentationLvl - 4) {
      const lines = value.split(/(?<=\n)/);
      if (lines.length > 1) {
        const indent = ' '.repeat(ctx.indentationLvl);
        return lines.map(strEscape).join(` +\n${indent}  `) + trailer;
      }
    }
    return strEscape(value) + trailer;
  }

  const formatNumber = (n) => (O.is(n, -0) ? '-0' : `${n}`);

  function formatPrimitive(ctx, v) {
    switch (typeof v) {
      case 'string': return formatString(ctx, v);
      case 'number': return formatNumber(v);
      case 'bigint': return `${v}n`;
      case 'boolean': return `${v}`;
      case 'undefined': return 'undefined';
      case 'symbol': return v.toString();
      default: return 'null';
    }
  }

  // ---- objects ------------------------------------------------------------------------------

  function constructorName(obj) {
    let o = obj;
    while (o !== null && o !== undefined) {
      let d;
      try { d = getOwnPropertyDescriptor(o, 'constructor'); } catch { return null; }
      if (d !== undefined && typeof d.value === 'function' && d.value.name !== '') return d.value.name;
      try { o = getPrototypeOf(o); } catch { return null; }
    }
    return null;
  }

  function getPrefix(ctor, tag, fallback, size = '') {
    if (ctor === null) {
      if (tag !== '' && fallback !== tag) return `[${fallback}${size}: null prototype] [${tag}] `;
      return `[${fallback}${size}: null prototype] `;
    }
    if (tag !== '' && ctor !== tag) return `${ctor}${size} [${tag}] `;
    return `${ctor}${size} `;
  }

  function ownKeys(value, showHidden) {
    let names;
    try {
      names = showHidden ? getOwnPropertyNames(value) : keys(value);
      const symbols = getOwnPropertySymbols(value);
      for (const s of symbols) {
        if (showHidden || O.prototype.propertyIsEnumerable.call(value, s)) names.push(s);
      }
    } catch { names = []; }
    return names;
  }

  function formatKey(key, enumerable) {
    if (typeof key === 'symbol') return `[${key.toString()}]`;
    if (!enumerable) return `[${key}]`;
    return kIdent.test(key) ? key : strEscape(key);
  }

  function formatProperty(ctx, value, recurseTimes, key, arrayItem) {
    let desc;
    try { desc = getOwnPropertyDescriptor(value, key) || { value: value[key], enumerable: true }; }
    catch { desc = { value: undefined, enumerable: true }; }
    let str;
    if (desc.value !== undefined || !('get' in desc)) {
      ctx.indentationLvl += 2;
      str = formatValue(ctx, desc.value, recurseTimes);
      ctx.indentationLvl -= 2;
    } else if (desc.get !== undefined) {
      str = desc.set !== undefined ? '[Getter/Setter]' : '[Getter]';
    } else {
      str = desc.set !== undefined ? '[Setter]' : 'undefined';
    }
    if (arrayItem) return str;
    return `${formatKey(key, desc.enumerable)}: ${str}`;
  }

  function formatArrayLike(ctx, value, recurseTimes, length, extraKeysOut) {
    const output = [];
    const max = Math.min(ctx.maxArrayLength, length);
    let holes = 0;
    const flushHoles = () => {
      if (holes) { output.push(`<${holes} empty item${holes > 1 ? 's' : ''}>`); holes = 0; }
    };
    for (let i = 0; i < max; i++) {
      if (!O.prototype.hasOwnProperty.call(value, i)) { holes++; continue; }
      flushHoles();
      output.push(formatProperty(ctx, value, recurseTimes, i, true));
    }
    flushHoles();
    if (length > max) output.push(`... ${length - max} more item${length - max > 1 ? 's' : ''}`);
    void extraKeysOut;
    return output;
  }

  function formatTypedArray(ctx, value, length) {
    const output = [];
    const max = Math.min(ctx.maxArrayLength, length);
    for (let i = 0; i < max; i++) output.push(typeof value[i] === 'bigint' ? `${value[i]}n` : formatNumber(value[i]));
    if (length > max) output.push(`... ${length - max} more item${length - max > 1 ? 's' : ''}`);
    return output;
  }

  function formatArrayBuffer(ctx, value) {
    const bytes = new Uint8Array(value);
    let hex = '';
    const max = Math.min(ctx.maxArrayLength, bytes.length);
    for (let i = 0; i < max; i++) hex += (i ? ' ' : '') + bytes[i].toString(16).padStart(2, '0');
    if (bytes.length > max) hex += ` ... ${bytes.length - max} more byte${bytes.length - max > 1 ? 's' : ''}`;
    return [`[Uint8Contents]: <${hex}>`, `byteLength: ${bytes.length}`];
  }

  function functionBase(value, ctor, tag) {
    let src = '';
    try { src = fnToString(value); } catch { /* native */ }
    if (src.startsWith('class') && /^class\s*[\s{]/.test(src.replace(/^class\s+[\w$]+/, 'class '))) {
      let base = `[class ${value.name || '(anonymous)'}`;
      if (ctor !== 'Function' && ctor !== null) base += ` [${ctor}]`;
      const m = /^class(?:\s+[\w$]+)?\s+extends\s+([\w$.]+)/.exec(src);
      if (m) base += ` extends ${m[1]}`;
      return base + ']';
    }
    let type = 'Function';
    if (tag === 'AsyncFunction' || tag === 'GeneratorFunction' || tag === 'AsyncGeneratorFunction') type = tag;
    let base = `[${type}`;
    if (ctor === null) base += ' (null prototype)';
    base += value.name === '' ? ' (anonymous)' : `: ${value.name}`;
    base += ']';
    if (ctor !== type && ctor !== null) base += ` ${ctor}`;
    return base;
  }

  function formatError(ctx, err, keysOut) {
    let stack;
    try { stack = typeof err.stack === 'string' && err.stack ? err.stack : errorToString(err); }
    catch { stack = '[Error]'; }
    const pos = stack.indexOf('\n    at');
    if (pos === -1) stack = `[${stack}]`;
    if (ctx.indentationLvl !== 0) stack = stack.replace(/\n/g, `\n${' '.repeat(ctx.indentationLvl)}`);
    // `cause` is shown although it is not enumerable.
    try {
      const d = getOwnPropertyDescriptor(err, 'cause');
      if (d && !d.enumerable && !keysOut.includes('cause')) keysOut.push('cause');
    } catch { /* ignored */ }
    return stack;
  }

  function groupArrayElements(ctx, output, value) {
    let totalLength = 0, maxLength = 0, i = 0;
    let outputLength = output.length;
    if (ctx.maxArrayLength < output.length) outputLength--; // the "... more items" entry
    const separatorSpace = 2;
    const dataLen = new Array(outputLength);
    for (; i < outputLength; i++) {
      const len = output[i].length;
      dataLen[i] = len;
      totalLength += len + separatorSpace;
      if (maxLength < len) maxLength = len;
    }
    const actualMax = maxLength + separatorSpace;
    if (actualMax * 3 + ctx.indentationLvl < ctx.breakLength &&
        (totalLength / actualMax > 5 || maxLength <= 6)) {
      const averageBias = Math.sqrt(actualMax - totalLength / output.length);
      const biasedMax = Math.max(actualMax - 3 - averageBias, 1);
      const columns = Math.min(
        Math.round(Math.sqrt(2.5 * biasedMax * outputLength) / biasedMax),
        Math.floor((ctx.breakLength - ctx.indentationLvl) / actualMax),
        ctx.compact * 4,
        15,
      );
      if (columns <= 1) return output;
      const tmp = [];
      const maxLineLength = [];
      for (let c = 0; c < columns; c++) {
        let lineLength = 0;
        for (let j = c; j < output.length; j += columns) if (dataLen[j] > lineLength) lineLength = dataLen[j];
        maxLineLength.push(lineLength + separatorSpace);
      }
      let padStart = true;
      if (value !== undefined) {
        for (let k = 0; k < output.length; k++) {
          if (typeof value[k] !== 'number' && typeof value[k] !== 'bigint') { padStart = false; break; }
        }
      }
      for (let k = 0; k < outputLength; k += columns) {
        const max = Math.min(k + columns, outputLength);
        let str = '';
        let j = k;
        for (; j < max - 1; j++) {
          const cell = `${output[j]}, `;
          str += padStart ? cell.padStart(maxLineLength[j - k], ' ') : cell.padEnd(maxLineLength[j - k], ' ');
        }
        str += padStart ? output[j].padStart(maxLineLength[j - k] - separatorSpace, ' ') : output[j];
        tmp.push(str);
      }
      if (ctx.maxArrayLength < output.length) tmp.push(output[outputLength]);
      output = tmp;
    }
    return output;
  }

  function isBelowBreakLength(ctx, output, start, base) {
    let totalLength = output.length + start;
    if (totalLength + output.length > ctx.breakLength) return false;
    for (let i = 0; i < output.length; i++) {
      totalLength += output[i].length;
      if (totalLength > ctx.breakLength) return false;
    }
    return base === '' || !base.includes('\n');
  }

  function reduceToSingleString(ctx, output, base, braces, isArrayType, recurseTimes, value) {
    if (ctx.compact !== true) {
      if (typeof ctx.compact === 'number' && ctx.compact >= 1) {
        const entries = output.length;
        if (isArrayType && entries > 6) output = groupArrayElements(ctx, output, value);
        if (ctx.currentDepth - recurseTimes < ctx.compact && entries === output.length) {
          const start = output.length + ctx.indentationLvl + braces[0].length + base.length + 10;
          if (isBelowBreakLength(ctx, output, start, base)) {
            const joined = output.join(', ');
            if (!joined.includes('\n')) return `${base ? `${base} ` : ''}${braces[0]} ${joined} ${braces[1]}`;
          }
        }
      }
      const indentation = `\n${' '.repeat(ctx.indentationLvl)}`;
      return `${base ? `${base} ` : ''}${braces[0]}${indentation}  ${output.join(`,${indentation}  `)}${indentation}${braces[1]}`;
    }
    if (isBelowBreakLength(ctx, output, 0, base)) {
      return `${braces[0]}${base ? ` ${base}` : ''} ${output.join(', ')} ${braces[1]}`;
    }
    const indentation = ' '.repeat(ctx.indentationLvl);
    const ln = base === '' && braces[0].length === 1 ? ' ' : `${base ? ` ${base}` : ''}\n${indentation}  `;
    return `${braces[0]}${ln}${output.join(`,\n${indentation}  `)} ${braces[1]}`;
  }

  function formatValue(ctx, value, recurseTimes, typedArray) {
    if (typeof value !== 'object' && typeof value !== 'function') return formatPrimitive(ctx, value);
    if (value === null) return 'null';
    if (ctx.customInspect) {
      let custom;
      try { custom = value[inspectCustom]; } catch { custom = undefined; }
      if (typeof custom === 'function' && custom !== inspect) {
        const depth = ctx.depth === null ? null : ctx.depth - recurseTimes;
        const ret = custom.call(value, depth, { ...ctx, depth }, inspect);
        if (ret !== value) {
          if (typeof ret !== 'string') return formatValue(ctx, ret, recurseTimes);
          return ret.replace(/\n/g, `\n${' '.repeat(ctx.indentationLvl)}`);
        }
      }
    }
    if (ctx.seen.includes(value)) {
      let index = 1;
      if (ctx.circular === undefined) {
        ctx.circular = new Map();
        ctx.circular.set(value, index);
      } else {
        index = ctx.circular.get(value);
        if (index === undefined) { index = ctx.circular.size + 1; ctx.circular.set(value, index); }
      }
      return `[Circular *${index}]`;
    }
    return formatRaw(ctx, value, recurseTimes, typedArray);
  }

  function formatRaw(ctx, value, recurseTimes) {
    const ctor = constructorName(value);
    let tag = '';
    try { tag = value[Symbol.toStringTag]; } catch { /* ignored */ }
    if (typeof tag !== 'string') tag = '';
    let keyList = ownKeys(value, ctx.showHidden);
    let base = '';
    let braces;
    let formatter = () => [];
    let isArrayType = false;
    let noEntries = false;
    const protoName = ctor;

    if (isArray(value)) {
      keyList = keyList.filter((k) => typeof k === 'symbol' || !/^(0|[1-9][0-9]*)$/.test(k) || Number(k) >= 2 ** 32 - 1);
      if (!ctx.showHidden) keyList = keyList.filter((k) => k !== 'length');
      const prefix = (ctor !== 'Array' || tag !== '') ? getPrefix(ctor, tag, 'Array', `(${value.length})`) : '';
      braces = [`${prefix}[`, ']'];
      if (value.length === 0 && keyList.length === 0) return `${braces[0]}]`;
      isArrayType = true;
      formatter = () => formatArrayLike(ctx, value, recurseTimes, value.length);
    } else if (isSet(value)) {
      const size = setSize.call(value);
      const prefix = getPrefix(ctor, tag, 'Set', `(${size})`);
      if (size === 0 && keyList.length === 0) return `${prefix}{}`;
      braces = [`${prefix}{`, '}'];
      formatter = () => {
        ctx.indentationLvl += 2;
        const out = [];
        let n = 0;
        for (const v of setValues(value)) {
          if (n++ >= ctx.maxArrayLength) { out.push(`... ${size - ctx.maxArrayLength} more item${size - ctx.maxArrayLength > 1 ? 's' : ''}`); break; }
          out.push(formatValue(ctx, v, recurseTimes));
        }
        ctx.indentationLvl -= 2;
        return out;
      };
    } else if (isMap(value)) {
      const size = mapSize.call(value);
      const prefix = getPrefix(ctor, tag, 'Map', `(${size})`);
      if (size === 0 && keyList.length === 0) return `${prefix}{}`;
      braces = [`${prefix}{`, '}'];
      formatter = () => {
        ctx.indentationLvl += 2;
        const out = [];
        let n = 0;
        for (const [k, v] of mapEntries(value)) {
          if (n++ >= ctx.maxArrayLength) { out.push(`... ${size - ctx.maxArrayLength} more item${size - ctx.maxArrayLength > 1 ? 's' : ''}`); break; }
          out.push(`${formatValue(ctx, k, recurseTimes)} => ${formatValue(ctx, v, recurseTimes)}`);
        }
        ctx.indentationLvl -= 2;
        return out;
      };
    } else if (isView(value) && !(value instanceof DataView) && typedArrayTag.call(value) !== undefined) {
      const fallback = typedArrayTag.call(value);
      const length = value.length;
      keyList = keyList.filter((k) => typeof k === 'symbol' || !/^(0|[1-9][0-9]*)$/.test(k));
      const prefix = getPrefix(ctor, tag === fallback ? '' : tag, fallback, `(${length})`);
      braces = [`${prefix}[`, ']'];
      if (length === 0 && keyList.length === 0) return `${braces[0]}]`;
      isArrayType = true;
      formatter = () => formatTypedArray(ctx, value, length);
    } else if (isArguments(value)) {
      braces = ['[Arguments] [', ']'];
      keyList = keyList.filter((k) => typeof k === 'symbol' || !/^(0|[1-9][0-9]*)$/.test(k));
      if (value.length === 0 && keyList.length === 0) return '[Arguments] []';
      isArrayType = true;
      formatter = () => formatArrayLike(ctx, value, recurseTimes, value.length);
    } else {
      noEntries = true;
      braces = ['{', '}'];
      if (typeof value === 'function') {
        base = functionBase(value, ctor, tag);
        keyList = keyList.filter((k) => k !== 'prototype' || ctx.showHidden);
        if (keyList.length === 0) return base;
      } else if (isRegExp(value)) {
        base = regexpToString(ctor !== null ? value : new RegExp(value));
        if (keyList.length === 0) return base;
        keyList = keyList.filter((k) => k !== 'lastIndex');
        if (keyList.length === 0) return base;
      } else if (isDate(value)) {
        base = Number.isNaN(dateGetTime(value)) ? 'Invalid Date' : dateToISO(value);
        if (keyList.length === 0) return base;
      } else if (isError(value)) {
        keyList = keyList.filter((k) => k !== 'stack' && k !== 'message');
        base = formatError(ctx, value, keyList);
        if (keyList.length === 0) return base;
      } else if (isArrayBuffer(value)) {
        const prefix = getPrefix(ctor, tag === 'ArrayBuffer' ? '' : tag, 'ArrayBuffer');
        if (recurseTimes > ctx.depth && ctx.depth !== null) return `[${prefix.trim()}]`;
        braces = [`${prefix}{`, '}'];
        formatter = () => formatArrayBuffer(ctx, value);
        noEntries = false;
      } else if (value instanceof DataView) {
        braces = [`${getPrefix(ctor, tag === 'DataView' ? '' : tag, 'DataView')}{`, '}'];
        formatter = () => [`byteLength: ${value.byteLength}`, `byteOffset: ${value.byteOffset}`,
          `buffer: ${formatValue(ctx, value.buffer, recurseTimes)}`];
        noEntries = false;
      } else if (value instanceof Promise) {
        braces = [`${getPrefix(ctor, tag === 'Promise' ? '' : tag, 'Promise')}{`, '}'];
        formatter = () => ['<state unknown>'];
        noEntries = false;
      } else if (value instanceof WeakMap || value instanceof WeakSet) {
        const name = value instanceof WeakMap ? 'WeakMap' : 'WeakSet';
        braces = [`${getPrefix(ctor, tag === name ? '' : tag, name)}{`, '}'];
        formatter = () => ['<items unknown>'];
        noEntries = false;
      } else {
        const boxed = isBoxed(value);
        if (boxed !== null) {
          const inner = value.valueOf();
          base = `[${boxed}${ctor !== boxed ? ` (${ctor === null ? 'null prototype' : ctor})` : ''}: ${formatPrimitive({ ...ctx, compact: 3, indentationLvl: 0 }, inner)}]`;
          if (boxed === 'String') keyList = keyList.filter((k) => typeof k === 'symbol' || !/^(0|[1-9][0-9]*)$/.test(k) || Number(k) >= inner.length);
          if (keyList.length === 0) return base;
        } else {
          if (ctor === 'Object') {
            if (tag !== '') braces[0] = `${getPrefix(ctor, tag, 'Object')}{`;
          } else {
            braces[0] = `${getPrefix(ctor, tag, 'Object')}{`;
          }
          if (keyList.length === 0) return `${braces[0]}}`;
        }
      }
    }

    if (recurseTimes > ctx.depth && ctx.depth !== null) {
      let name = getPrefix(protoName, tag, isArray(value) ? 'Array' : 'Object').slice(0, -1);
      if (protoName !== null) name = `[${name}]`;
      return name;
    }
    recurseTimes += 1;
    ctx.seen.push(value);
    ctx.currentDepth = recurseTimes;
    let output;
    try {
      output = formatter();
      for (const k of keyList) output.push(formatProperty(ctx, value, recurseTimes, k, false));
    } finally {
      ctx.seen.pop();
    }
    void noEntries;
    if (ctx.circular !== undefined) {
      const index = ctx.circular.get(value);
      if (index !== undefined) {
        const reference = `<ref *${index}>`;
        if (ctx.compact !== true) base = base === '' ? reference : `${reference} ${base}`;
        else braces[0] = `${reference} ${braces[0]}`;
      }
    }
    if (ctx.sorted) output.sort();
    return reduceToSingleString(ctx, output, base, braces, isArrayType, recurseTimes, value);
  }

  function inspect(value, options = undefined) {
    const ctx = { ...DEFAULTS, seen: [], indentationLvl: 0, currentDepth: 0, circular: undefined };
    if (options !== null && typeof options === 'object') {
      for (const k of keys(DEFAULTS)) if (options[k] !== undefined) ctx[k] = options[k];
      if (options.depth === null) ctx.depth = null;
      if (options.depth === Infinity) ctx.depth = null;
    }
    return formatValue(ctx, value, 0);
  }

  // ---- format (util.format / the console's formatter) ---------------------------------------

  function formatArg(arg) { return typeof arg === 'string' ? arg : inspect(arg); }

  function format(args) {
    if (args.length === 0) return '';
    const first = args[0];
    let a = 0;
    let str = '';
    if (typeof first === 'string' && args.length > 1) {
      a = 1;
      let last = 0;
      for (let i = 0; i < first.length - 1; i++) {
        if (first.charCodeAt(i) !== 37) continue; // '%'
        const c = first[i + 1];
        if (c === '%') { str += first.slice(last, i) + '%'; last = i + 2; i++; continue; }
        if (a >= args.length) continue;
        let piece;
        const arg = args[a];
        switch (c) {
          case 's':
            if (typeof arg === 'number') piece = formatNumber(arg);
            else if (typeof arg === 'bigint') piece = `${arg}n`;
            else if (typeof arg === 'symbol') piece = arg.toString();
            else if (arg !== null && typeof arg === 'object') {
              piece = hasOwnToString(arg) ? String(arg) : inspect(arg, { depth: 0 });
            } else piece = String(arg);
            break;
          case 'd':
            piece = typeof arg === 'bigint' ? `${arg}n` : typeof arg === 'symbol' ? 'NaN'
              : (arg !== null && typeof arg === 'object') ? formatNumber(Number(arg)) : formatNumber(Number(arg));
            break;
          case 'i':
            piece = typeof arg === 'bigint' ? `${arg}n` : typeof arg === 'symbol' ? 'NaN' : formatNumber(parseInt(arg));
            break;
          case 'f':
            piece = typeof arg === 'symbol' ? 'NaN' : formatNumber(parseFloat(arg));
            break;
          case 'j':
            try { piece = JSON.stringify(arg); } catch { piece = '[Circular]'; }
            break;
          case 'o':
            piece = inspect(arg, { showHidden: true, depth: 4 });
            break;
          case 'O':
            piece = inspect(arg);
            break;
          case 'c':
            piece = '';
            break;
          default:
            continue;
        }
        str += first.slice(last, i) + piece;
        last = i + 2;
        i++;
        a++;
      }
      str += first.slice(last);
      if (a < args.length) str += ' ';
    }
    for (let i = a; i < args.length; i++) str += (i > a ? ' ' : '') + formatArg(args[i]);
    return str;
  }

  function hasOwnToString(obj) {
    let o = obj;
    while (o !== null && o !== O.prototype && o !== Error.prototype) {
      if (O.prototype.hasOwnProperty.call(o, 'toString') && !(o === Array.prototype || o === Date.prototype)) {
        return isError(obj) ? o !== Error.prototype : true;
      }
      o = getPrototypeOf(o);
    }
    return false;
  }

  // ---- the console namespace ----------------------------------------------------------------

  let groupIndent = '';
  const counts = new Map();
  const timers = new Map();

  function emit(level, text) {
    if (groupIndent !== '') text = groupIndent + text.replace(/\n/g, `\n${groupIndent}`);
    log(level, text);
  }

  function formatTime(ms) {
    if (ms >= 60000) {
      const minutes = Math.floor(ms / 60000);
      const seconds = ((ms % 60000) / 1000).toFixed(3).padStart(6, '0');
      return `${minutes}:${seconds} (m:ss.mmm)`;
    }
    if (ms >= 1000) return `${Number((ms / 1000).toFixed(3))}s`;
    return `${Number(ms.toFixed(3))}ms`;
  }

  const now = () => dateNow();

  // console.table, after Node's: a box of the rows' own properties (or the listed columns).
  function table(data, properties) {
    if (data === null || typeof data !== 'object') return emit('log', format([data]));
    const ctx = { ...DEFAULTS, depth: 1, compact: 3, breakLength: Infinity, seen: [], indentationLvl: 0, currentDepth: 0, circular: undefined };
    const cell = (v) => formatValue({ ...ctx, seen: [] }, v, 1);
    const isMapData = isMap(data), isSetData = isSet(data);
    const rows = [];
    if (isMapData) { let i = 0; for (const [k, v] of mapEntries(data)) rows.push([String(i++), v, k]); }
    else if (isSetData) { let i = 0; for (const v of setValues(data)) rows.push([String(i++), v]); }
    else for (const k of keys(data)) rows.push([k, data[k]]);
    const columns = [];
    const seen = new Set();
    let hasValues = false;
    for (const [, v] of rows) {
      if (v !== null && typeof v === 'object' || typeof v === 'function') {
        for (const k of keys(v)) if (!seen.has(k)) { seen.add(k); columns.push(k); }
      } else hasValues = true;
    }
    const cols = properties !== undefined ? Array.from(properties, String) : columns;
    const header = [isMapData || isSetData ? '(iteration index)' : '(index)'];
    if (isMapData) header.push('Key');
    header.push(...cols);
    if (hasValues || isSetData) header.push('Values');
    const body = rows.map(([index, v, k]) => {
      const r = [index];
      if (isMapData) r.push(cell(k));
      const isObj = v !== null && (typeof v === 'object' || typeof v === 'function');
      for (const c of cols) r.push(isObj && O.prototype.hasOwnProperty.call(v, c) ? cell(v[c]) : '');
      if (hasValues || isSetData) r.push(isObj && !isSetData ? '' : cell(v));
      return r;
    });
    const widths = header.map((h, i) => Math.max(h.length, ...body.map((r) => r[i].length)) + 2);
    const line = (l, m, r) => l + widths.map((w) => '\u2500'.repeat(w)).join(m) + r;
    const row = (cells) => '\u2502' + cells.map((c, i) => ` ${c}${' '.repeat(widths[i] - c.length - 1)}`).join('\u2502') + '\u2502';
    const out = [line('\u250c', '\u252c', '\u2510'), row(header), line('\u251c', '\u253c', '\u2524'), ...body.map(row), line('\u2514', '\u2534', '\u2518')];
    emit('log', out.join('\n'));
  }

  const consoleObject = {
    log: (...args) => emit('log', format(args)),
    info: (...args) => emit('info', format(args)),
    warn: (...args) => emit('warn', format(args)),
    error: (...args) => emit('error', format(args)),
    debug: (...args) => emit('debug', format(args)),
    trace: (...args) => {
      let stack = '';
      try { stack = new Error().stack || ''; } catch { /* ignored */ }
      const lines = stack.split('\n').slice(2).join('\n');
      emit('debug', `Trace${args.length ? ': ' + format(args) : ''}${lines ? '\n' + lines : ''}`);
    },
    dir: (item, options) => emit('log', inspect(item, { customInspect: false, ...(options !== null && typeof options === 'object' ? options : {}) })),
    dirxml: (...args) => emit('log', format(args)),
    table: (data, properties) => table(data, properties),
    assert: (condition, ...data) => {
      if (condition) return;
      if (data.length === 0) data = ['Assertion failed'];
      else if (typeof data[0] === 'string') data[0] = `Assertion failed: ${data[0]}`;
      else data.unshift('Assertion failed');
      emit('error', format(data));
    },
    count: (label = 'default') => {
      label = `${label}`;
      const n = (counts.get(label) || 0) + 1;
      counts.set(label, n);
      emit('info', `${label}: ${n}`);
    },
    countReset: (label = 'default') => {
      label = `${label}`;
      if (!counts.has(label)) return emit('warn', `Count for '${label}' does not exist`);
      counts.set(label, 0);
    },
    group: (...data) => { if (data.length) emit('log', format(data)); groupIndent += '  '; },
    groupCollapsed: (...data) => { if (data.length) emit('log', format(data)); groupIndent += '  '; },
    groupEnd: () => { groupIndent = groupIndent.slice(0, -2); },
    time: (label = 'default') => {
      label = `${label}`;
      if (timers.has(label)) return emit('warn', `Label '${label}' already exists for console.time()`);
      timers.set(label, now());
    },
    timeLog: (label = 'default', ...data) => {
      label = `${label}`;
      if (!timers.has(label)) return emit('warn', `No such label '${label}' for console.timeLog()`);
      const text = `${label}: ${formatTime(now() - timers.get(label))}`;
      emit('info', data.length ? `${text} ${format(data)}` : text);
    },
    timeEnd: (label = 'default') => {
      label = `${label}`;
      if (!timers.has(label)) return emit('warn', `No such label '${label}' for console.timeEnd()`);
      emit('info', `${label}: ${formatTime(now() - timers.get(label))}`);
      timers.delete(label);
    },
  };
  for (const name of keys(consoleObject)) {
    O.defineProperty(consoleObject[name], 'name', { value: name });
  }
  O.defineProperty(consoleObject, Symbol.toStringTag, { value: 'console', configurable: true });
  return {
    console: consoleObject,
    [Symbol.for('codemode.stdlib.internal')]: { inspect, format },
  };
}
