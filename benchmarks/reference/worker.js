'use strict'
// Child process of the reference pool (see pool.js). One execution at a time; each execution gets a
// fresh ivm.Isolate (memoryLimit), an empty global plus a tiny console and one proxy per declared
// provider, and is disposed when the run ends. Tool calls leave the isolate as three strings
// (provider, tool, argsJson), are relayed to the parent over the IPC channel, and the parent's
// dispatch answers with one JSON envelope string that resolves the promise inside the isolate.
//
// Parent -> child: {t:'run', id, code, timeout, providers:[name...], bridge, local}
//                  {t:'ret', id, c, v}                       (envelope for tool call c)
// Child -> parent: {t:'ready'} | {t:'call', id, c, p, n, a} | {t:'done', id, r?, e?, k?, l}
//   r: the result as a JSON string (absent for undefined), e: error text, k: 'timeout' | 'memory' | 'error'

const ivm = require('isolated-vm')

const MEMORY_LIMIT_MB = Number(process.env.REF_MEMORY_LIMIT_MB || 128)
// Optional: create the next execution's isolate while idle (each isolate still serves one execution).
const PREWARM = process.env.REF_PREWARM === '1'

// Runs inside the isolate, once per execution, before the program. $0: the tool bridge (a Reference
// to a host function), $1: the log callback, $2: declared provider names (JSON), $3: 'async' | 'sync' bridge,
// $4: the program source, evaluated as a script (indirect eval: global scope, no rewriting).
const BOOTSTRAP = `
const bridge = $0, emit = $1, providers = JSON.parse($2), mode = $3, source = $4;
const apply = bridge.apply.bind(bridge), applySyncPromise = bridge.applySyncPromise.bind(bridge);
const { parse, stringify } = JSON;
const fmt = (v) => {
  if (typeof v === 'string') return v;
  try { const s = stringify(v); return s === undefined ? String(v) : s } catch { return String(v) }
};
const log = (level) => (...args) => { emit(level, args.map(fmt).join(' ')) };
globalThis.console = { log: log('log'), info: log('info'), warn: log('warn'), error: log('error'), debug: log('debug') };
const opts = { result: { promise: true } };
const call = mode === 'sync'
  ? async (provider, tool, args) => {
      const env = parse(applySyncPromise(undefined, [provider, tool, stringify(args)]));
      if ('error' in env) throw new Error(env.error);
      return env.result;
    }
  : async (provider, tool, args) => {
      const env = parse(await apply(undefined, [provider, tool, stringify(args)], opts));
      if ('error' in env) throw new Error(env.error);
      return env.result;
    };
for (const name of providers) {
  globalThis[name] = new Proxy({}, {
    get: (_, tool) => typeof tool === 'string' ? (...args) => call(name, tool, args) : undefined,
  });
}
const program = (0, eval)(source);
return (async () => {
  const value = await program();
  return value === undefined ? undefined : stringify(value);
})();
`

// Benchmark-only: answer tool calls inside the child (no IPC hop) with the benchmark dispatch,
// to separate the isolate<->host cost from the child<->parent relay cost.
function localDispatch (provider, tool, argsJson) {
  const [arg] = JSON.parse(argsJson)
  return JSON.stringify({ result: { i: arg.i, name: 'item' } })
}

let spare = null // a prewarmed { isolate, context } (PREWARM only)

function fresh () {
  const isolate = new ivm.Isolate({
    memoryLimit: MEMORY_LIMIT_MB,
    onCatastrophicError: (message) => {
      // V8 lost control of this isolate: report and let the parent replace this process.
      try {
        if (current !== null) send({ t: 'done', id: current.id, e: String(message), k: 'crash', l: current.logs })
      } finally { process.abort() }
    }
  })
  return { isolate, context: isolate.createContextSync() }
}

function prewarm () {
  if (spare === null && current === null) {
    try { spare = fresh() } catch { spare = null }
  }
}

let current = null // { id, isolate, timer, timedOut, calls: Map<c, resolve>, nextCall, logs }

function send (msg) {
  process.send(msg)
}

function onMessage (msg) {
  if (msg.t === 'ret') {
    if (current === null || current.id !== msg.id) return // the run already ended
    const resolve = current.calls.get(msg.c)
    if (resolve !== undefined) {
      current.calls.delete(msg.c)
      resolve(msg.v)
    }
  } else if (msg.t === 'run') {
    run(msg)
  }
}

function run (msg) {
  const { id, code, timeout, providers, bridge, local } = msg
  const logs = []
  const run = { id, isolate: null, timer: null, timedOut: false, calls: new Map(), nextCall: 0, logs }
  current = run
  let isolate, context
  try {
    if (spare !== null) {
      ({ isolate, context } = spare)
      spare = null
    } else {
      ({ isolate, context } = fresh())
    }
  } catch (err) {
    send({ t: 'done', id, e: String(err && err.message), k: 'error', l: logs })
    current = null
    return
  }
  run.isolate = isolate

  const hostCall = local
    ? (provider, tool, argsJson) => Promise.resolve(localDispatch(provider, tool, argsJson))
    : (provider, tool, argsJson) => new Promise((resolve) => {
        const c = run.nextCall++
        run.calls.set(c, resolve)
        send({ t: 'call', id, c, p: provider, n: tool, a: argsJson })
      })
  const bridgeRef = new ivm.Reference(hostCall)
  const emit = new ivm.Callback((level, text) => { logs.push({ level, text }) }, { ignored: true })

  // Host clock: at the bound, dispose the isolate. That stops a loop even after an await.
  run.timer = setTimeout(() => {
    run.timedOut = true
    if (!isolate.isDisposed) isolate.dispose()
  }, timeout)

  context.evalClosure(BOOTSTRAP, [bridgeRef, emit, JSON.stringify(providers || []), bridge === 'sync' ? 'sync' : 'async', code], {
    result: { promise: true }
  }).then(
    (r) => finish(run, r, undefined),
    (err) => finish(run, undefined, err)
  )
}

function finish (run, r, err) {
  clearTimeout(run.timer)
  current = null
  const msg = { t: 'done', id: run.id, l: run.logs }
  if (run.timedOut) {
    msg.k = 'timeout'
  } else if (err !== undefined) {
    const text = err && typeof err.message === 'string' ? err.message : String(err)
    msg.k = /memory limit/.test(text) ? 'memory' : 'error'
    msg.e = text
  } else if (r !== undefined) {
    msg.r = r
  }
  send(msg) // the result is out: dispose after, off the caller's path
  if (!run.isolate.isDisposed) run.isolate.dispose()
  if (PREWARM) prewarm()
}

process.on('message', onMessage)
process.on('disconnect', () => process.exit(0))
process.on('error', () => process.exit(0)) // the parent is gone (EPIPE)
if (PREWARM) prewarm()
send({ t: 'ready' })
