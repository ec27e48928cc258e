// `npx process-tether mcp`: the MCP server the package carries, started
// the way MCP clients start servers, answers tools/list; it goes when its
// stdin ends.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const project = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

test('npx process-tether mcp answers initialize and tools/list, and exits at stdin EOF', async () => {
  const server = spawn('npx', ['--no-install', 'process-tether', 'mcp'], {
    cwd: project,
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const replies = new Map();
  let buffered = '';
  const waiters = new Map();
  server.stdout.on('data', (d) => {
    buffered += d;
    let nl;
    while ((nl = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      if (!line.trim()) continue;
      const message = JSON.parse(line);
      if (message.id !== undefined) {
        replies.set(message.id, message);
        const waiter = waiters.get(message.id);
        if (waiter) waiter(message);
      }
    }
  });
  const send = (message) => server.stdin.write(`${JSON.stringify(message)}\n`);
  const reply = (id) => replies.has(id) ? Promise.resolve(replies.get(id)) : new Promise((r) => waiters.set(id, r));
  send({
    jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'node-test', version: '0' } },
  });
  const init = await reply(1);
  assert.ok(init.result, JSON.stringify(init));
  send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  send({ jsonrpc: '2.0', id: 2, method: 'tools/list' });
  const list = await reply(2);
  const names = list.result.tools.map((t) => t.name);
  for (const tool of ['run', 'read', 'write', 'wait', 'kill', 'list']) assert.ok(names.includes(tool), names.join(','));
  server.stdin.end();
  const [code] = await new Promise((r) => server.on('exit', (c, s) => r([c, s])));
  assert.equal(code, 0);
});
