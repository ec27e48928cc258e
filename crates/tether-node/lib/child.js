'use strict';
// `spawn` and `ChildProcess`, shaped like node:child_process's: the same
// events in the same order, the same streams (Node's own pipe sockets over
// the addon's descriptors), the same errors. What differs is what
// containment gives: `kill()` reaches the whole tree, 'exit' comes once
// what the main process left behind is dead, so 'close' never waits on a
// grandchild holding a pipe. docs/node.md lists every difference.
const EventEmitter = require('node:events');
const net = require('node:net');
const { Readable, Writable } = require('node:stream');
const os = require('node:os');
const { native } = require('./native');
const { fromNative, nodeError, invalidArgType } = require('./errors');

const signals = os.constants.signals;
const signalNames = Object.fromEntries(Object.entries(signals).map(([name, n]) => [n, name]));

// Node's convertToValidSignal.
function toSignal(sig) {
  if (typeof sig === 'number' && signalNames[sig]) return sig;
  if (typeof sig === 'string' && signals[sig.toUpperCase()] !== undefined && sig === sig.toUpperCase()) {
    return signals[sig];
  }
  throw nodeError(TypeError, 'ERR_UNKNOWN_SIGNAL', `Unknown signal: ${sig}`);
}

const STDIO_PIPE = -1;
const STDIO_INHERIT = -2;
const STDIO_IGNORE = -3;

function stdioCode(entry, i) {
  if (entry == null || entry === 'pipe' || entry === 'overlapped') return STDIO_PIPE;
  if (entry === 'inherit') return STDIO_INHERIT;
  if (entry === 'ignore') return STDIO_IGNORE;
  if (typeof entry === 'number' && Number.isInteger(entry) && entry >= 0) return entry;
  if (typeof entry === 'object') {
    const fd = typeof entry.fd === 'number' ? entry.fd : entry._handle && entry._handle.fd;
    if (typeof fd === 'number' && fd >= 0) return fd;
  }
  if (entry === 'ipc') {
    throw nodeError(Error, 'ERR_FEATURE_UNAVAILABLE_ON_PLATFORM',
      "process-tether: stdio 'ipc' is not supported (see docs/node.md)");
  }
  throw nodeError(TypeError, 'ERR_INVALID_ARG_VALUE',
    `The argument 'stdio' is invalid. Received ${require('node:util').inspect(entry)}`);
}

function normalizeStdio(stdio) {
  if (stdio === undefined || stdio === null) stdio = 'pipe';
  if (typeof stdio === 'string') {
    if (!['pipe', 'overlapped', 'inherit', 'ignore'].includes(stdio)) {
      throw nodeError(TypeError, 'ERR_INVALID_ARG_VALUE',
        `The argument 'stdio' is invalid. Received '${stdio}'`);
    }
    stdio = [stdio, stdio, stdio];
  } else if (!Array.isArray(stdio)) {
    throw nodeError(TypeError, 'ERR_INVALID_ARG_VALUE',
      `The argument 'stdio' is invalid. Received ${require('node:util').inspect(stdio)}`);
  }
  const codes = [0, 1, 2].map((i) => stdioCode(stdio[i], i));
  for (let i = 3; i < stdio.length; i++) {
    if (stdio[i] != null && stdio[i] !== 'ignore') {
      throw nodeError(Error, 'ERR_FEATURE_UNAVAILABLE_ON_PLATFORM',
        `process-tether: stdio[${i}] ${require('node:util').inspect(stdio[i])}: only 3 standard streams (see docs/node.md)`);
    }
  }
  return codes;
}

