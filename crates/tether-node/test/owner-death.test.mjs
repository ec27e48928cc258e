// G2 from Node: however the owner ends — SIGKILL, process.exit(), an
// uncaught exception, a blocked event loop, a worker thread's end, a
// cluster primary's death — no process of what it started survives. The
// lifeline is the addon's descriptor, not JavaScript's event loop.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  ESCAPE_TREE, ESCAPE_TREE_COUNT, TREE_ENV, assertNothingLeft, cleanup, startOwner, uniqueTag, waitForCount,
} from './helpers.mjs';

const TREE = JSON.stringify(ESCAPE_TREE);

// Starts the escape tree through the package; `up` runs once the tree
// printed `ready`.
const startTree = (up) => `
const child = spawn('sh', ['-c', ${TREE}], { grace: 200, ${TREE_ENV} });
child.stdout.on('data', (d) => { if (String(d).includes('ready')) { ${up} } });
`;

// An owner that prints `ready` once its tree is up, and runs `then` when
// the test writes a line to it (once it counted the whole tree).
const owner = (then) => `
import { spawn } from 'process-tether';
${startTree("console.log('ready ' + child.pid);")}
process.stdin.once('data', () => { ${then} });
`;

async function ownerEnds(name, then, end) {
  const tag = uniqueTag(name);
  try {
    const { owner: proc } = await startOwner(owner(then), tag);
    await waitForCount(tag, ESCAPE_TREE_COUNT);
    if (end) end(proc);
    else proc.stdin.write('go\n');
    await assertNothingLeft(tag);
  } finally {
    cleanup(tag);
  }
}

test('owner SIGKILLed: the escape tree (setsid, nohup, double fork) dies', async () => {
  await ownerEnds('sigkill', '', (proc) => proc.kill('SIGKILL'));
});

test('owner calls process.exit(): nothing left', async () => {
  await ownerEnds('exit', 'process.exit(0);');
});

test('owner crashes with an uncaught exception: nothing left', async () => {
  await ownerEnds('crash', "throw new Error('boom');");
});

test('owner whose event loop is blocked for ever is SIGKILLed: nothing left', async () => {
  const tag = uniqueTag('blocked');
  try {
    const { owner: proc, out } = await startOwner(owner("console.log('blocking'); for (;;) {}"), tag);
    await waitForCount(tag, ESCAPE_TREE_COUNT);
    proc.stdin.write('go\n');
    await new Promise((resolve) => {
      const check = () => (out().includes('blocking') ? resolve() : setTimeout(check, 10));
      check();
    });
    proc.kill('SIGKILL');
    await assertNothingLeft(tag);
  } finally {
    cleanup(tag);
  }
});

// A worker thread is the owner of the tree: the main thread prints
// `ready` when the worker says its tree is up, and runs `then` on a line
// from the test.
const workerFiles = (tag) => ({
  [`owner-${tag}-worker.mjs`]: `
import { spawn } from 'process-tether';
import { parentPort } from 'node:worker_threads';
${startTree("parentPort.postMessage('up');")}
`,
});
const workerOwner = (tag, then) => `
import { Worker } from 'node:worker_threads';
const worker = new Worker(new URL('./owner-${tag}-worker.mjs', import.meta.url));
worker.on('message', () => console.log('ready'));
process.stdin.once('data', () => { ${then} });
// The process lives on, whatever the worker does.
setInterval(() => {}, 1000);
`;

test('worker_threads owner: the process SIGKILLed, nothing left', async () => {
  const tag = uniqueTag('worker-sigkill');
  try {
    const { owner: proc } = await startOwner(workerOwner(tag, ''), tag, { files: workerFiles(tag) });
    await waitForCount(tag, ESCAPE_TREE_COUNT);
    proc.kill('SIGKILL');
    await assertNothingLeft(tag);
  } finally {
    cleanup(tag);
  }
});

test('worker_threads owner: the worker terminated, its commands die while the process lives', async () => {
  const tag = uniqueTag('worker-terminate');
  let proc;
  try {
    ({ owner: proc } = await startOwner(workerOwner(tag, 'worker.terminate();'), tag, { files: workerFiles(tag) }));
    await waitForCount(tag, ESCAPE_TREE_COUNT);
    proc.stdin.write('go\n');
    await assertNothingLeft(tag);
    // The owner process is still running: the worker's end alone did it.
    assert.equal(proc.exitCode, null);
    assert.equal(proc.signalCode, null);
  } finally {
    if (proc) proc.kill('SIGKILL');
    cleanup(tag);
  }
});

test('cluster owner: the primary SIGKILLed, its worker goes and takes its tree', async () => {
  const tag = uniqueTag('cluster');
  const source = `
import cluster from 'node:cluster';
if (cluster.isPrimary) {
  const worker = cluster.fork();
  worker.on('message', (m) => console.log('ready ' + m));
} else {
  const { spawn } = await import('process-tether');
  ${startTree('process.send(String(child.pid));')}
}
`;
  try {
    const { owner: proc } = await startOwner(source, tag);
    await waitForCount(tag, ESCAPE_TREE_COUNT);
    proc.kill('SIGKILL');
    await assertNothingLeft(tag);
  } finally {
    cleanup(tag);
  }
});

// (A session that held the event loop would make this owner run for ever:
// the test's timeout says so.)
test('an owner whose only work is a background session ends by itself, and the session with it', { timeout: 30000 }, async () => {
  const tag = uniqueTag('session-owner');
  try {
    const { owner: proc } = await startOwner(`
import { startSession } from 'process-tether';
const s = await startSession(['sh', '-c', ${TREE}], { env: { TETHER_TEST_TAG: process.env.TREE_TAG } });
await s.wait({ until: 'ready', timeoutMs: 20000 });
console.log('ready ' + s.id);
// Nothing pending: the event loop ends here, as with no session.
`, tag);
    const [code] = await new Promise((r) => (proc.exitCode !== null ? r([proc.exitCode]) : proc.on('exit', (c) => r([c]))));
    assert.equal(code, 0);
    await assertNothingLeft(tag);
  } finally {
    cleanup(tag);
  }
});
