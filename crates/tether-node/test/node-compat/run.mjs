// Node's own child_process tests (vendored in parallel/, see README.md here)
// run twice each: against Node's child_process (the baseline: what the
// vendored version of each test expects of Node 20) and with
// process-tether's spawn/exec/execFile substituted. Fails on any test
// that passes on Node and fails on process-tether unless it is a
// documented difference (KNOWN below, docs/node.md), and on a known
// difference that no longer is one (the list must stay true).
// Each test runs under process-tether's spawn: whatever a test leaves
// behind (the baseline's child_process leaks some) dies with it.
import { spawn } from 'process-tether';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const dir = path.join(here, 'parallel');

// Tests that pass on Node and fail on process-tether: each a difference
// containment makes (docs/node.md, "Node's own tests").
const KNOWN = {
};

function runOne(file, target) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(dir, file)], {
      cwd: dir,
      env: { ...process.env, NODE_COMPAT_TARGET: target },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 60000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ ok: code === 0, code, signal, out });
    });
  });
}

const files = readdirSync(dir).filter((f) => f.startsWith('test-') && f.endsWith('.js')).sort();
const results = [];
// Two at a time (the machine's cores); each test's two runs one after the other.
const queue = [...files];
await Promise.all([0, 1].map(async () => {
  while (queue.length) {
    const file = queue.shift();
    const node = await runOne(file, 'node');
    const tether = await runOne(file, 'tether');
    results.push({ file, node, tether });
  }
}));
results.sort((a, b) => a.file.localeCompare(b.file));

let failed = false;
let passing = 0;
let applicable = 0;
for (const { file, node, tether } of results) {
  const mark = (r) => (r.ok ? 'pass' : `FAIL(${r.code ?? r.signal})`);
  let note = '';
  if (node.ok) applicable++;
  if (node.ok && tether.ok) passing++;
  if (node.ok && !tether.ok) {
    if (KNOWN[file]) note = `known difference: ${KNOWN[file]}`;
    else {
      note = 'UNEXPECTED';
      failed = true;
    }
  } else if (!node.ok) {
    note = 'fails on Node itself (the stored version does not run on Node 20): not counted';
  } else if (KNOWN[file]) {
    note = 'listed as a known difference but passes: update KNOWN and docs/node.md';
    failed = true;
  }
  console.log(`${file.padEnd(55)} node:${mark(node).padEnd(10)} tether:${mark(tether).padEnd(10)} ${note}`);
  if (note === 'UNEXPECTED' || (!node.ok && process.env.NODE_COMPAT_VERBOSE)) {
    console.log(tether.out.split('\n').slice(0, 30).map((l) => `    ${l}`).join('\n'));
  }
}
console.log(`Node's child_process tests: ${passing} of ${applicable} that pass on Node ${process.version} pass on process-tether (${results.length} vendored)`);
if (failed) process.exit(1);
