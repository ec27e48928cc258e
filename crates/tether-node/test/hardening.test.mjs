// Defects a careless or hostile user ran into, one test each (docs/node.md
// "Tests and CI"): each failed before its fix.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile as nodeExecFile } from 'node:child_process';
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { spawn, run } from 'process-tether';
import { assertNothingLeft, cleanup, exited, taggedEnv, taggedPids, uniqueTag } from './helpers.mjs';

const fds = () => readdirSync('/proc/self/fd').length;
const closed = (child) => new Promise((r) => child.on('close', r));

test('a finished command holds no descriptor while its object is alive', async () => {
  const tag = uniqueTag('heldfd');
  // Programs keep their ChildProcess objects (a map of jobs, a log): each
  // kept its keeper's socket until a garbage collection took the object,
  // so a loop of commands ran into EMFILE under `ulimit -n 256`.
  const once = async () => {
    const child = spawn('true', [], { env: taggedEnv(tag) });
    child.stdout.resume();
    child.stderr.resume();
    await closed(child);
    return child;
  };
  try {
    for (let i = 0; i < 3; i++) await once(); // warm keepers, libuv's own
    const before = fds();
    const kept = [];
    for (let i = 0; i < 40; i++) kept.push(await once());
    assert.ok(fds() <= before, `${fds()} descriptors with 40 finished commands kept, ${before} before`);
    assert.equal(kept.length, 40);
    await assertNothingLeft(tag);
  } finally {
    cleanup(tag);
  }
});

test('uid/gid out of range are refused, not run as root (uid -1 meant "unchanged", 2 ** 32 wrapped to 0); NUL bytes in cwd/shell', () => {
  const tag = uniqueTag('uid');
  try {
    assert.throws(() => spawn('true', [], { uid: -1, env: taggedEnv(tag) }), { code: 'EINVAL', syscall: 'spawn' });
    assert.throws(() => spawn('true', [], { gid: -1, env: taggedEnv(tag) }), { code: 'EINVAL' });
    assert.throws(() => spawn('true', [], { uid: 2 ** 32, env: taggedEnv(tag) }), { code: 'ERR_INVALID_ARG_TYPE' });
    assert.throws(() => spawn('true', [], { uid: 1.5, env: taggedEnv(tag) }), { code: 'ERR_INVALID_ARG_TYPE' });
    // NUL bytes refused as Node refuses them (a cwd with one was an ENOENT
    // 'error', a shell with one a spawn of a program named with it).
    assert.throws(() => spawn('true', [], { cwd: '/tmp\0/x', env: taggedEnv(tag) }), { code: 'ERR_INVALID_ARG_VALUE' });
    assert.throws(() => spawn('true', [], { shell: '/bin/sh\0x', env: taggedEnv(tag) }), { code: 'ERR_INVALID_ARG_VALUE' });
    assert.deepEqual(taggedPids(tag), []);
  } finally {
    cleanup(tag);
  }
});

test("run passes spawn's options on: uid, gid, argv0, killSignal", { skip: process.getuid() !== 0 && 'needs root' }, async () => {
  const tag = uniqueTag('runopts');
  try {
    const done = await run('sh', ['-c', 'echo $(id -u) $(id -g) $0'], { uid: 65534, gid: 65534, argv0: 'named', env: taggedEnv(tag) });
    assert.equal(done.stdout, '65534 65534 named\n');
    const timed = await run('sleep', ['1000'], { timeout: 100, killSignal: 'SIGKILL', env: taggedEnv(tag) });
    assert.equal(timed.signal, 'SIGKILL');
    assert.equal(timed.timedOut, true);
    await assertNothingLeft(tag);
  } finally {
    cleanup(tag);
  }
});

test("timeout with another killSignal: that signal, and timedOut, as with the default", async () => {
  const tag = uniqueTag('killsignal');
  try {
    const child = spawn('sleep', ['1000'], { timeout: 100, killSignal: 'SIGINT', env: taggedEnv(tag) });
    const [code, signal] = await exited(child);
    assert.equal(code, null);
    assert.equal(signal, 'SIGINT');
    assert.equal(child.timedOut, true);
    await assertNothingLeft(tag);
  } finally {
    cleanup(tag);
  }
});

