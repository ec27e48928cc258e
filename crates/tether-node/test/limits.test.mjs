// Limits (G9) from Node: memory, pids, cpu on spawn/run and sessions,
// reported as applied (with how), and the limit a command ran into.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { run, spawn, startSession } from 'process-tether';
import { cleanup, taggedEnv, taggedPids, uniqueTag, TAG_VAR } from './helpers.mjs';

const CGROUPS = ['cgroup2', 'cgroup1'];
const requireRoot = process.getuid() === 0 || process.env.TETHER_REQUIRE_ROOT !== '1';
const rootOnly = process.getuid() === 0 ? {} : { skip: 'creating cgroups needs root here' };
if (!requireRoot) throw new Error('TETHER_REQUIRE_ROOT=1 but not root');

test('the report says how each limit is enforced', rootOnly, async () => {
  const tag = uniqueTag('limits');
  try {
    const child = spawn('sleep', ['1000'], { memory: '512M', pids: 100, cpu: 0.5, env: taggedEnv(tag) });
    const { limits } = child;
    assert.equal(limits.memory.value, 512 * 1024 * 1024);
    assert.equal(limits.pids.value, 100);
    assert.equal(limits.cpu.value, 0.5);
    for (const limit of [limits.memory, limits.pids, limits.cpu]) {
      assert.ok(CGROUPS.includes(limit.enforced), JSON.stringify(limit));
    }
    child.kill('SIGKILL');
    await new Promise((r) => child.on('exit', r));
    assert.deepEqual(taggedPids(tag), []);
    const plain = await run('true');
    assert.deepEqual(plain.limits, {});
  } finally {
    cleanup(tag);
  }
});

test('a fork loop under pids: 8 is contained and the hit reported', rootOnly, async () => {
  const tag = uniqueTag('pids');
  try {
    const done = await run('sh', ['-c', 'for i in $(seq 30); do sleep 1000 & done 2>/dev/null; wait'], {
      pids: 8, timeout: 3000, grace: 100, env: taggedEnv(tag),
    });
    assert.equal(done.limitHit, 'pids');
    assert.deepEqual(taggedPids(tag), []);
  } finally {
    cleanup(tag);
  }
});

test('a 2 GiB allocation under memory: 256M is killed and reported; the owner lives', rootOnly, async () => {
  const tag = uniqueTag('memory');
  try {
    const done = await run(process.execPath, ['-e', 'const b = Buffer.alloc(2 ** 31 - 1, 1); console.log(b.length)'], {
      memory: '256M', env: taggedEnv(tag),
    });
    assert.equal(done.limitHit, 'memory');
    assert.equal(done.signal, 'SIGKILL');
    assert.equal(done.stdout, '');
    const s = await startSession(['sleep', '1000'], { memory: '256M', env: { [TAG_VAR]: tag } });
    assert.ok(CGROUPS.includes(s.info().limits.memory.enforced));
    await s.kill({ grace: 0 });
  } finally {
    cleanup(tag);
  }
});

test('bad limits throw and start nothing', async () => {
  assert.throws(() => spawn('true', [], { pids: 0 }), /pids/);
  assert.throws(() => spawn('true', [], { memory: 'lots' }), /memory/);
});
