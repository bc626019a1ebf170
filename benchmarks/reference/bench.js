#!/usr/bin/env node
'use strict'
// Reference benchmark CLI. Prints ONE JSON line to stdout.
//
//   node bench.js --scenario NAME [--n N] [--workers 2] [--concurrency C] [--warmup W]
//                 [--bridge async|sync] [--prewarm] [--memory-limit MB] [--programs PATH]
//
// Scenarios: trivial, tools10, cpu, toolrt, timeout, rss, respawn (programs in ../programs.json).
// Latency scenarios run a sequential phase (concurrency 1: latencies_ms, median, p99) and then a
// separate concurrent phase (concurrency C, default 2 * workers: wall_s, throughput_per_s).

const fs = require('node:fs')
const path = require('node:path')
const { Pool, rssMb } = require('./pool.js')

const DEFAULT_N = { trivial: 1000, tools10: 500, cpu: 50, toolrt: 30, timeout: 10, rss: 200, respawn: 10 }

function parseArgs (argv) {
  const args = { workers: 2, bridge: 'async', prewarm: false, memoryLimit: 128, programs: path.join(__dirname, '..', 'programs.json') }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const val = () => argv[++i]
    switch (a) {
      case '--scenario': args.scenario = val(); break
      case '--n': args.n = Number(val()); break
      case '--workers': args.workers = Number(val()); break
      case '--concurrency': args.concurrency = Number(val()); break
      case '--warmup': args.warmup = Number(val()); break
      case '--bridge': args.bridge = val(); break
      case '--prewarm': args.prewarm = true; break
      case '--memory-limit': args.memoryLimit = Number(val()); break
      case '--programs': args.programs = val(); break
      default: throw new Error(`unknown argument ${a}`)
    }
  }
  if (!(args.scenario in DEFAULT_N)) throw new Error(`--scenario must be one of ${Object.keys(DEFAULT_N).join(', ')}`)
  if (args.n === undefined) args.n = DEFAULT_N[args.scenario]
  if (args.concurrency === undefined) args.concurrency = 2 * args.workers
  if (args.warmup === undefined) args.warmup = Math.min(20, args.n)
  return args
}

// The benchmark dispatch (programs.json "_dispatch"): synchronous, returns the envelope string.
function dispatch (provider, tool, argsJson) {
  if (provider === 'store' && tool === 'get') {
    const [arg] = JSON.parse(argsJson)
    return JSON.stringify({ result: { i: arg.i, name: 'item' } })
  }
  return JSON.stringify({ error: `unknown tool ${provider}.${tool}` })
}

function checker (name, prog) {
  switch (name) {
    case 'trivial': return (o) => o.result === 42
    case 'tools10': return (o) => o.result && o.result.count === prog.expect.count && o.result.total === prog.expect.total &&
      o.result.items[9].key === prog.expect.items_9_key && JSON.stringify(o.result).length === prog.result_json_bytes
    case 'cpu': return (o) => typeof o.result === 'number' && o.result >= 0 && o.result < 1
    case 'toolrt': return (o) => o.result && o.result.sum === prog.expect_sum
    case 'timeout': return (o) => o.error === prog.expect_error
  }
  return () => true
}

const round = (x, d = 3) => x === null || x === undefined ? x : Math.round(x * 10 ** d) / 10 ** d
function stats (xs) {
  if (xs.length === 0) return {}
  const s = [...xs].sort((a, b) => a - b)
  const q = (p) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))]
  return {
    median_ms: round(s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2),
    p99_ms: round(q(0.99)),
    mean_ms: round(s.reduce((a, b) => a + b, 0) / s.length),
    min_ms: round(s[0]),
    max_ms: round(s[s.length - 1])
  }
}
const median = (xs) => stats(xs).median_ms

function cpusAllowed () {
  const m = fs.readFileSync('/proc/self/status', 'utf8').match(/^Cpus_allowed_list:\s+(\S+)/m)
  return m ? m[1] : null
}

function childRss (pool) {
  return pool.slots.map((s) => {
    try { const r = rssMb(s.pid); return { pid: s.pid, rss_mb: round(r.rss, 1), hwm_mb: round(r.hwm, 1) } } catch { return { pid: s.pid } }
  })
}

