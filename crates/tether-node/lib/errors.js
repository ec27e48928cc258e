'use strict';
// Node-shaped errors from the addon's (see src/error.rs): the code, errno,
// path and message travel in the message, separated by \u0001.
const os = require('node:os');

function errnoName(errno) {
  for (const [name, value] of Object.entries(os.constants.errno)) {
    if (value === errno) return name;
  }
  return undefined;
}

// A spawn error as child_process gives it: `spawn FILE ENOENT`, with
// errno (negative, libuv's), code, syscall, path and spawnargs.
function fromNative(e, syscall, extra) {
  const message = e && e.message;
  if (typeof message !== 'string' || message[0] !== '\u0001') return e;
  const [, code, errnoText, path, detail] = message.split('\u0001');
  const errno = Number(errnoText);
  let err;
  if (errno > 0) {
    const name = code || errnoName(errno) || 'UNKNOWN';
    err = new Error(`${syscall} ${name}`);
    err.errno = -errno;
    err.code = name;
    err.syscall = syscall;
    if (path) err.path = path;
  } else if (code === 'ERR_INVALID_ARG_VALUE') {
    err = new TypeError(detail);
    err.code = code;
  } else {
    err = new Error(detail);
    err.code = code;
  }
  err.detail = detail;
  if (extra) Object.assign(err, extra);
  return err;
}

// Node's ERR_INVALID_ARG_TYPE, ERR_INVALID_ARG_VALUE, ERR_OUT_OF_RANGE, …
function nodeError(Base, code, message) {
  const err = new Base(message);
  err.code = code;
  return err;
}

function describe(value) {
  if (value == null) return ` Received ${value}`;
  if (typeof value === 'function') return ` Received function ${value.name}`;
  if (typeof value === 'object') {
    if (value.constructor && value.constructor.name) return ` Received an instance of ${value.constructor.name}`;
    return ` Received ${require('node:util').inspect(value, { depth: -1 })}`;
  }
  let shown = require('node:util').inspect(value, { colors: false });
  if (shown.length > 28) shown = `${shown.slice(0, 25)}...`;
  return ` Received type ${typeof value} (${shown})`;
}

function invalidArgType(name, expected, actual) {
  return nodeError(TypeError, 'ERR_INVALID_ARG_TYPE',
    `The "${name}" ${name.includes('.') ? 'property' : 'argument'} must be ${expected}.${describe(actual)}`);
}

module.exports = { fromNative, nodeError, invalidArgType, errnoName };
