'use strict'
// Reference pool: the codemode design in Node + isolated-vm 5.0.4, for side-by-side benchmarks.
//
// N supervised child processes (worker.js, started with child_process.fork: a fresh `node` process,
// never a copy of this one), each running one execution at a time in a fresh isolate. The pool
// queues executions (bounded by maxQueue), hands each to an idle child, relays the child's tool calls
// to the caller's dispatch (which runs here, in the parent), and settles every execution on the host
// clock: at the bound the caller gets the timeout text; the child disposes its isolate at the same
// bound, and a child that has not reported within killGraceMs after that is SIGKILLed and replaced.
// A child that dies for any reason is replaced; the execution it was serving settles with an error.
//
// Not included (not needed for the benchmarks): the ECMA-429 standard library, modules, outbound
// fetch, retained handles, the outbound message ceiling, count_host_waits=false.

const { fork } = require('node:child_process')
const path = require('node:path')
const fs = require('node:fs')
const { EventEmitter } = require('node:events')

const WORKER = path.join(__dirname, 'worker.js')

const timeoutText = (ms) =>
  `Execution timed out at its ${ms} ms bound. Do less work per run and return the part that is already finished.`
const memoryText = (mb) =>
  `Execution ran out of memory at its ${mb} MB bound. Work on smaller pieces of data per run and return a summary instead of everything.`

class ExecutorError extends Error {
  constructor (code, message, { retryable = false, started = false } = {}) {
    super(message)
    this.code = code
    this.retryable = retryable
    this.started = started
  }
}

class Pool extends EventEmitter {
  constructor ({
    workers = 2,
    memoryLimit = 128,
    maxQueue = Infinity,
    timeout = 5000,
    killGraceMs = 500,
    bridge = 'async', // 'async': Reference.apply with promise proxying; 'sync': applySyncPromise
    execArgv = []
  } = {}) {
    super()
    this.workers = workers
    this.memoryLimit = memoryLimit
    this.maxQueue = maxQueue
    this.timeout = timeout
    this.killGraceMs = killGraceMs
    this.bridge = bridge
    this.execArgv = execArgv
    this.slots = []
    this.queue = []
    this.nextId = 1
    this.disposed = false
    this.started = false
    this.respawns = 0
  }

  start () {
    if (this.started) return
    this.started = true
    for (let i = 0; i < this.workers; i++) this.slots.push(this._spawn(i))
  }

