'use strict';
// What the vendored tests get for require('child_process'): Node's own
// module with spawn, exec, execFile and ChildProcess replaced by
// process-tether's (NODE_COMPAT_TARGET=tether, the default), or Node's
// module untouched (NODE_COMPAT_TARGET=node: the baseline run). The sync
// APIs and fork stay Node's: process-tether does not offer them.
const node = require('node:child_process');
if (process.env.NODE_COMPAT_TARGET === 'node') {
  module.exports = node;
} else {
  const tether = require('process-tether');
  module.exports = {
    ...node,
    spawn: tether.spawn,
    exec: tether.exec,
    execFile: tether.execFile,
    ChildProcess: tether.ChildProcess,
  };
}
