// A desktop-style launcher (what an Electron main process does for its
// backend): starts a long-lived backend whose whole tree dies with the
// launcher however the launcher ends — quit, crash, SIGKILL, OOM kill —
// and which registers itself, with the launcher as its spawner, in
// tether's ledger (`tether ps` lists it under the launcher).
//
//   node launcher.mjs            # prints the backend's port; Ctrl-C ends both
//
// The backend is started through `tether exec --purpose backend`: it
// registers the backend (its identity, purpose and spawner: the owner its
// spawn tag names, this launcher) and then becomes it (same pid). The
// spawn tag TETHER_SPAWN, which every process of the backend's tree
// inherits, names this launcher's pid and start time.
import { spawn, tetherPath } from 'process-tether';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

const backend = spawn(
  tetherPath,
  ['exec', '--purpose', 'backend', '--', process.execPath, path.join(here, 'backend.mjs')],
  {
    stdio: ['ignore', 'pipe', 'inherit'],
    purpose: 'backend',
    // A backend gets time to shut down cleanly when the launcher quits.
    grace: 2000,
  },
);

backend.stdout.setEncoding('utf8');
backend.stdout.on('data', (text) => {
  const port = /listening (\d+)/.exec(text);
  if (port) console.log(`backend ready pid=${backend.pid} port=${port[1]}`);
});
backend.on('exit', (code, signal) => {
  console.log(`backend ended (${code ?? signal})`);
  process.exitCode = code ?? 1;
});

// A clean quit: the backend's tree is killed (verified) before we go.
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => backend.kill('SIGTERM'));
}

// Every other way out needs nothing from here: the lifeline is the
// addon's, and the kernel closes it. (For the example's test: a crash,
// an uncaught exception, on SIGUSR2.)
process.on('SIGUSR2', () => {
  throw new Error('launcher crashed');
});