  _spawn (index) {
    const proc = fork(WORKER, [], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      serialization: 'json',
      execArgv: this.execArgv,
      env: { ...process.env, REF_MEMORY_LIMIT_MB: String(this.memoryLimit) }
    })
    const slot = { index, proc, pid: proc.pid, ready: false, job: null, killTimer: null, spawnedAt: performance.now() }
    proc.on('message', (msg) => this._onMessage(slot, msg))
    proc.on('exit', (code, signal) => this._onExit(slot, code, signal))
    proc.on('error', () => {}) // 'exit' follows; send() after death lands here
    return slot
  }

  _onMessage (slot, msg) {
    switch (msg.t) {
      case 'call': {
        const job = slot.job
        if (job === null || job.id !== msg.id || job.settled) return
        this._dispatch(slot, job, msg)
        return
      }
      case 'done': {
        const job = slot.job
        if (job === null || job.id !== msg.id) return
        this._release(slot)
        if (!job.settled) {
          let outcome
          if (msg.k === 'timeout') outcome = { result: undefined, error: timeoutText(job.timeout), logs: msg.l }
          else if (msg.k === 'memory') outcome = { result: undefined, error: memoryText(this.memoryLimit), logs: msg.l }
          else if (msg.e !== undefined) outcome = { result: undefined, error: msg.e, logs: msg.l }
          else outcome = { result: msg.r === undefined ? undefined : JSON.parse(msg.r), logs: msg.l }
          this._settle(job, outcome)
        }
        this._pump()
        return
      }
      case 'ready':
        slot.ready = true
        this.emit('ready', slot)
        this._pump()
    }
  }

  _dispatch (slot, job, msg) {
    const reply = (v) => {
      if (slot.job === job && !job.settled && slot.proc.connected) {
        slot.proc.send({ t: 'ret', id: job.id, c: msg.c, v })
      }
    }
    const fail = (err) => reply(JSON.stringify({ error: String((err && err.message) || err) }))
    let v
    try {
      v = job.dispatch(msg.p, msg.n, msg.a)
    } catch (err) {
      fail(err)
      return
    }
    if (typeof v === 'string') reply(v) // sync dispatch: no extra tick
    else Promise.resolve(v).then((s) => typeof s === 'string' ? reply(s) : fail('dispatch must return a JSON envelope string'), fail)
  }

  _release (slot) {
    slot.job = null
    if (slot.killTimer !== null) {
      clearTimeout(slot.killTimer)
      slot.killTimer = null
    }
  }

  _onExit (slot, code, signal) {
    const job = slot.job
    this._release(slot)
    if (job !== null && !job.settled) {
      // A fatal V8 OOM aborts the child: map it to the memory text; anything else is a crash.
      if (signal === 'SIGABRT' || signal === 'SIGTRAP') {
        this._settle(job, { result: undefined, error: memoryText(this.memoryLimit), logs: [] })
      } else {
        this._settle(job, undefined, new ExecutorError('WORKER_CRASHED',
          `Worker ${slot.index + 1} exited (${signal || code}) during the execution.`, { retryable: true, started: true }))
      }
    }
    this.emit('exit', slot, code, signal)
    if (this.disposed) return
    this.respawns++
    this.slots[slot.index] = this._spawn(slot.index)
  }

  _settle (job, outcome, error) {
    if (job.settled) return
    job.settled = true
    clearTimeout(job.timer)
    if (error !== undefined) job.reject(error)
    else job.resolve(outcome)
  }

  _pump () {
    let i = 0
    while (i < this.queue.length) {
      const job = this.queue[i]
      const slot = job.slot === undefined
        ? this.slots.find((s) => s.ready && s.job === null)
        : this.slots[job.slot]
      if (slot === undefined || !slot.ready || slot.job !== null) {
        if (job.slot === undefined && !this.slots.some((s) => s.ready && s.job === null)) return
        i++
        continue
      }
      this.queue.splice(i, 1)
      this._assign(slot, job)
    }
  }

  _assign (slot, job) {
    slot.job = job
    slot.proc.send({
      t: 'run', id: job.id, code: job.code, timeout: job.timeout,
      providers: job.providers, bridge: this.bridge, local: job.local
    })
    job.timer = setTimeout(() => {
      // Settle on the host clock. The child disposes its isolate at the same bound; if it has not
      // reported shortly after, the engine is wedged: kill the child and let _onExit replace it.
      this._settle(job, { result: undefined, error: timeoutText(job.timeout), logs: [] })
      if (slot.job === job && slot.killTimer === null) {
        slot.killTimer = setTimeout(() => { if (slot.job === job) slot.proc.kill('SIGKILL') }, this.killGraceMs)
      }
    }, job.timeout)
  }

  /**
   * execute({ code, providers?: [{name, tools}] | [name], dispatch?, timeout? }, { slot?, local? })
   * -> Promise<{ result, error?, logs }>. Rejects only with ExecutorError (a fault of the executor).
   * `slot` pins the run to one child and `local` answers tool calls inside the child: both are
   * benchmark-only knobs.
   */
  execute (req, { slot, local = false } = {}) {
    if (this.disposed) return Promise.reject(new ExecutorError('DISPOSED', 'The executor was disposed.'))
    if (req === null || typeof req !== 'object' || typeof req.code !== 'string') {
      return Promise.reject(new ExecutorError('MALFORMED_REQUEST', 'The request needs a code string.'))
    }
    if (this.queue.length >= this.maxQueue) {
      return Promise.reject(new ExecutorError('QUEUE_FULL', 'The execution queue is full.', { retryable: true }))
    }
    this.start()
    return new Promise((resolve, reject) => {
      const providers = (req.providers || []).map((p) => typeof p === 'string' ? p : p.name)
      this.queue.push({
        id: this.nextId++,
        code: req.code,
        providers,
        dispatch: req.dispatch || (() => JSON.stringify({ error: 'No dispatch was given for this execution.' })),
        timeout: req.timeout === undefined ? this.timeout : req.timeout,
        local,
        slot,
        resolve,
        reject,
        settled: false,
        timer: null
      })
      this._pump()
    })
  }

  /** Resolves when every child has reported ready. */
  ready () {
    this.start()
    if (this.slots.every((s) => s.ready)) return Promise.resolve()
    return new Promise((resolve) => {
      const check = () => {
        if (this.slots.every((s) => s.ready)) {
          this.off('ready', check)
          resolve()
        }
      }
      this.on('ready', check)
    })
  }

  pids () {
    return this.slots.map((s) => s.pid)
  }

  dispose () {
    this.disposed = true
    for (const job of this.queue.splice(0)) {
      this._settle(job, undefined, new ExecutorError('DISPOSED', 'The executor was disposed.'))
    }
    const exits = this.slots.map((s) => new Promise((resolve) => {
      if (s.proc.exitCode !== null || s.proc.signalCode !== null) return resolve()
      s.proc.once('exit', resolve)
      s.proc.kill('SIGTERM')
    }))
    return Promise.all(exits)
  }
}

/** Resident memory of a process in MB, from /proc/<pid>/status (VmRSS, and VmHWM as the peak). */
function rssMb (pid) {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (key) => Number((status.match(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm')) || [])[1])
  return { rss: kb('VmRSS') / 1024, hwm: kb('VmHWM') / 1024 }
}

module.exports = { Pool, ExecutorError, rssMb, timeoutText, memoryText }
