// A long-lived backend: an HTTP server (on a free port) with a helper
// process that escapes into a session of its own, as real backends'
// workers do. It prints `listening <port>` once it serves.
import http from 'node:http';
import { spawn } from 'node:child_process';

// A helper that would outlive a plain child_process launcher: setsid and
// detached, its own session, nobody's child but init's once we go.
spawn('setsid', ['sleep', '100000'], { detached: true, stdio: 'ignore' }).unref();

const server = http.createServer((req, res) => {
  res.end(JSON.stringify({ pid: process.pid, spawnTag: process.env.TETHER_SPAWN }));
});
server.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`));