test("run's maxBuffer: the output up to the limit, without a hole", async () => {
  const tag = uniqueTag('maxbuffer');
  try {
    let all = '';
    for (let i = 1; i <= 300000; i++) all += `${i}\n`;
    const err = await run('seq', ['1', '300000'], { maxBuffer: 100000, env: taggedEnv(tag) }).catch((e) => e);
    assert.equal(err.code, 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER');
    assert.equal(err.stdout.length, 100000);
    assert.ok(all.startsWith(err.stdout), 'err.stdout is the beginning of the output');
    await assertNothingLeft(tag);
  } finally {
    cleanup(tag);
  }
});

test("out of descriptors: spawn emits 'error' EMFILE as Node's, it does not throw", async () => {
  const tag = uniqueTag('emfile');
  const here = path.dirname(fileURLToPath(import.meta.url));
  const owner = path.join(here, `owner-${tag}.mjs`);
  // 60 commands under `ulimit -n 64`: Node emits EMFILE for those it
  // cannot start; spawn threw ETETHER_KEEPER (an uncaught exception in a
  // program that handles 'error').
  writeFileSync(owner, `
import { spawn } from 'process-tether';
const env = { ...process.env, TETHER_TEST_TAG: process.env.TREE_TAG };
const kids = [];
const seen = {};
for (let i = 0; i < 60; i++) {
  let child;
  try {
    // No pipes: the keeper's socket is what runs out (with pipes, which
    // of the two does depends on the descriptors the owner started with).
    child = spawn('sleep', ['1000'], { env, stdio: 'ignore' });
  } catch (e) {
    seen['threw ' + e.code] = true;
    continue;
  }
  child.on('error', (e) => { seen['error ' + e.code] = true; });
  kids.push(child);
}
setImmediate(() => {
  for (const child of kids) child.kill('SIGKILL');
  console.log(JSON.stringify(seen));
});
`);
  try {
    const { stdout } = await promisify(nodeExecFile)('sh', ['-c', `ulimit -n 64 && exec "$0" "$1"`, process.execPath, owner],
      { cwd: here, env: { ...process.env, TREE_TAG: tag } });
    assert.deepEqual(JSON.parse(stdout), { 'error EMFILE': true });
    await assertNothingLeft(tag);
  } finally {
    rmSync(owner, { force: true });
    cleanup(tag);
  }
});

test("a keeper killed under a command: 'error', 'exit', 'close' once each, exitCode null, the tree gone", async () => {
  const tag = uniqueTag('keeperlost');
  try {
    const child = spawn('sh', ['-c', 'setsid sleep 1000 & sleep 1000 & echo ready; wait'], { env: taggedEnv(tag) });
    const events = [];
    for (const name of ['error', 'exit', 'close']) child.on(name, (arg) => events.push([name, name === 'error' ? arg.code : arg]));
    await new Promise((r) => child.stdout.once('data', r));
    // The main process's parent is its keeper (a process of this test's).
    const stat = readFileSync(`/proc/${child.pid}/stat`, 'latin1');
    const keeper = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    assert.match(readFileSync(`/proc/${keeper}/cmdline`, 'latin1'), /tether/);
    process.kill(keeper, 'SIGKILL');
    await closed(child);
    assert.deepEqual(events, [['error', 'ETETHER_KEEPER'], ['exit', null], ['close', null]]);
    assert.equal(child.exitCode, null);
    assert.equal(child.kill(), false);
    await assertNothingLeft(tag);
  } finally {
    cleanup(tag);
  }
});

test('child.stdio has an entry per stdio entry, as Node (null past the third)', async () => {
  const tag = uniqueTag('stdiolen');
  try {
    const child = spawn('true', [], { stdio: ['pipe', 'pipe', 'ignore', 'ignore', null], env: taggedEnv(tag) });
    assert.equal(child.stdio.length, 5);
    assert.equal(child.stdio[3], null);
    assert.equal(child.stdio[4], null);
    assert.equal(child.stdio[1], child.stdout);
    child.stdout.resume();
    await closed(child);
    await assertNothingLeft(tag);
  } finally {
    cleanup(tag);
  }
});
