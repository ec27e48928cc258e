#!/usr/bin/env node
'use strict';
// `npx process-tether mcp` (and every other `tether` subcommand): runs the
// `tether` executable this package carries, contained by this package —
// if this launcher dies, however (an MCP client's SIGKILL), its keeper
// kills `tether` and, with it, every session `tether mcp` started.
const { spawn, tetherPath } = require('..');

const child = spawn(tetherPath, process.argv.slice(2), { stdio: 'inherit', purpose: 'npx' });
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => child.kill(signal));
}
child.on('error', (err) => {
  process.stderr.write(`process-tether: ${err.message}\n`);
  process.exitCode = 125;
});
child.on('exit', (code, signal) => {
  process.exitCode = code !== null ? code : 128 + (require('node:os').constants.signals[signal] || 0);
});
