// spawn/execFile/exec/run: the child_process contract, and what
// containment adds — kill() ends the whole tree (verified), 'close' does
// not wait on a grandchild holding a pipe, timeouts kill the tree.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { promisify } from 'node:util';
import { spawn, execFile, exec, run } from 'process-tether';
import {
  ESCAPE_TREE, ESCAPE_TREE_COUNT, assertNothingLeft, cleanup, exited, startOwner, taggedEnv, taggedPids,
  uniqueTag, waitForCount,
} from './helpers.mjs';

function collect(stream) {
  const chunks = [];
  stream.on('data', (d) => chunks.push(d));
  return () => Buffer.concat(chunks).toString();
}

test('events in order: spawn, exit, close; output and exit code', async () => {
  const child = spawn('sh', ['-c', 'echo out; echo err >&2; exit 3']);
  assert.equal(typeof child.pid, 'number');
  const events = [];
  for (const e of ['spawn', 'exit', 'close']) child.on(e, () => events.push(e));
  const out = collect(child.stdout);
  const err = collect(child.stderr);
  const [code, signal] = await new Promise((r) => child.on('close', (c, s) => r([c, s])));
  assert.deepEqual(events, ['spawn', 'exit', 'close']);
  assert.equal(code, 3);
  assert.equal(signal, null);
  assert.equal(child.exitCode, 3);
  assert.equal(out(), 'out\n');
  assert.equal(err(), 'err\n');
  assert.equal(child.containment.length > 0, true);
});

test("kill() ends the whole tree, escapes included, verified before 'exit'", async () => {
  const tag = uniqueTag('kill');
  try {
    const child = spawn('sh', ['-c', ESCAPE_TREE], { env: taggedEnv(tag), grace: 500 });
    await new Promise((r) => child.stdout.on('data', (d) => String(d).includes('ready') && r()));
    await waitForCount(tag, ESCAPE_TREE_COUNT);
    assert.equal(child.kill(), true);
    assert.equal(child.killed, true);
    const [code, signal] = await exited(child);
    assert.equal(code, null);
    assert.equal(signal, 'SIGTERM');
    // 'exit' comes once the keeper verified the tree empty: nothing to
    // wait for.
    assert.deepEqual(taggedPids(tag), []);
    assert.equal(child.descendantsKilled, ESCAPE_TREE_COUNT - 1);
    assert.equal(child.kill(), false, 'nothing to signal after the exit');
  } finally {
    cleanup(tag);
  }
});

test("kill('SIGKILL') reaches every process at once, even those ignoring SIGTERM", async () => {
  const tag = uniqueTag('sigkill');
  try {
    const child = spawn('sh', ['-c', "trap '' TERM; sleep 1000 & setsid sleep 1000 & echo ready; wait"], {
      env: taggedEnv(tag),
      grace: 60000,
    });
    await new Promise((r) => child.stdout.on('data', (d) => String(d).includes('ready') && r()));
    await waitForCount(tag, 3);
    child.kill('SIGKILL');
    const [, signal] = await exited(child);
    assert.equal(signal, 'SIGKILL');
    assert.deepEqual(taggedPids(tag), []);
  } finally {
    cleanup(tag);
  }
});

test("'close' fires although a grandchild holds stdout (child_process's would wait for it)", async () => {
  const tag = uniqueTag('close');
  try {
    const child = spawn('sh', ['-c', '(sleep 1000; echo late) & echo main done'], { env: taggedEnv(tag) });
    const out = collect(child.stdout);
    const [code] = await new Promise((r) => child.on('close', (c, s) => r([c, s])));
    assert.equal(code, 0);
    assert.equal(out(), 'main done\n');
    // The subshell, and its sleep if it got that far.
    assert.ok(child.descendantsKilled >= 1);
    assert.deepEqual(taggedPids(tag), []);
  } finally {
    cleanup(tag);
  }
});

test('timeout kills the whole tree and says so', async () => {
  const tag = uniqueTag('timeout');
  try {
    const done = await run('sh', ['-c', 'setsid sleep 1000 & echo started; exec sleep 1000'], {
      timeout: 300, grace: 200, env: taggedEnv(tag),
    });
    assert.equal(done.timedOut, true);
    assert.equal(done.code, null);
    assert.equal(done.signal, 'SIGTERM');
    assert.equal(done.stdout, 'started\n');
    assert.equal(done.descendantsKilled, 1);
    assert.deepEqual(taggedPids(tag), []);
    // spawn's own timeout option, as Node's.
    const child = spawn('sleep', ['1000'], { timeout: 200, env: taggedEnv(tag) });
    const [, signal] = await exited(child);
    assert.equal(signal, 'SIGTERM');
    assert.equal(child.timedOut, true);
    // execFile's: Node's error, killed.
    const err = await promisify(execFile)('sleep', ['1000'], { timeout: 200, env: taggedEnv(tag) }).catch((e) => e);
    assert.equal(err.killed, true);
    assert.equal(err.signal, 'SIGTERM');
    assert.deepEqual(taggedPids(tag), []);
  } finally {
    cleanup(tag);
  }
});