class Tally {
  constructor (check) { this.check = check; this.errors = 0; this.firstError = undefined }
  see (o) {
    if (!this.check(o)) {
      this.errors++
      if (this.firstError === undefined) this.firstError = o.error !== undefined ? o.error : JSON.stringify(o.result)
    }
    return o
  }
}

async function timed (pool, req, tally, opts) {
  const t0 = performance.now()
  const o = await pool.execute(req, opts)
  const ms = performance.now() - t0
  tally.see(o)
  return [ms, o]
}

async function sequential (pool, req, n, tally, opts) {
  const lat = []
  const outcomes = []
  for (let i = 0; i < n; i++) {
    const [ms, o] = await timed(pool, req, tally, opts)
    lat.push(ms)
    outcomes.push(o)
  }
  return { lat, outcomes }
}

// The machine's idle and total CPU ticks so far (/proc/stat's first line).
function machineTicks () {
  const f = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number)
  return [f[3] + f[4], f.reduce((a, b) => a + b, 0)]
}

async function concurrent (pool, req, n, c, tally) {
  let started = 0
  const lat = []
  const ticks = machineTicks()
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  const lane = async () => {
    while (started < n) {
      started++
      const [ms] = await timed(pool, req, tally)
      lat.push(ms)
    }
  }
  await Promise.all(Array.from({ length: c }, lane))
  const wall = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  const after = machineTicks()
  return {
    wall,
    lat,
    parentCpuMsPerRun: (cpu.user + cpu.system) / 1000 / n,
    busy: 1 - (after[0] - ticks[0]) / Math.max(1, after[1] - ticks[1])
  }
}

