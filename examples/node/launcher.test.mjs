// The launcher example: its backend's whole tree (the backend and the
// setsid'd helper it detaches) dies with the launcher however the
// launcher ends; the backend carries the spawn tag naming the launcher
// and `tether ps` lists it, registered by `tether exec`, under the launcher.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { tetherPath } from 'process-tether';

const here = path.dirname(fileURLToPath(import.meta.url));
const TAG_VAR = 'TETHER_TEST_TAG';

function environ(pid) {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0');
  } catch {
    return [];
  }
}

function tagged(tag) {
  return readdirSync('/proc').filter((p) => /^\d+$/.test(p)).map(Number).filter((pid) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) return false;
    } catch {
      return false;
    }
    return environ(pid).includes(`${TAG_VAR}=${tag}`);
  });
}

async function until(what, check, ms = 20000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function startLauncher(tag) {
  const launcher = spawn(process.execPath, [path.join(here, 'launcher.mjs')], {
    env: { ...process.env, [TAG_VAR]: tag },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  launcher.stdout.on('data', (d) => (out += d));
  const ready = await until('backend ready', () => /backend ready pid=(\d+) port=(\d+)/.exec(out));
  // The backend, the helper it detached, and the launcher itself.
  await until('the backend tree', () => tagged(tag).length >= 3);
  return { launcher, backendPid: Number(ready[1]), port: Number(ready[2]) };
}

for (const [how, end] of [
  ['SIGKILL', (launcher) => launcher.kill('SIGKILL')],
  ['a crash (uncaught exception)', (launcher) => launcher.kill('SIGUSR2')],
  ['Ctrl-C (SIGINT)', (launcher) => launcher.kill('SIGINT')],
]) {
  test(`the backend's whole tree dies with the launcher: ${how}`, async () => {
    const tag = `launcher-${process.pid}-${how.replace(/\W/g, '')}`;
    try {
      const { launcher, backendPid, port } = await startLauncher(tag);
      // The backend serves, and says which spawn tag it carries: the
      // launcher's pid is its owner.
      const reply = await (await fetch(`http://127.0.0.1:${port}/`)).json();
      assert.equal(reply.pid, backendPid, 'tether exec became the backend (same pid)');
      const fields = reply.spawnTag.split(':');
      assert.equal(fields[0], 'v1');
      assert.equal(Number(fields[3]), launcher.pid, `the tag names the launcher: ${reply.spawnTag}`);
      {
        // `tether ps` lists the backend, registered, under the launcher.
        const ps = JSON.parse(execFileSync(tetherPath, ['ps', '--json'], { encoding: 'utf8' }));
        const owner = ps.owners.find((o) => o.pid === launcher.pid);
        assert.ok(owner, `tether ps lists the launcher ${launcher.pid}`);
        const text = JSON.stringify(owner);
        assert.ok(text.includes('"backend"'), `its backend session is listed: ${text.slice(0, 400)}`);
        assert.ok(text.includes(String(backendPid)), `with the backend's pid: ${text.slice(0, 400)}`);
        end(launcher);
      }
      await until('the launcher to end', () => launcher.exitCode !== null || launcher.signalCode !== null);
      await until(`nothing tagged ${tag} (left: ${tagged(tag)})`, () => tagged(tag).length === 0);
    } finally {
      for (const pid of tagged(tag)) {
        try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ }
      }
    }
  });
}
