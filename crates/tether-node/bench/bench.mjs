// process-tether against node:child_process, interleaved in one run (A, B,
// A, B, …, so drift and load hit both alike); medians and their ratio.
//
//   node bench/bench.mjs            # from crates/tether-node, after npm run build
//
// 1. spawn('/bin/true') to 'exit' (warm keepers on: the default);
// 2. execFile of 10 MB of output (`head -c 10485760 /dev/zero`);
// 3. the addon's load time: require('process-tether') in a fresh node,
//    against require('node:child_process');
// 4. `npx process-tether mcp` to its first tools/list answer, against the
//    bundled `tether mcp` started directly.
import { spawn as nodeSpawn, execFile as nodeExecFile } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const here = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const tether = require(here);

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
};
const ms = (ns) => Number(ns) / 1e6;

async function interleave(name, n, a, b) {
  const ta = [];
  const tb = [];
  for (let i = 0; i < n; i++) {
    ta.push(await a());
    tb.push(await b());
  }
  const [ma, mb] = [median(ta), median(tb)];
  console.log(`| ${name} | ${ma.toFixed(3)} ms | ${mb.toFixed(3)} ms | ${(ma / mb).toFixed(2)}× | ${n} |`);
  return { ma, mb };
}

function timeSpawn(spawn) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const child = spawn('/bin/true', [], { stdio: 'ignore' });
    child.on('error', reject);
    child.on('exit', () => resolve(ms(process.hrtime.bigint() - t0)));
  });
}

function timeExecFile(execFile) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    execFile('head', ['-c', String(10 * 1024 * 1024), '/dev/zero'], { encoding: 'buffer', maxBuffer: 64 << 20 },
      (err, stdout) => {
        if (err) return reject(err);
        if (stdout.length !== 10 * 1024 * 1024) return reject(new Error(`got ${stdout.length} bytes`));
        resolve(ms(process.hrtime.bigint() - t0));
      });
  });
}

function timeLoad(module) {
  // The require alone, timed inside a fresh node (its own start excluded).
  const code = `const t0 = process.hrtime.bigint(); require(${JSON.stringify(module)}); ` +
    'console.log(Number(process.hrtime.bigint() - t0) / 1e6)';
  return new Promise((resolve, reject) => {
    nodeExecFile(process.execPath, ['-e', code], (err, stdout) => (err ? reject(err) : resolve(Number(stdout))));
  });
}

function timeMcp(argv, cwd) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const server = nodeSpawn(argv[0], argv.slice(1), { cwd, stdio: ['pipe', 'pipe', 'ignore'] });
    let buffered = '';
    server.stdout.on('data', (d) => {
      buffered += d;
      for (const line of buffered.split('\n')) {
        if (line.includes('"id":2') && line.includes('"tools"')) {
          const took = ms(process.hrtime.bigint() - t0);
          server.stdin.end();
          server.on('exit', () => resolve(took));
          buffered = '';
          return;
        }
      }
    });
    server.on('error', reject);
    const send = (m) => server.stdin.write(`${JSON.stringify(m)}\n`);
    send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench', version: '0' } } });
    send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    send({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
  });
}

console.log(`node ${process.version}, process-tether ${tether.version}`);
console.log('| what (A vs B) | A: process-tether | B: baseline | A ÷ B | runs each |');
console.log('|---|---|---|---|---|');
// Warm both up (the first spawn starts a keeper; page cache). The
// baseline of each line: node:child_process, except the last two, whose
// baseline is the bundled `tether mcp` started directly.
for (let i = 0; i < 20; i++) {
  await timeSpawn(tether.spawn);
  await timeSpawn(nodeSpawn);
}
const n = Number(process.env.BENCH_N || 300);
await interleave("spawn('/bin/true') to 'exit'", n, () => timeSpawn(tether.spawn), () => timeSpawn(nodeSpawn));
await interleave('execFile, 10 MB of output', 20, () => timeExecFile(tether.execFile), () => timeExecFile(nodeExecFile));
await interleave("require('process-tether') vs require('node:child_process')", 20,
  () => timeLoad(here), () => timeLoad('node:child_process'));
const npx = ['npx', '--no-install', 'process-tether', 'mcp'];
const launcher = [process.execPath, path.join(here, 'bin/process-tether.js'), 'mcp'];
const direct = [tether.tetherPath, 'mcp'];
await interleave('npx process-tether mcp vs tether mcp: first tools/list', 10,
  () => timeMcp(npx, here), () => timeMcp(direct, here));
await interleave('node bin/process-tether.js mcp vs tether mcp', 10,
  () => timeMcp(launcher, here), () => timeMcp(direct, here));