// Node's normalizeSpawnArguments, the parts that apply.
function normalizeSpawnArguments(file, args, options) {
  if (typeof file !== 'string') throw invalidArgType('file', 'of type string', file);
  if (file.length === 0) {
    throw nodeError(TypeError, 'ERR_INVALID_ARG_VALUE', "The argument 'file' cannot be empty. Received ''");
  }
  if (file.includes('\u0000')) {
    throw nodeError(TypeError, 'ERR_INVALID_ARG_VALUE',
      `The argument 'file' must be a string without null bytes. Received ${JSON.stringify(file)}`);
  }
  if (Array.isArray(args)) {
    args = args.slice();
  } else if (args == null) {
    args = [];
  } else if (typeof args !== 'object') {
    throw invalidArgType('args', 'an object', args);
  } else {
    options = args;
    args = [];
  }
  if (options === undefined) options = {};
  else if (options === null || typeof options !== 'object') throw invalidArgType('options', 'of type object', options);
  for (const [i, a] of args.entries()) {
    // Node converts what is not a string (a number, say) with String().
    if (typeof a !== 'string') {
      args[i] = String(a);
      continue;
    }
    if (a.includes('\u0000')) {
      throw nodeError(TypeError, 'ERR_INVALID_ARG_VALUE',
        `The argument 'args[${i}]' must be a string without null bytes. Received ${JSON.stringify(a)}`);
    }
  }
  let cwd = options.cwd;
  if (cwd != null) {
    if (cwd instanceof URL) cwd = require('node:url').fileURLToPath(cwd);
    if (typeof cwd !== 'string') throw invalidArgType('options.cwd', 'of type string or an instance of URL', cwd);
    if (cwd.includes('\u0000')) {
      throw nodeError(TypeError, 'ERR_INVALID_ARG_VALUE',
        `The property 'options.cwd' must be a string, Uint8Array, or URL without null bytes. Received ${JSON.stringify(cwd)}`);
    }
  }
  if (typeof options.shell === 'string' && options.shell.includes('\u0000')) {
    throw nodeError(TypeError, 'ERR_INVALID_ARG_VALUE',
      `The property 'options.shell' must be a string without null bytes. Received ${JSON.stringify(options.shell)}`);
  }
  if (options.shell != null && typeof options.shell !== 'boolean' && typeof options.shell !== 'string') {
    throw invalidArgType('options.shell', 'of type boolean or string', options.shell);
  }
  if (options.argv0 != null && typeof options.argv0 !== 'string') {
    throw invalidArgType('options.argv0', 'of type string', options.argv0);
  }
  for (const key of ['uid', 'gid']) {
    const id = options[key];
    if (id == null) continue;
    // Node's validateInt32: the addon takes a u32, where 2 ** 32 wrapped
    // to 0 (root) and -1 meant "unchanged" (still root): both ran the
    // command as this process's user instead of failing.
    if (!Number.isInteger(id) || id < -(2 ** 31) || id >= 2 ** 31) {
      throw nodeError(TypeError, 'ERR_INVALID_ARG_TYPE',
        `The "options.${key}" property must be int32. Received type ${typeof id} (${id})`);
    }
    if (id < 0) {
      // What uv_spawn answers, thrown as Node throws it.
      const err = new Error('spawn EINVAL');
      Object.assign(err, { errno: -22, code: 'EINVAL', syscall: 'spawn' });
      throw err;
    }
  }
  if (options.timeout != null && !(Number.isInteger(options.timeout) && options.timeout >= 0)) {
    throw nodeError(RangeError, 'ERR_OUT_OF_RANGE',
      `The value of "timeout" is out of range. It must be an unsigned integer. Received ${options.timeout}`);
  }
  if (options.signal !== undefined && !isAbortSignal(options.signal)) {
    throw invalidArgType('options.signal', 'an instance of AbortSignal', options.signal);
  }
  let spawnfile = file;
  let spawnargs = [file, ...args];
  if (options.shell) {
    const command = [file, ...args].join(' ');
    const shell = typeof options.shell === 'string' ? options.shell : '/bin/sh';
    spawnfile = shell;
    spawnargs = [shell, '-c', command];
  }
  const argv0 = typeof options.argv0 === 'string' ? options.argv0 : spawnargs[0];
  const env = options.env || process.env;
  const envPairs = [];
  // for…in, as Node: inherited keys count too.
  // eslint-disable-next-line guard-for-in
  for (const key in env) {
    const value = env[key];
    if (value !== undefined) envPairs.push(`${key}=${value}`);
  }
  return { ...options, file: spawnfile, args: spawnargs, argv0, cwd, envPairs };
}

const kNative = Symbol('tether.native');