async function main () {
  const args = parseArgs(process.argv.slice(2))
  const programs = JSON.parse(fs.readFileSync(args.programs, 'utf8'))
  if (args.prewarm) process.env.REF_PREWARM = '1'
  const pool = new Pool({ workers: args.workers, memoryLimit: args.memoryLimit, bridge: args.bridge })
  const t0 = performance.now()
  await pool.ready()
  const startMs = performance.now() - t0

  const name = args.scenario
  const progName = programs[name].program || name
  const prog = programs[progName]
  const req = { code: prog.code, timeout: prog.timeout, providers: prog.providers, dispatch }
  const trivial = { code: programs.trivial.code, timeout: programs.trivial.timeout, providers: [], dispatch }
  const tally = new Tally(checker(progName, prog))

  const out = {
    scenario: name,
    n: args.n,
    workers: args.workers,
    concurrency: args.concurrency,
    bridge: args.bridge,
    prewarm: args.prewarm,
    memory_limit_mb: args.memoryLimit,
    cpus_allowed: cpusAllowed(),
    node: process.version,
    isolated_vm: require('isolated-vm/package.json').version,
    pool_start_ms: round(startMs)
  }

  // Warm-up: start every child, let JIT and allocators settle. Not measured.
  const warm = name === 'timeout' || name === 'respawn' ? trivial : req
  const warmTally = new Tally(() => true)
  await concurrent(pool, warm, args.warmup * args.workers, args.workers, warmTally)

  if (name === 'trivial' || name === 'tools10' || name === 'cpu') {
    const seq = await sequential(pool, req, args.n, tally)
    const con = await concurrent(pool, req, args.n, args.concurrency, tally)
    Object.assign(out, { latencies_ms: seq.lat.map((x) => round(x)), ...stats(seq.lat) })
    Object.assign(out, {
      wall_s: round(con.wall, 4),
      throughput_per_s: round(args.n / con.wall, 1),
      concurrent_median_ms: median(con.lat),
      concurrent_p99_ms: stats(con.lat).p99_ms,
      // the parent's own CPU per run in this phase, and how busy the machine was
      concurrent_host_cpu_ms_per_run: round(con.parentCpuMsPerRun, 4),
      concurrent_machine_busy: round(con.busy, 4)
    })
  } else if (name === 'toolrt') {
    const calls = prog.tool_calls
    const ipc = await sequential(pool, req, args.n, tally)
    const local = await sequential(pool, req, args.n, tally, { local: true })
    const loopUs = (r) => r.outcomes.map((o) => (o.result ? o.result.loop_ms : NaN) * 1000 / calls)
    Object.assign(out, { latencies_ms: ipc.lat.map((x) => round(x)), ...stats(ipc.lat) })
    Object.assign(out, {
      tool_calls_per_run: calls,
      // per call, from the program's own Date.now() around the 200-call loop (ms clock over ~200 calls)
      per_call_us: round(median(loopUs(ipc)), 1),
      // per call, from the parent: whole execution (isolate creation included) / 200
      per_call_e2e_us: round(median(ipc.lat) * 1000 / calls, 1),
      // same program, tool calls answered inside the child (no child->parent hop): isolate<->host cost only
      in_child_per_call_us: round(median(loopUs(local)), 1),
      in_child_per_call_e2e_us: round(median(local.lat) * 1000 / calls, 1),
      wall_s: null,
      throughput_per_s: null
    })
  } else if (name === 'timeout') {
    const seq = await sequential(pool, req, args.n, tally)
    Object.assign(out, { timeout_ms: prog.timeout, latencies_ms: seq.lat.map((x) => round(x)), ...stats(seq.lat) })
    // after the bound the child disposes its isolate; check the pool still serves on the same children
    const after = await sequential(pool, trivial, args.workers * 2, new Tally(checker('trivial')))
    Object.assign(out, {
      settle_over_bound_ms: round(stats(seq.lat).median_ms - prog.timeout),
      trivial_after_ms: round(median(after.lat)),
      wall_s: null,
      throughput_per_s: null
    })
  } else if (name === 'rss') {
    out.rss_at_ready = childRss(pool) // after the warm-up already; see below for phases
    const a = await sequential(pool, req, args.n, tally)
    out.rss_after_trivial = childRss(pool)
    const toolsReq = { code: programs.tools10.code, timeout: programs.tools10.timeout, providers: programs.tools10.providers, dispatch }
    const cpuReq = { code: programs.cpu.code, timeout: programs.cpu.timeout, providers: [], dispatch }
    await concurrent(pool, toolsReq, args.n, args.workers, new Tally(() => true))
    await concurrent(pool, cpuReq, Math.max(args.workers, Math.round(args.n / 10)), args.workers, new Tally(() => true))
    out.rss_after_mixed = childRss(pool)
    Object.assign(out, { latencies_ms: a.lat.map((x) => round(x)), ...stats(a.lat), wall_s: null, throughput_per_s: null })
  } else if (name === 'respawn') {
    const lat = []
    const readyLat = []
    for (let k = 0; k < args.n; k++) {
      await pool.ready()
      const index = k % args.workers
      const old = pool.slots[index]
      const replaced = new Promise((resolve) => {
        const onReady = (slot) => {
          if (slot.index === index && slot.pid !== old.pid) { pool.off('ready', onReady); resolve() }
        }
        pool.on('ready', onReady)
      })
      const t = performance.now()
      old.proc.kill('SIGKILL')
      await replaced
      readyLat.push(performance.now() - t)
      await timed(pool, trivial, tally, { slot: index })
      lat.push(performance.now() - t)
    }
    Object.assign(out, {
      latencies_ms: lat.map((x) => round(x)),
      ...stats(lat),
      ready_median_ms: median(readyLat),
      ready_p99_ms: stats(readyLat).p99_ms,
      wall_s: null,
      throughput_per_s: null
    })
  }

  if (out.rss_per_child_mb === undefined) {
    const rss = childRss(pool)
    out.rss_per_child_mb = rss.map((r) => r.rss_mb)
    out.hwm_per_child_mb = rss.map((r) => r.hwm_mb)
  }
  out.rss_parent_mb = round(process.memoryUsage.rss() / 1048576, 1)
  out.errors = tally.errors
  if (tally.firstError !== undefined) out.first_error = tally.firstError
  out.respawns = pool.respawns
  await pool.dispose()
  process.stdout.write(JSON.stringify(out) + '\n')
}

main().catch((err) => {
  process.stderr.write(String((err && err.stack) || err) + '\n')
  process.exit(1)
})
