// G5 from Node: after many commands, the owner's descriptors, threads and
// zombies are back to what they were (warm keepers included in the
// baseline: they are kept on purpose, at most 2).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { spawn, run } from 'process-tether';

const fds = () => readdirSync('/proc/self/fd').length;
const threads = () => readdirSync('/proc/self/task').length;
function zombies() {
  let n = 0;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (fields[0] === 'Z' && Number(fields[1]) === process.pid) n++;
    } catch {
      // Gone meanwhile.
    }
  }
  return n;
}

async function cycle() {
  const child = spawn('sh', ['-c', 'echo out; echo err >&2; sleep 1000 & exit 0']);
  child.stdin.on('error', () => {}); // EPIPE if sh exits first, as with child_process
  child.stdin.end('x');
  child.stdout.resume();
  child.stderr.resume();
  await new Promise((r) => child.on('close', r));
  await run('true');
}

// Waits (bounded) for a count to come back down: a waiting thread exits
// just after it delivered the exit, the kernel releases it a little later.
async function settles(what, now, baseline) {
  const deadline = Date.now() + 10000;
  while (now() > baseline && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  assert.ok(now() <= baseline, `${what}: ${now()} now, ${baseline} before`);
}

test('50 commands leave no descriptor, thread or zombie behind', async () => {
  // Warm-up: the first commands start the warm keepers (each a socket
  // here) and libuv's own machinery.
  for (let i = 0; i < 3; i++) await cycle();
  const [fd0, threads0] = [fds(), threads()];
  for (let i = 0; i < 50; i++) await cycle();
  await settles('descriptors', fds, fd0);
  await settles('threads', threads, threads0);
  assert.equal(zombies(), 0);
});
