'use strict';
// Background sessions (the registry tether mcp is built on): start with
// pipes or a terminal, read from an offset, write, keys, wait for a
// pattern or the exit, kill (verified), list, screen. Pending promises
// keep the event loop alive; a session alone does not (it dies with the
// process when the loop ends).
const { native } = require('./native');
const { fromNative } = require('./errors');

function wrap(fn, syscall) {
  try {
    return fn();
  } catch (e) {
    throw fromNative(e, syscall);
  }
}

async function wrapAsync(promise, syscall) {
  try {
    return await promise;
  } catch (e) {
    throw fromNative(e, syscall);
  }
}

function envPairs(env) {
  return env ? Object.entries(env).filter(([, v]) => v !== undefined).map(([k, v]) => `${k}=${v}`) : undefined;
}

class Session {
  constructor(id) {
    /** The session's id (never a pid). */
    this.id = id;
  }

  /** Output from `offset` (default 0), up to `maxBytes` (64 KiB). */
  read({ offset = 0, maxBytes = 65536, stderr = false } = {}) {
    return wrap(() => native.readSession(this.id, offset, maxBytes, stderr), 'read');
  }

  /** Writes to its stdin or terminal. */
  write(data) {
    return wrapAsync(native.writeSession(this.id, Buffer.from(data)), 'write');
  }

  closeStdin() {
    return wrap(() => native.closeSessionStdin(this.id), 'close');
  }

  /** Sends named keys ('Enter', 'C-c', 'Up', …) to its terminal. */
  keys(...names) {
    const bytes = wrap(() => native.sessionKeys(this.id, names.flat()), 'keys');
    return this.write(bytes);
  }

  /**
   * Waits until the output matches `until` (a regular expression, as a
   * string), the command exits, or `timeoutMs` passes.
   */
  wait({ until, timeoutMs = 30000, offset, stderr, settled, throughExit } = {}) {
    if (until instanceof RegExp) until = until.source;
    return wrapAsync(native.waitSession(this.id, { timeoutMs, until, offset, stderr, settled, throughExit }), 'wait');
  }

  /** Kills the whole tree, verified empty (`grace` ms before SIGKILL). */
  kill({ grace = 2000 } = {}) {
    return wrapAsync(native.killSession(this.id, grace), 'kill');
  }

  info() {
    return wrap(() => native.sessionInfo(this.id), 'info');
  }

  /** A PTY session's screen: { rows, cols, lines, cursorRow, cursorCol, text }. */
  screen() {
    const view = wrap(() => native.sessionScreen(this.id), 'screen');
    let last = view.lines.length;
    while (last > 0 && view.lines[last - 1] === '') last--;
    view.text = view.lines.slice(0, last).join('\n');
    return view;
  }

  resize(rows, cols) {
    return wrap(() => native.resizeSession(this.id, rows, cols), 'resize');
  }
}

/**
 * Starts a session: `command` is an argv array, or a shell command line.
 * Options: cwd, env (added to the inherited environment; envClear for none),
 * stdin (a pipe to write to), separateStderr, pty: [rows, cols],
 * timeout/idleTimeout/grace (ms), memory/pids/cpu, purpose.
 */
async function startSession(command, options = {}) {
  const argv = Array.isArray(command) ? command : undefined;
  const script = typeof command === 'string' ? command : undefined;
  const id = await wrapAsync(native.startSession({
    argv,
    script,
    cwd: options.cwd,
    env: envPairs(options.env),
    envClear: options.envClear,
    stdin: options.stdin,
    separateStderr: options.separateStderr,
    pty: options.pty,
    timeoutMs: options.timeout,
    idleTimeoutMs: options.idleTimeout,
    graceMs: options.grace,
    maxMemory: options.maxMemory,
    spillCap: options.spillCap,
    purpose: options.purpose,
    memory: options.memory,
    pids: options.pids,
    cpu: options.cpu,
    requireLimits: options.requireLimits,
  }), `spawn ${argv ? argv[0] : 'sh'}`);
  return new Session(id);
}

/** Every session of this process, as `info()` reports each. */
function listSessions() {
  return native.listSessions();
}

function session(id) {
  return new Session(id);
}

module.exports = { Session, startSession, listSessions, session };