class ChildProcess extends EventEmitter {
  constructor() {
    super();
    this._closesNeeded = 1;
    this._closesGot = 0;
    this.connected = false;
    this.signalCode = null;
    this.exitCode = null;
    this.killed = false;
    this.spawnfile = null;
    this.spawnargs = [];
    this.pid = undefined;
    this.stdin = null;
    this.stdout = null;
    this.stderr = null;
    this.stdio = [null, null, null];
    /** Descendants killed on the way to an empty tree (known at 'exit'). */
    this.descendantsKilled = 0;
    /** Killed because its `timeout` passed. */
    this.timedOut = false;
    /** `'memory'` or `'pids'` when the tree ran into that limit. */
    this.limitHit = null;
    this[kNative] = null;
  }

  spawn(options) {
    const opts = normalizeSpawnArguments(options.file, options.args ? options.args.slice(1) : [], options);
    return this._spawn(opts);
  }

  _spawn(opts) {
    const codes = normalizeStdio(opts.stdio);
    // One entry per stdio entry, as Node's: those past the third
    // ('ignore' or null, the only ones taken) are null.
    if (Array.isArray(opts.stdio)) while (this.stdio.length < opts.stdio.length) this.stdio.push(null);
    this.spawnfile = opts.file;
    this.spawnargs = opts.args;
    const killSignal = opts.killSignal === undefined ? 'SIGTERM' : opts.killSignal;
    if (typeof killSignal !== 'string' && typeof killSignal !== 'number') {
      throw invalidArgType('options.killSignal', 'of type string or number', killSignal);
    }
    const killNumber = toSignal(killSignal);
    let handle;
    try {
      handle = native.spawn({
        file: opts.file,
        args: opts.args.slice(1),
        argv0: opts.argv0,
        // '' is no directory, as Node takes it.
        cwd: opts.cwd == null || opts.cwd === '' ? undefined : opts.cwd,
        env: opts.envPairs,
        stdio: codes,
        // A timeout with the default signal is the tree's kill ladder,
        // in the keeper (reported as timedOut); another signal is sent
        // from here when it passes, as Node does.
        timeoutMs: opts.timeout > 0 && killNumber === signals.SIGTERM ? opts.timeout : undefined,
        graceMs: opts.grace == null ? undefined : opts.grace,
        purpose: opts.purpose,
        detached: !!opts.detached,
        uid: opts.uid,
        gid: opts.gid,
        memory: opts.memory,
        pids: opts.pids,
        cpu: opts.cpu,
        requireLimits: !!opts.requireLimits,
      }, (event) => this._onExit(event));
    } catch (e) {
      const err = fromNative(e, `spawn ${opts.file}`, { spawnargs: opts.args.slice(1) });
      if (err.errno !== undefined && ['ENOENT', 'EACCES', 'ENOTDIR', 'EAGAIN', 'EMFILE', 'ENFILE'].includes(err.code)) {
        // Run-time errors are emitted, not thrown (Node's rule).
        this.exitCode = err.errno;
        // Node has made the pipes before the exec fails: streams that end
        // at once stand in for them.
        for (let i = 0; i < 3; i++) {
          if (codes[i] !== STDIO_PIPE) continue;
          const stream = i === 0
            ? new Writable({ write: (chunk, encoding, done) => done() })
            : new Readable({ read() { this.push(null); } });
          if (i > 0) {
            this._closesNeeded++;
            stream.on('close', () => this._maybeClose());
          }
          this.stdio[i] = stream;
        }
        [this.stdin, this.stdout, this.stderr] = this.stdio;
        process.nextTick(() => {
          this.emit('error', err);
          if (this.stdin) this.stdin.destroy();
          for (const stream of this.stdio.slice(1)) if (stream) stream.resume();
          this._maybeClose();
        });
        return err.errno;
      }
      throw err;
    }
    this[kNative] = handle;
    this.pid = handle.pid;
    this.containment = handle.containment;
    this.sessionId = handle.sessionId;
    if (opts.timeout > 0 && killNumber !== signals.SIGTERM) {
      const timer = setTimeout(() => {
        if (this.kill(killNumber)) this.timedOut = true;
      }, opts.timeout);
      timer.unref();
      this.once('exit', () => clearTimeout(timer));
    }
    const fds = [handle.stdinFd, handle.stdoutFd, handle.stderrFd];
    for (let i = 0; i < 3; i++) {
      const fd = fds[i];
      if (fd === null || fd === undefined) continue;
      const socket = new net.Socket({ fd, readable: i > 0, writable: i === 0 });
      if (i > 0) {
        this._closesNeeded++;
        socket.on('close', () => this._maybeClose());
      }
      this.stdio[i] = socket;
    }
    this.stdin = this.stdio[0];
    this.stdout = this.stdio[1];
    this.stderr = this.stdio[2];
    process.nextTick(() => this.emit('spawn'));
    return 0;
  }

