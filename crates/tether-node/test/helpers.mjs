// Shared by the tests: unique tags, the processes carrying one, owners
// started as real Node processes, bounded waits for conditions.
import { spawn as nodeSpawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// Every test's ledger in a state directory of its own, never the
// machine's (CI checks the default one stays untouched).
if (!process.env.TETHER_HOME) process.env.TETHER_HOME = mkdtempSync(path.join(tmpdir(), 'tether-node-home-'));

export const TAG_VAR = 'TETHER_TEST_TAG';
let counter = 0;

/** A unique tag for one test. */
export function uniqueTag(name) {
  return `node-${name}-${process.pid}-${counter++}`;
}

/** This process's environment plus the tag. */
export function taggedEnv(tag, extra = {}) {
  return { ...process.env, [TAG_VAR]: tag, ...extra };
}

/** Live (non-zombie) processes whose environment carries `tag`. */
export function taggedPids(tag) {
  const needle = Buffer.from(`\0${TAG_VAR}=${tag}\0`);
  const found = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'latin1');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) continue;
      const env = Buffer.concat([Buffer.from([0]), readFileSync(`/proc/${name}/environ`), Buffer.from([0])]);
      if (env.includes(needle)) found.push(Number(name));
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

function commandOf(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').join(' ').trim();
  } catch {
    return '?';
  }
}

/** Polls `check` until it returns a truthy value or `ms` pass (then throws `what`). */
export async function waitFor(what, check, ms = 20000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Waits until at least `n` processes carry `tag`. */
export function waitForCount(tag, n, ms) {
  return waitFor(`${n} processes tagged ${tag} (have ${taggedPids(tag).length})`,
    () => taggedPids(tag).length >= n, ms);
}

/** Waits until no process carries `tag`; kills and names any left after `ms`. */
export async function assertNothingLeft(tag, ms = 20000) {
  try {
    await waitFor(`no process tagged ${tag}`, () => taggedPids(tag).length === 0, ms);
  } catch (e) {
    const left = taggedPids(tag);
    const shown = left.map((pid) => `${pid} ${commandOf(pid)}`).join('; ');
    cleanup(tag);
    throw new Error(`${left.length} processes outlived their owner: ${shown}`);
  }
}

/** Kills whatever carries `tag` (clean-up by tag, never by name). */
export function cleanup(tag) {
  for (const pid of taggedPids(tag)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone meanwhile.
    }
  }
}

/**
 * The escape tree: setsid, nohup and a double fork, each a `sleep`, then
 * `ready` and a main process that waits. 5 processes with the tag: the
 * shell and four sleeps.
 */
export const ESCAPE_TREE = [
  'setsid sleep 1000 &',
  'nohup sleep 1000 >/dev/null 2>&1 &',
  '( (sleep 1000 &) & )',
  '( setsid sh -c "sleep 1000 & exec sleep 1000" & )',
  'echo ready',
  'exec sleep 1000',
].join('\n');
export const ESCAPE_TREE_COUNT = 6;

/** An owner's spawn option for its commands' environment: the test's tag. */
export const TREE_ENV = 'env: { ...process.env, TETHER_TEST_TAG: process.env.TREE_TAG }';

/** The package's name, as the tests import it. */
export const PACKAGE = 'process-tether';

/**
 * Starts `source` (an ES module using the package, written beside the
 * tests so that `import 'process-tether'` resolves as it does for them)
 * as a real Node owner with `tag` in its environment; resolves once it
 * printed `ready`, with the process and everything it printed so far.
 * `files` are more modules written beside it (`{name: source}`); every
 * file is removed when the owner exits.
 */
export function startOwner(source, tag, { args = [], ready = 'ready', files = {} } = {}) {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const written = [];
  const write = (name, text) => {
    const file = path.join(here, name);
    writeFileSync(file, text);
    written.push(file);
    return file;
  };
  for (const [name, text] of Object.entries(files)) write(name, text);
  const main = write(`owner-${tag}.mjs`, source);
  const owner = nodeSpawn(process.execPath, [main, ...args], {
    cwd: here,
    // The owner passes the tag to what it starts (TREE_ENV), without
    // carrying it itself: what is counted is its commands.
    env: { ...process.env, TREE_TAG: tag },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  owner.stderr.on('data', (d) => (err += d));
  owner.on('exit', () => written.forEach((f) => rmSync(f, { force: true })));
  return new Promise((resolve, reject) => {
    owner.stdout.on('data', (d) => {
      out += d;
      if (out.includes(ready)) resolve({ owner, out: () => out, err: () => err });
    });
    owner.on('exit', (code, signal) => {
      if (!out.includes(ready)) reject(new Error(`owner ended (${code ?? signal}) before '${ready}': ${out} ${err}`));
    });
  });
}

/** Resolves with [code, signal] when `child` exits (at once if it has). */
export function exited(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve([child.exitCode, child.signalCode]);
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve([code, signal])));
}
