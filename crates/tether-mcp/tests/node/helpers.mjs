// Shared helpers: a server under the official TypeScript SDK client, tool calls,
// and the process table by the unique tag each test gives the server (never by
// process name). The server command comes from TETHER_MCP_CMD, which
// crates/tether-cli/tests/mcp_typescript_client.rs sets.
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import assert from 'node:assert/strict';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

export const TAG_VAR = 'TETHER_TEST_TAG';
export const BOUND_MS = 30_000;

export function newTag(name) {
  return `ts-${name}-${process.pid}-${randomBytes(4).toString('hex')}`;
}

// Each test's servers keep their state (the ledger) in a directory of the
// test's own, under this one, removed when the run ends. Without it they
// would record into the machine's shared ~/.local/state/tether, where other
// builds leave their ledgers (one at a newer schema makes the server warn;
// `tether ps` and `reap` there see every build's sessions).
const homes = mkdtempSync(join(tmpdir(), 'tether-ts-homes.'));
process.on('exit', () => rmSync(homes, { recursive: true, force: true }));

/** The private TETHER_HOME of the test carrying `tag` (mode 0700, as the ledger requires). */
export function tetherHome(tag) {
  const home = join(homes, tag);
  mkdirSync(home, { recursive: true, mode: 0o700 });
  return home;
}

/** A connected client to a fresh server whose environment carries `tag`. */
export async function connect(tag, { args = [], env = {} } = {}) {
  const command = process.env.TETHER_MCP_CMD;
  assert.ok(command, 'TETHER_MCP_CMD is not set (run through cargo test -p process-tether-cli --test mcp_typescript_client)');
  const serverEnv = {
    [TAG_VAR]: tag,
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/tmp',
    TETHER_HOME: tetherHome(tag),
    TETHER_LOG: 'warn,rmcp=error',
    ...env,
  };
  for (const name of ['TETHER_KEEPER', 'XDG_RUNTIME_DIR']) {
    if (process.env[name]) serverEnv[name] = process.env[name];
  }
  const transport = new StdioClientTransport({ command, args, env: serverEnv, stderr: 'inherit' });
  const client = new Client({ name: 'tether-ts-tests', version: '1.0.0' });
  await client.connect(transport);
  assert.equal(client.getServerVersion().name, 'tether');
  // The SDK validates results against each tool's outputSchema once listed.
  await client.listTools();
  return client;
}

/** Calls a tool; returns its structured result, checking isError and the text. */
export async function call(client, name, args, { error = false, ...options } = {}) {
  const result = await client.callTool({ name, arguments: args }, undefined, options);
  assert.equal(result.content.length, 1);
  assert.equal(result.content[0].type, 'text');
  const text = result.content[0].text;
  assert.ok(!text.trimStart().startsWith('{'), `text content is a JSON copy: ${text}`);
  assert.equal(Boolean(result.isError), error, JSON.stringify(result.structuredContent));
  return result.structuredContent;
}

/** Live (not zombie) processes whose environment carries TETHER_TEST_TAG=tag. */
export function taggedPids(tag) {
  const needle = `${TAG_VAR}=${tag}`;
  const found = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const environ = readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0');
      if (!environ.includes(needle)) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      if (state !== 'Z' && state !== 'X') found.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls (every 10 ms: a process's death raises no event node can wait on
 * without pidfds) until no process carries `tag`; returns the survivors. */
export async function waitAllDead(tag, boundMs = BOUND_MS) {
  const deadline = Date.now() + boundMs;
  for (;;) {
    const alive = taggedPids(tag);
    if (alive.length === 0 || Date.now() >= deadline) return alive;
    await sleep(10);
  }
}

/** Polls until at least `n` processes carry `tag` (fixture built). */
export async function waitForCount(tag, n, boundMs = BOUND_MS) {
  const deadline = Date.now() + boundMs;
  for (;;) {
    const count = taggedPids(tag).length;
    if (count >= n || Date.now() >= deadline) return count;
    await sleep(10);
  }
}

/** SIGKILLs what still carries `tag` (clean-up after a failed test). */
export async function killTagged(tag) {
  for (const pid of taggedPids(tag)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  await waitAllDead(tag, 5_000);
}