  /** The limits as applied, each with how it is enforced. */
  get limits() {
    return this[kNative] ? this[kNative].limits : null;
  }

  _onExit(event) {
    this.descendantsKilled = event.descendantsKilled;
    // Or already set here: a timeout with another killSignal.
    this.timedOut = this.timedOut || event.timedOut;
    this.limitHit = event.limitHit || null;
    if (event.error) {
      const err = new Error(`process-tether: lost the command's keeper: ${event.error}`);
      err.code = 'ETETHER_KEEPER';
      this.emit('error', err);
    }
    if (event.signal != null) this.signalCode = signalNames[event.signal] || `SIG${event.signal}`;
    // A lost keeper reports neither (undefined, which Node's never gives).
    else this.exitCode = event.code ?? null;
    if (this.stdin) this.stdin.destroy();
    this.emit('exit', this.exitCode, this.signalCode);
    // What nobody reads is drained, so 'close' comes (Node's flushStdio).
    process.nextTick(() => {
      for (let i = 1; i < this.stdio.length; i++) {
        const stream = this.stdio[i];
        if (stream && stream.readable && !stream.readableFlowing && stream.listenerCount('data') === 0 &&
            stream.listenerCount('readable') === 0) {
          stream.resume();
        }
      }
    });
    this._maybeClose();
  }

  _maybeClose() {
    this._closesGot++;
    if (this._closesGot === this._closesNeeded) this.emit('close', this.exitCode, this.signalCode);
  }

  /**
   * Sends `signal` (default 'SIGTERM') to the whole tree: SIGTERM climbs
   * the kill ladder (every process, SIGKILL to what is left after the
   * grace), SIGKILL reaches every process at once, another signal is
   * delivered to every process. `false` once the command has exited.
   */
  kill(sig) {
    const signal = sig === 0 ? 0 : toSignal(sig === undefined ? 'SIGTERM' : sig);
    const handle = this[kNative];
    if (!handle || this.exitCode !== null || this.signalCode !== null) return false;
    let sent;
    try {
      sent = handle.kill(signal);
    } catch (e) {
      this.emit('error', fromNative(e, 'kill'));
      return false;
    }
    if (sent && signal !== 0) this.killed = true;
    return sent;
  }

  ref() {
    if (this[kNative]) this[kNative].ref();
  }

  unref() {
    if (this[kNative]) this[kNative].unref();
  }

  get [Symbol.toStringTag]() {
    return 'ChildProcess';
  }
}

/** node:child_process.spawn, contained. */
function spawn(file, args, options) {
  const opts = normalizeSpawnArguments(file, args, options);
  const child = new ChildProcess();
  child._spawn(opts);
  if (opts.signal) attachAbort(child, opts.signal, opts.killSignal);
  return child;
}

function isAbortSignal(signal) {
  return typeof signal === 'object' && signal !== null && 'aborted' in signal;
}

function attachAbort(child, signal, killSignal) {
  const onAbort = () => {
    if (child.kill(killSignal === undefined ? 'SIGTERM' : killSignal)) {
      const err = new Error('The operation was aborted');
      err.name = 'AbortError';
      err.code = 'ABORT_ERR';
      err.cause = signal.reason;
      child.emit('error', err);
    }
  };
  if (signal.aborted) process.nextTick(onAbort);
  else {
    signal.addEventListener('abort', onAbort, { once: true });
    child.once('exit', () => signal.removeEventListener('abort', onAbort));
  }
}

module.exports = { ChildProcess, spawn, normalizeSpawnArguments, toSignal, signalNames };
