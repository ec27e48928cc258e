'use strict';
// execFile, exec (with their util.promisify forms) and run, over spawn —
// Node's own logic (lib/child_process.js of v20), so buffering, maxBuffer,
// timeout and the errors are as child_process's.
const { promisify } = require('node:util');
const { spawn } = require('./child');
const { nodeError, invalidArgType } = require('./errors');

const MAX_BUFFER = 1024 * 1024;

function normalizeExecFileArgs(file, args, options, callback) {
  if (Array.isArray(args)) {
    args = args.slice();
  } else if (args != null && typeof args === 'object') {
    callback = options;
    options = args;
    args = null;
  } else if (typeof args === 'function') {
    callback = args;
    options = null;
    args = null;
  }
  if (args == null) args = [];
  if (typeof options === 'function') callback = options;
  else if (options != null && typeof options !== 'object') throw invalidArgType('options', 'of type object', options);
  if (options == null || typeof options === 'function') options = {};
  if (callback != null && typeof callback !== 'function') throw invalidArgType('callback', 'of type function', callback);
  if (options.argv0 != null && typeof options.argv0 !== 'string') {
    throw invalidArgType('options.argv0', 'of type string', options.argv0);
  }
  return { file, args, options, callback };
}

function execFile(file, args, options, callback) {
  ({ file, args, options, callback } = normalizeExecFileArgs(file, args, options, callback));
  options = {
    encoding: 'utf8',
    timeout: 0,
    maxBuffer: MAX_BUFFER,
    killSignal: 'SIGTERM',
    cwd: null,
    env: null,
    shell: false,
    ...options,
  };
  if (!(Number.isInteger(options.timeout) && options.timeout >= 0)) {
    throw nodeError(RangeError, 'ERR_OUT_OF_RANGE',
      `The value of "timeout" is out of range. It must be an unsigned integer. Received ${options.timeout}`);
  }
  if (options.maxBuffer != null && !(typeof options.maxBuffer === 'number' && options.maxBuffer >= 0)) {
    throw nodeError(RangeError, 'ERR_OUT_OF_RANGE',
      `The value of "options.maxBuffer" is out of range. It must be a positive number. Received ${options.maxBuffer}`);
  }
  const child = spawn(file, args, {
    cwd: options.cwd,
    env: options.env,
    gid: options.gid,
    shell: options.shell,
    signal: options.signal,
    uid: options.uid,
    argv0: options.argv0,
    killSignal: options.killSignal,
    grace: options.grace,
    purpose: options.purpose,
    memory: options.memory,
    pids: options.pids,
    cpu: options.cpu,
    requireLimits: options.requireLimits,
  });
  const encoding = options.encoding !== 'buffer' && Buffer.isEncoding(options.encoding) ? options.encoding : null;
  const _stdout = [];
  const _stderr = [];
  let stdoutLen = 0;
  let stderrLen = 0;
  let killed = false;
  let exited = false;
  let timeoutId;
  let ex = null;
  let cmd = file;

  function exithandler(code, signal) {
    if (exited) return;
    exited = true;
    if (timeoutId) {
      clearTimeout(timeoutId);
      timeoutId = null;
    }
    if (!callback) return;
    const join = (chunks, stream) =>
      encoding || (stream && stream.readableEncoding) ? chunks.join('') : Buffer.concat(chunks);
    const stdout = join(_stdout, child.stdout);
    const stderr = join(_stderr, child.stderr);
    if (!ex && code === 0 && signal === null) {
      callback(null, stdout, stderr);
      return;
    }
    if (args.length) cmd += ` ${args.join(' ')}`;
    if (!ex) {
      ex = new Error(`Command failed: ${cmd}\n${stderr}`);
      ex.code = code < 0 ? require('./errors').errnoName(-code) || code : code;
      ex.killed = child.killed || killed;
      ex.signal = signal;
    }
    ex.cmd = cmd;
    callback(ex, stdout, stderr);
  }

  function errorhandler(e) {
    ex = e;
    if (child.stdout) child.stdout.destroy();
    if (child.stderr) child.stderr.destroy();
    exithandler();
  }

  function kill() {
    if (child.stdout) child.stdout.destroy();
    if (child.stderr) child.stderr.destroy();
    killed = true;
    try {
      child.kill(options.killSignal);
    } catch (e) {
      ex = e;
      exithandler();
    }
  }

  if (options.timeout > 0) {
    timeoutId = setTimeout(() => {
      kill();
      timeoutId = null;
    }, options.timeout);
  }

  const collect = (stream, chunks, which) => {
    if (encoding) stream.setEncoding(encoding);
    stream.on('data', (chunk) => {
      if (chunk == null) return;
      const enc = stream.readableEncoding;
      const length = enc ? Buffer.byteLength(chunk, enc) : chunk.length;
      const total = which === 'stdout' ? (stdoutLen += length) : (stderrLen += length);
      if (total > options.maxBuffer) {
        const truncated = options.maxBuffer - (total - length);
        chunks.push(chunk.slice(0, truncated));
        ex = nodeError(RangeError, 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER', `${which} maxBuffer length exceeded`);
        kill();
      } else {
        chunks.push(chunk);
      }
    });
  };
  if (child.stdout) collect(child.stdout, _stdout, 'stdout');
  if (child.stderr) collect(child.stderr, _stderr, 'stderr');
  child.addListener('close', exithandler);
  child.addListener('error', errorhandler);
  return child;
}

function customPromisify(orig) {
  return (...args) => {
    let child;
    const promise = new Promise((resolve, reject) => {
      child = orig(...args, (err, stdout, stderr) => {
        if (err !== null) {
          err.stdout = stdout;
          err.stderr = stderr;
          reject(err);
        } else {
          resolve({ stdout, stderr });
        }
      });
    });
    promise.child = child;
    return promise;
  };
}

Object.defineProperty(execFile, promisify.custom, { enumerable: false, value: customPromisify(execFile) });

function normalizeExecArgs(command, options, callback) {
  if (typeof command !== 'string') throw invalidArgType('command', 'of type string', command);
  if (typeof options === 'function') {
    callback = options;
    options = undefined;
  }
  options = { ...options };
  options.shell = typeof options.shell === 'string' ? options.shell : true;
  return { file: command, options, callback };
}

function exec(command, options, callback) {
  const opts = normalizeExecArgs(command, options, callback);
  return execFile(opts.file, opts.options, opts.callback);
}

Object.defineProperty(exec, promisify.custom, { enumerable: false, value: customPromisify(exec) });

/**
 * Runs a command to its end: resolves to { code, signal, stdout, stderr,
 * descendantsKilled, timedOut, limitHit, pid } whatever the exit code
 * (rejects only when it cannot start, or its output passes maxBuffer).
 */
function run(command, args, options) {
  if (!Array.isArray(args)) {
    options = args;
    args = [];
  }
  options = { encoding: 'utf8', maxBuffer: Infinity, ...options };
  return new Promise((resolve, reject) => {
    let child;
    try {
      // Every spawn option goes through (a list of them here once left
      // out uid/gid: `run(..., { uid: 65534 })` ran the command as root).
      // eslint-disable-next-line no-unused-vars
      const { input, encoding: _encoding, maxBuffer: _maxBuffer, stdio: _stdio, ...spawnOptions } = options;
      child = spawn(command, args, {
        ...spawnOptions,
        stdio: [input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
      });
    } catch (e) {
      reject(e);
      return;
    }
    const encoding = options.encoding !== 'buffer' && Buffer.isEncoding(options.encoding) ? options.encoding : null;
    const out = [];
    const err = [];
    let size = 0;
    let failed = null;
    const take = (stream, chunks) => {
      if (!stream) return;
      stream.on('data', (chunk) => {
        if (failed) return;
        size += chunk.length;
        if (size > options.maxBuffer) {
          // Up to the limit, then nothing (as execFile): the chunk that
          // crossed it was once dropped and the ones read after the kill
          // kept, so err.stdout had a hole in the middle.
          chunks.push(chunk.subarray(0, chunk.length - (size - options.maxBuffer)));
          failed = nodeError(RangeError, 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER', 'maxBuffer length exceeded');
          child.kill('SIGKILL');
          return;
        }
        chunks.push(chunk);
      });
    };
    take(child.stdout, out);
    take(child.stderr, err);
    if (child.stdin) {
      child.stdin.on('error', () => {}); // EPIPE: the command did not read it all.
      child.stdin.end(options.input);
    }
    child.on('error', (e) => {
      if (!failed) failed = e;
    });
    child.on('close', (code, signal) => {
      const text = (chunks) => {
        const all = Buffer.concat(chunks);
        return encoding ? all.toString(encoding) : all;
      };
      if (failed) {
        failed.stdout = text(out);
        failed.stderr = text(err);
        reject(failed);
        return;
      }
      resolve({
        code,
        signal,
        stdout: text(out),
        stderr: text(err),
        descendantsKilled: child.descendantsKilled,
        timedOut: child.timedOut,
        limitHit: child.limitHit,
        limits: child.limits,
        pid: child.pid,
      });
    });
  });
}

module.exports = { execFile, exec, run };
