function (host, K, records) {
  'use strict';
  const G = globalThis;
  const ReflectApply = Reflect.apply;
  const ObjectCreate = Object.create;
  const define = Object.defineProperty;
  const freeze = Object.freeze;
  const ObjectKeys = Object.keys;
  const HasOwn = Object.prototype.hasOwnProperty;
  const ArrayPush = Array.prototype.push;
  const ArraySort = Array.prototype.sort;
  const StringIndexOf = String.prototype.indexOf;
  const StringSlice = String.prototype.slice;
  const JSONparse = JSON.parse;
  const PromiseCtor = Promise;
  const PromiseResolve = Promise.resolve;
  const PromiseReject = Promise.reject;
  const PromiseThen = Promise.prototype.then;
  const ErrorCtor = Error;
  const SyntaxErrorCtor = SyntaxError;
  const ReferenceErrorCtor = ReferenceError;
  const toStringTag = Symbol.toStringTag;
  const evaluator = host != null && host.eval != null ? host.eval : G.eval;
  const { loaderUrl: LOADER_URL, sourceUrlPrefix: SOURCE_URL_PREFIX, defaultSlot: DEFAULT_SLOT,
    defaultLocal: DEFAULT_LOCAL, anonDefault: ANON_DEFAULT, maxListed: MAX_LISTED } = K;
  const has = (o, k) => ReflectApply(HasOwn, o, [k]);
  const push = (a, v) => { ReflectApply(ArrayPush, a, [v]); };
  const AMBIGUOUS = freeze(ObjectCreate(null));
  const UNSET = freeze(ObjectCreate(null));  // `export default <expr>` not evaluated yet

  const registry = ObjectCreate(null);
  const specifiers = [];
  for (let i = 0; i < records.length; i++) {
    const r = records[i];
    registry[r[0]] = { __proto__: null, spec: r[0], kind: r[1], d: r[2], state: 0, link: 0,
      read: null, ns: null, ctx: null, module: null, value: undefined, error: undefined,
      parseError: null, imports: null, importers: [] };
    push(specifiers, r[0]);
  }
  freeze(specifiers);

  const quoted = (names) => {
    let out = '';
    const n = names.length < MAX_LISTED ? names.length : MAX_LISTED;
    for (let i = 0; i < n; i++) out += (i ? ', ' : '') + "'" + names[i] + "'";
    if (names.length > n) out += `, and ${names.length - n} more`;
    return out;
  };
  const unknown = (spec, importer) => {
    const from = importer ? ` from module '${importer.spec}'` : '';
    return new ErrorCtor(specifiers.length === 0
      ? `Cannot import '${spec}'${from}: no modules were declared for this run (declare it in modules).`
      : `Cannot import '${spec}'${from}: this run can import ${quoted(specifiers)} (declare it in modules).`);
  };
  const lookup = (spec, importer) => {
    if (!has(registry, spec)) throw unknown(spec, importer);
    return registry[spec];
  };
  const parseError = (rec) => {
    if (rec.parseError === null) rec.parseError = new SyntaxErrorCtor(rec.d.error);
    return rec.parseError;
  };
  const tdz = (name) => new ReferenceErrorCtor(`Cannot access '${name}' before initialization`);

  // ---- bindings: what an import or a namespace property reads -------------------------
  const same = (a, b) => a.k === b.k && a.rec === b.rec && a.name === b.name && a.key === b.key;
  const read = (b) => {
    const rec = b.rec;
    switch (b.k) {
      case 'local': {
        if (rec.read === null) throw tdz(b.name === DEFAULT_LOCAL ? 'default' : b.name);
        const v = rec.read(b.name);
        if (v === UNSET) throw tdz('default');
        return v;
      }
      case 'ns': return namespace(rec);
      case 'json': return rec.value;
      case 'cjs': {
        if (rec.module === null) return undefined;
        const e = rec.module.exports;
        return b.key === null ? e : (e == null ? undefined : e[b.key]);
      }
      default: {  // 'cjsstar': the first `export * from '<cjs>'` whose exports hold the key
        const recs = b.recs;
        for (let i = 0; i < recs.length; i++) {
          const m = recs[i].module;
          const e = m === null ? null : m.exports;
          if (e != null && (typeof e === 'object' || typeof e === 'function') && b.key in e) return e[b.key];
        }
        return undefined;
      }
    }
  };

  // ResolveExport of the spec, over the static tables; cjs exports are resolved when read.
  const resolveExport = (rec, name, seen) => {
    if (rec.kind === 'json') return name === 'default' ? { __proto__: null, k: 'json', rec } : null;
    if (rec.kind === 'cjs') return { __proto__: null, k: 'cjs', rec, key: name === 'default' ? null : name };
    for (let i = 0; i < seen.length; i += 2) if (seen[i] === rec && seen[i + 1] === name) return null;
    push(seen, rec); push(seen, name);
    const d = rec.d;
    for (let i = 0; i < d.exports.length; i++) {
      if (d.exports[i][0] === name) return { __proto__: null, k: 'local', rec, name: d.exports[i][1] };
    }
    for (let i = 0; i < d.indirect.length; i++) {
      const row = d.indirect[i];
      if (row[0] === name) {
        const dep = lookup(row[1], rec);
        return row[2] === '*' ? { __proto__: null, k: 'ns', rec: dep } : resolveExport(dep, row[2], seen);
      }
    }
    if (name === 'default') return null;
    let found = null;
    let weak = null;
    for (let i = 0; i < d.stars.length; i++) {
      const dep = lookup(d.stars[i], rec);
      const b = dep.kind === 'cjs'
        ? { __proto__: null, k: 'cjsstar', recs: [dep] } : resolveExport(dep, name, seen);
      if (b === AMBIGUOUS) return AMBIGUOUS;
      if (b === null) continue;
      if (b.k === 'cjsstar') {
        if (weak === null) weak = [];
        for (let j = 0; j < b.recs.length; j++) push(weak, b.recs[j]);
      } else if (found === null) {
        found = b;
      } else if (!same(found, b)) {
        return AMBIGUOUS;
      }
    }
    if (found !== null) return found;
    return weak === null ? null : { __proto__: null, k: 'cjsstar', recs: weak, key: name };
  };
  const exportedNames = (rec, visited, out, seen) => {
    if (rec.kind !== 'esm') return;
    for (let i = 0; i < visited.length; i++) if (visited[i] === rec) return;
    push(visited, rec);
    const d = rec.d;
    const star = visited.length > 1;
    const add = (name) => {
      if (!(star && name === 'default') && !seen[name]) { seen[name] = true; push(out, name); }
    };
    for (let i = 0; i < d.exports.length; i++) add(d.exports[i][0]);
    for (let i = 0; i < d.indirect.length; i++) add(d.indirect[i][0]);
    for (let i = 0; i < d.stars.length; i++) exportedNames(lookup(d.stars[i], rec), visited, out, seen);
  };
  const missing = (dep, name, importer, at, ambiguous) => new SyntaxErrorCtor(`The requested module '${
    dep.spec}' ${ambiguous ? 'contains conflicting star exports for name' : 'does not provide an export named'
    } '${name}' (module '${importer.spec}' at ${at})`);

  // ---- namespaces ------------------------------------------------------------------------
  // A namespace shows [name, binding] entries: the static ones, plus the names of cjs
  // exports once those modules have run. Built sorted; frozen once its module has evaluated.
  const staticEntries = (rec) => {
    const entries = [];
    if (rec.kind !== 'esm') {
      push(entries, ['default', rec.kind === 'json'
        ? { __proto__: null, k: 'json', rec } : { __proto__: null, k: 'cjs', rec, key: null }]);
      return entries;
    }
    const names = [];
    exportedNames(rec, [], names, ObjectCreate(null));
    for (let i = 0; i < names.length; i++) {
      const b = resolveExport(rec, names[i], []);
      if (b !== null && b !== AMBIGUOUS) push(entries, [names[i], b]);
    }
    return entries;
  };
  const cjsEntries = (dep, taken, entries, binding) => {
    const e = dep.module === null ? null : dep.module.exports;
    if (e == null || (typeof e !== 'object' && typeof e !== 'function')) return;
    const keys = ObjectKeys(e);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      if (key !== 'default' && !taken[key]) {
        taken[key] = true;
        push(entries, [key, binding(key)]);
      }
    }
  };
  const starCjs = (rec, visited, out) => {
    for (let i = 0; i < visited.length; i++) if (visited[i] === rec) return;
    push(visited, rec);
    for (let i = 0; i < rec.d.stars.length; i++) {
      const dep = lookup(rec.d.stars[i], rec);
      if (dep.kind === 'cjs') push(out, dep);
      else if (dep.kind === 'esm') starCjs(dep, visited, out);
    }
  };
  const dynamicEntries = (rec, taken, entries) => {
    if (rec.kind === 'cjs') {
      cjsEntries(rec, taken, entries, (key) => ({ __proto__: null, k: 'cjs', rec, key }));
    } else if (rec.kind === 'esm') {
      const deps = [];
      starCjs(rec, [], deps);
      for (let i = 0; i < deps.length; i++) {
        const dep = deps[i];
        cjsEntries(dep, taken, entries, (key) => ({ __proto__: null, k: 'cjsstar', recs: [dep], key }));
      }
    }
  };
  const byName = (a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);
  const show = (ns, entries) => {
    ReflectApply(ArraySort, entries, [byName]);
    for (let i = 0; i < entries.length; i++) {
      const b = entries[i][1];
      define(ns, entries[i][0], { __proto__: null, get: () => read(b), enumerable: true });
    }
  };
  const namespace = (rec) => {
    if (rec.ns !== null) return rec.ns;
    const ns = ObjectCreate(null);
    rec.ns = ns;
    define(ns, toStringTag, { __proto__: null, value: 'Module' });
    const entries = staticEntries(rec);
    if (rec.state === 2) {
      const taken = ObjectCreate(null);
      for (let i = 0; i < entries.length; i++) taken[entries[i][0]] = true;
      dynamicEntries(rec, taken, entries);
    }
    show(ns, entries);
    if (rec.state === 2) freeze(ns);
    return ns;
  };
  // A namespace handed out while its module ran (a cycle) learns its cjs names afterwards.
  const finishNamespace = (rec) => {
    const ns = rec.ns;
    const taken = ObjectCreate(null);
    const names = ObjectKeys(ns);
    for (let i = 0; i < names.length; i++) taken[names[i]] = true;
    const entries = [];
    dynamicEntries(rec, taken, entries);
    show(ns, entries);
    freeze(ns);
  };

  // ---- named imports: locals of the importer's wrapper, written when they can change -----
  // An entry is { rec: importer, local, b }; a binding still uninitialised is left as it is.
  const refresh = (entry) => {
    const ctx = entry.rec.ctx;
    if (ctx === null || typeof ctx.set !== 'function') return;
    let v;
    try { v = read(entry.b); } catch (e) { return; }
    ctx.set(entry.local, v);
  };
  const pull = (rec) => {
    for (let i = 0; i < rec.imports.length; i++) refresh(rec.imports[i]);
  };
  const pushAll = (rec) => {
    for (let i = 0; i < rec.importers.length; i++) refresh(rec.importers[i]);
  };
  // `export default function () {}` and `export default () => {}` are named 'default' in JS.
  const nameDefault = (rec) => {
    let v;
    try { v = rec.read(rec.d.anon ? ANON_DEFAULT : DEFAULT_LOCAL); } catch (e) { return; }
    if (typeof v === 'function' && (rec.d.anon || v.name === DEFAULT_SLOT)) {
      try { define(v, 'name', { __proto__: null, value: 'default' }); } catch (e) { /* keep its own */ }
    }
  };
  const notify = (rec, names) => {
    if (rec.read !== null) nameDefault(rec);
    const importers = rec.importers;
    for (let i = 0; i < importers.length; i++) {
      const b = importers[i].b;
      if (b.k !== 'local') continue;
      for (let j = 0; j < names.length; j++) {
        if (names[j] === b.name) { refresh(importers[i]); break; }
      }
    }
  };
  const register = (rec, reader) => {
    if (rec.read !== null) return;
    rec.read = reader;
    nameDefault(rec);
    pull(rec);  // what modules that ran earlier export, for a cycle that calls in early
    const deps = rec.d.deps;
    for (let i = 0; i < deps.length; i++) evaluate(lookup(deps[i], rec));
    pull(rec);
  };

  // ---- linking: every specifier and imported name checked before anything runs -----------
  let linking = [];
  const linkOne = (rec) => {
    if (rec.kind !== 'esm' || rec.link !== 0) return;
    if (rec.d.error !== null) throw parseError(rec);
    rec.link = 1;
    push(linking, rec);
    const d = rec.d;
    for (let i = 0; i < d.deps.length; i++) linkOne(lookup(d.deps[i], rec));
    const imports = [];
    for (let i = 0; i < d.imports.length; i++) {
      const row = d.imports[i];
      const dep = lookup(row[1], rec);
      let b;
      if (row[2] === '*') {
        b = { __proto__: null, k: 'ns', rec: dep };
      } else {
        b = resolveExport(dep, row[2], []);
        if (b === null || b === AMBIGUOUS) throw missing(dep, row[2], rec, row[3], b === AMBIGUOUS);
      }
      push(imports, { __proto__: null, rec, local: row[0], b });
    }
    for (let i = 0; i < d.indirect.length; i++) {
      const row = d.indirect[i];
      if (row[2] === '*') continue;
      const dep = lookup(row[1], rec);
      const b = resolveExport(dep, row[2], []);
      if (b === null || b === AMBIGUOUS) throw missing(dep, row[2], rec, row[3], b === AMBIGUOUS);
    }
    rec.imports = imports;
  };
  const link = (rec) => {
    linking = [];
    try {
      linkOne(rec);
    } catch (e) {
      for (let i = 0; i < linking.length; i++) { linking[i].link = 0; linking[i].imports = null; }
      linking = [];
      throw e;
    }
    for (let i = 0; i < linking.length; i++) {
      const r = linking[i];
      r.link = 2;
      for (let j = 0; j < r.imports.length; j++) {
        const entry = r.imports[j];
        const targets = entry.b.k === 'cjsstar' ? entry.b.recs : [entry.b.rec];
        for (let t = 0; t < targets.length; t++) push(targets[t].importers, entry);
      }
    }
    linking = [];
  };

  // ---- evaluation: once per run -----------------------------------------------------------
  // A SyntaxError whose first frame is a wrapper's own eval call came from compiling the
  // module (V8 gives no position for those); one thrown while the module ran is left alone.
  const compileError = (e, rec) => {
    if (!(e instanceof SyntaxErrorCtor) || rec.read !== null) return e;
    let stack;
    try { stack = e.stack; } catch (x) { return e; }
    if (typeof stack !== 'string') return e;
    const at = ReflectApply(StringIndexOf, stack, ['\n    at ']);
    if (at < 0) return e;
    const end = ReflectApply(StringIndexOf, stack, ['\n', at + 1]);
    const frame = ReflectApply(StringSlice, stack, [at, end < 0 ? stack.length : end]);
    if (ReflectApply(StringIndexOf, frame, [LOADER_URL]) < 0) return e;
    return compiled(rec, e);
  };
  const compiled = (rec, e) => new SyntaxErrorCtor(`SyntaxError in module '${rec.spec}': ${
    e && e.message}${rec.d.hint === null ? '' : ` near ${rec.d.hint}`}`);
  // The function a module runs in (or, for `wrapper: null`, the module compiled as one).
  const compile = (rec) => {
    try {
      return rec.d.wrapper === null ? evaluator(rec.d.code) : evaluator(rec.d.wrapper)(evaluator);
    } catch (e) {
      throw compiled(rec, e);
    }
  };
  const requireModule = (id) => {
    const spec = `${id}`;
    if (!has(registry, spec)) {
      const e = new ErrorCtor(`Cannot find module '${spec}'`);
      e.code = 'MODULE_NOT_FOUND';
      throw e;
    }
    const dep = registry[spec];
    if (dep.kind === 'esm') link(dep);
    evaluate(dep);
    if (dep.kind === 'esm') return namespace(dep);
    return dep.kind === 'cjs' ? dep.module.exports : dep.value;
  };
  const run = (rec) => {
    if (rec.d.error !== null) throw parseError(rec);
    if (rec.kind === 'json') {
      rec.value = JSONparse(rec.d.code);
      return;
    }
    const fn = compile(rec);
    try {
      if (rec.kind === 'esm') {
        rec.ctx = { __proto__: null, src: rec.d.code, U: UNSET, set: null, I: importModule,
          L: (reader) => register(rec, reader), N: (...names) => notify(rec, names),
          M: { __proto__: null, url: SOURCE_URL_PREFIX + rec.spec } };
        fn(rec.ctx);
      } else {
        const module = { exports: {}, id: rec.spec, loaded: false };
        rec.module = module;
        ReflectApply(fn, module.exports, [module, module.exports, requireModule, importModule, rec.d.code]);
        module.loaded = true;
      }
    } catch (e) {
      throw compileError(e, rec);
    }
    if (rec.kind === 'esm' && rec.read === null) rec.read = () => undefined;
  };
  const evaluate = (rec) => {
    if (rec.state === 1 || rec.state === 2) return;
    if (rec.state === 3) throw rec.error;
    rec.state = 1;
    try {
      run(rec);
    } catch (e) {
      rec.state = 3;
      rec.error = e;
      throw e;
    }
    rec.state = 2;
    if (rec.ns !== null) finishNamespace(rec);
    pushAll(rec);
  };
  const load = (spec) => {
    const rec = lookup(spec, null);
    if (rec.kind === 'esm') link(rec);
    evaluate(rec);
    return namespace(rec);
  };
  function importModule(specifier) {
    let spec;
    try { spec = `${specifier}`; } catch (e) { return ReflectApply(PromiseReject, PromiseCtor, [e]); }
    const ready = ReflectApply(PromiseResolve, PromiseCtor, [undefined]);
    return ReflectApply(PromiseThen, ready, [() => load(spec)]);
  }
  return freeze({ __proto__: null, import: importModule, specifiers });
}
