'use strict';
// process-tether: child_process, contained. See docs/node.md.
const { ChildProcess, spawn } = require('./lib/child');
const { execFile, exec, run } = require('./lib/exec');
const { Session, startSession, listSessions, session } = require('./lib/session');
const { native, tetherPath, keeperPath } = require('./lib/native');

module.exports = {
  spawn,
  execFile,
  exec,
  run,
  ChildProcess,
  Session,
  startSession,
  listSessions,
  session,
  /** The `tether` executable this package carries (CLI and MCP server). */
  tetherPath,
  keeperPath,
  /** Keeps up to `n` keepers of finished commands for the next ones (default 2). */
  setWarmKeepers: (n) => native.setWarmKeepers(n),
  version: native.version(),
};