test('ENOENT as Node gives it: emitted, with code, errno, syscall, path, spawnargs', async () => {
  const child = spawn('no-such-program-for-tether', ['a', 'b']);
  assert.equal(child.pid, undefined);
  const err = await new Promise((r) => child.on('error', r));
  assert.equal(err.code, 'ENOENT');
  assert.equal(err.errno, -2);
  assert.equal(err.syscall, 'spawn no-such-program-for-tether');
  assert.equal(err.path, 'no-such-program-for-tether');
  assert.deepEqual(err.spawnargs, ['a', 'b']);
  assert.equal(err.message, 'spawn no-such-program-for-tether ENOENT');
  await assert.rejects(run('no-such-program-for-tether'), { code: 'ENOENT' });
  const viaExec = await promisify(execFile)('no-such-program-for-tether').catch((e) => e);
  assert.equal(viaExec.code, 'ENOENT');
  // A bad cwd is ENOENT too, naming the directory.
  const badCwd = spawn('true', [], { cwd: '/no/such/dir' });
  const cwdErr = await new Promise((r) => badCwd.on('error', r));
  assert.equal(cwdErr.code, 'ENOENT');
  assert.equal(cwdErr.path, '/no/such/dir');
  // Bad arguments throw, as Node's.
  assert.throws(() => spawn(42), { code: 'ERR_INVALID_ARG_TYPE' });
  assert.throws(() => spawn(''), { code: 'ERR_INVALID_ARG_VALUE' });
  assert.throws(() => spawn('true', [], { timeout: -1 }), { code: 'ERR_OUT_OF_RANGE' });
  assert.throws(() => spawn('sleep', ['1']).kill('SIGNOPE'), { code: 'ERR_UNKNOWN_SIGNAL' });
});

test('execFile and exec: callbacks and util.promisify forms, errors as Node', async () => {
  const { stdout, stderr } = await promisify(execFile)('sh', ['-c', 'echo a; echo b >&2']);
  assert.equal(stdout, 'a\n');
  assert.equal(stderr, 'b\n');
  const viaExec = await promisify(exec)('echo $((6 * 7))');
  assert.equal(viaExec.stdout, '42\n');
  const failed = await promisify(exec)('echo no >&2; exit 4').catch((e) => e);
  assert.equal(failed.code, 4);
  assert.equal(failed.killed, false);
  assert.equal(failed.signal, null);
  assert.equal(failed.stderr, 'no\n');
  assert.match(failed.message, /^Command failed: echo no >&2; exit 4\nno\n/);
  const buffer = await new Promise((resolve, reject) =>
    execFile('printf', ['\\001\\002'], { encoding: 'buffer' }, (e, out) => (e ? reject(e) : resolve(out))));
  assert.deepEqual(buffer, Buffer.from([1, 2]));
  const big = await promisify(execFile)('head', ['-c', '2000', '/dev/zero'], { maxBuffer: 1000 }).catch((e) => e);
  assert.equal(big.code, 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER');
  assert.equal(big.stdout.length, 1000);
});

test('run: input, cwd, env, encoding; never rejects for an exit code', async () => {
  const done = await run('sh', ['-c', 'cat; pwd; echo $GREETING; exit 5'], {
    input: 'from stdin\n', cwd: '/tmp', env: { ...process.env, GREETING: 'hello' },
  });
  assert.equal(done.code, 5);
  assert.equal(done.stdout, 'from stdin\n/tmp\nhello\n');
  assert.equal(done.timedOut, false);
  const bytes = await run('printf', ['\\377'], { encoding: 'buffer' });
  assert.deepEqual(bytes.stdout, Buffer.from([255]));
});

test('stdin is a writable pipe; stdio inherit and ignore', async () => {
  const child = spawn('tr', ['a-z', 'A-Z']);
  const out = collect(child.stdout);
  child.stdin.end('shout\n');
  await new Promise((r) => child.on('close', r));
  assert.equal(out(), 'SHOUT\n');
  const quiet = spawn('sh', ['-c', 'echo hidden'], { stdio: 'ignore' });
  assert.equal(quiet.stdout, null);
  const [code] = await new Promise((r) => quiet.on('close', (c) => r([c])));
  assert.equal(code, 0);
});

test('unref(): an owner whose only child is unref’d exits, and the child dies with it', async () => {
  const tag = uniqueTag('unref');
  try {
    const { owner } = await startOwner(`
import { spawn } from 'process-tether';
const child = spawn('sleep', ['1000'], { stdio: 'ignore', env: { ...process.env, TETHER_TEST_TAG: process.env.TREE_TAG } });
child.unref();
console.log('ready');
`, tag);
    const [code] = await new Promise((r) => owner.on('exit', (c, s) => r([c, s])));
    assert.equal(code, 0);
    await assertNothingLeft(tag);
  } finally {
    cleanup(tag);
  }
});

test('a running child keeps the owner alive until it exits (as Node)', async () => {
  const tag = uniqueTag('ref');
  try {
    const { owner, out } = await startOwner(`
import { spawn } from 'process-tether';
const child = spawn('sh', ['-c', 'read x; echo child ended'], { stdio: ['inherit', 'inherit', 'inherit'] });
child.on('exit', (code) => console.log('exit ' + code));
console.log('ready');
`, tag);
    // Alive, waiting for its child, which waits for a line.
    assert.equal(owner.exitCode, null);
    owner.stdin.end('go\n');
    const [code] = await new Promise((r) => owner.on('exit', (c, s) => r([c, s])));
    assert.equal(code, 0);
    assert.match(out(), /child ended\nexit 0/);
  } finally {
    cleanup(tag);
  }
});
