// `tether mcp` driven by the official TypeScript MCP SDK client
// (@modelcontextprotocol/sdk), as agents built on it run it: the workflows of
// issue 12, each in the form this client meets it (its 60 s default request
// timeout, AbortSignal cancellation, output-schema validation).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { BOUND_MS, call, connect, killTagged, newTag, taggedPids, waitAllDead, waitForCount } from './helpers.mjs';

const tags = [];
function tagFor(name) {
  const tag = newTag(name);
  tags.push(tag);
  return tag;
}
after(async () => {
  for (const tag of tags) await killTagged(tag);
});

const READY_LINE = 'Serving HTTP on \\S+ port \\d+';

test('tools declare output schemas and annotations; results validate and lead with status', async () => {
  const tag = tagFor('schemas');
  const client = await connect(tag);
  try {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), ['kill', 'list', 'read', 'run', 'screen', 'wait', 'write']);
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    for (const tool of tools) assert.equal(tool.outputSchema?.type, 'object', tool.name);
    assert.equal(byName.read.annotations.readOnlyHint, true);
    assert.equal(byName.wait.annotations.readOnlyHint, true);
    assert.equal(byName.kill.annotations.destructiveHint, true);
    assert.equal(byName.run.annotations.readOnlyHint, false);
    // callTool validates structuredContent against outputSchema (it throws if not).
    const body = await call(client, 'run', { command: 'echo hi; exit 3' });
    assert.deepEqual(Object.keys(body).slice(0, 3), ['status', 'exit_code', 'output']);
    assert.equal(body.exit_code, 3);
    assert.equal(body.output, 'hi\n');
    const listed = await call(client, 'list', {});
    assert.equal(listed.sessions.length, 1);
  } finally {
    await client.close();
  }
  assert.deepEqual(await waitAllDead(tag), []);
});

test('readiness: run until, and wait until after a yield', async () => {
  const tag = tagFor('ready');
  const client = await connect(tag);
  try {
    let body = await call(client, 'run', { command: 'exec python3 -u -m http.server 0', until: READY_LINE, yield_s: 50 });
    assert.equal(body.status, 'running');
    assert.equal(body.matched, true);
    body = await call(client, 'run', { command: 'exec python3 -u -m http.server 0', yield_s: 0.5 });
    const waited = await call(client, 'wait', { id: body.id, until: READY_LINE, timeout_s: 10 });
    assert.equal(waited.matched, true, JSON.stringify(waited));
    body = await call(client, 'run', { command: '(sleep 1; echo READY) & echo started', yield_s: 0 });
    const later = await call(client, 'wait', { id: body.id, until: '^READY$', timeout_s: 30 });
    assert.equal(later.matched, true, JSON.stringify(later));
  } finally {
    await client.close();
  }
});

test('a python3 -i turn returns when the answer is in, not at the yield', async () => {
  const tag = tagFor('repl');
  const client = await connect(tag);
  try {
    const body = await call(client, 'run', { command: 'python3 -i -q', keep_stdin_open: true, yield_s: 30 });
    assert.equal(body.quiet, true);
    const started = Date.now();
    const turn = await call(client, 'write', { id: body.id, data: '1+1', submit: true, yield_s: 30 });
    assert.ok(Date.now() - started < 10_000, `took ${Date.now() - started} ms`);
    assert.ok(turn.output.startsWith('2\n'), JSON.stringify(turn));
  } finally {
    await client.close();
  }
});

test('progress keeps a call alive past the client request timeout', async () => {
  const tag = tagFor('progress');
  const client = await connect(tag);
  try {
    const body = await call(client, 'run', { command: 'exec sleep 1000', yield_s: 0 });
    const reports = [];
    // A 2 s request timeout, reset by every progress report: a 5 s wait succeeds.
    const waited = await call(
      client,
      'wait',
      { id: body.id, timeout_s: 5 },
      { timeout: 2_000, resetTimeoutOnProgress: true, onprogress: (p) => reports.push(p) },
    );
    assert.equal(waited.status, 'running');
    assert.ok(reports.length >= 3, JSON.stringify(reports));
    assert.ok(reports.every((r) => r.total === 5));
    assert.match(reports.at(-1).message, /bytes, \d+ lines/);
  } finally {
    await client.close();
  }
});

test('an aborted run (notifications/cancelled) leaves no process', async () => {
  const tag = tagFor('cancel');
  const sessionTag = `${tag}-tree`;
  const client = await connect(tag);
  try {
    const controller = new AbortController();
    const running = client.callTool(
      {
        name: 'run',
        arguments: {
          command: 'setsid sleep 1000 & nohup sleep 1000 >/dev/null 2>&1 & exec sleep 1000',
          env: { TETHER_TEST_TAG: sessionTag },
          yield_s: 50,
        },
      },
      undefined,
      { signal: controller.signal, timeout: 120_000 },
    );
    assert.ok((await waitForCount(sessionTag, 3)) >= 3);
    controller.abort('the user pressed stop');
    await assert.rejects(running);
    assert.deepEqual(await waitAllDead(sessionTag), []);
    // The processes are dead; the session's completion is published a
    // moment later (after its output is drained): `wait` returns with it.
    const listed = await call(client, 'list', {});
    assert.equal(listed.sessions.length, 1, JSON.stringify(listed));
    const ended = await call(client, 'wait', { id: listed.sessions[0].id, timeout_s: 10 });
    assert.equal(ended.status, 'killed', JSON.stringify(ended));
  } finally {
    await client.close();
  }
});

test('reads stay within the budget; grep finds lines among a million', async () => {
  const tag = tagFor('read');
  const client = await connect(tag);
  try {
    const body = await call(client, 'run', { command: 'seq 1 1000000' });
    const page = await call(client, 'read', { id: body.id, offset: 0, max_bytes: 1048576 });
    assert.ok(Buffer.byteLength(page.output) <= 16384);
    const found = await call(client, 'read', { id: body.id, grep: '^99999[0-9]$' });
    assert.equal(found.match_count, 10);
    assert.deepEqual(found.matches.map((m) => m.line), Array.from({ length: 10 }, (_, i) => 999990 + i));
    const tail = await call(client, 'read', { id: body.id, tail_lines: 1 });
    assert.equal(tail.output, '1000000\n');
  } finally {
    await client.close();
  }
});

test('credentials are removed by pattern; git commit without -m fails fast', async () => {
  const tag = tagFor('env');
  const repo = mkdtempSync(join(tmpdir(), 'tether-ts-git-'));
  execFileSync('git', ['init', '-q', repo]);
  const client = await connect(tag, {
    env: { GITHUB_TOKEN: 'x', AWS_SECRET_ACCESS_KEY: 'y', MY_DB_PASSWORD: 'z', KEEP_ME: 'ok' },
  });
  try {
    const env = await call(client, 'run', { command: 'env' });
    const names = new Set(env.output.split('\n').map((l) => l.split('=')[0]));
    for (const secret of ['GITHUB_TOKEN', 'AWS_SECRET_ACCESS_KEY', 'MY_DB_PASSWORD']) {
      assert.ok(!names.has(secret), secret);
    }
    assert.ok(names.has('KEEP_ME'));
    const commit = await call(client, 'run', {
      command: 'git -c user.name=t -c user.email=t@example.invalid commit --allow-empty',
      cwd: repo,
      yield_s: 50,
    });
    assert.equal(commit.status, 'exited');
    assert.notEqual(commit.exit_code, 0);
    assert.match(commit.hint, /-m/);
  } finally {
    await client.close();
    rmSync(repo, { recursive: true, force: true });
  }
  assert.deepEqual(taggedPids(tag), []);
});

const failedStart = (result) => result.structuredContent.status === 'failed_start';

// Issue 16 (item 9): the SDK validates error results against the output schema
// too; every one of these threw "-32602 Structured content does not match the
// tool's output schema" instead of returning tether's message.
test('every error result reaches the client with its message', async () => {
  const tag = tagFor('errors');
  const client = await connect(tag);
  const missing = mkdtempSync(join(tmpdir(), 'tether-ts-gone-'));
  rmSync(missing, { recursive: true, force: true });
  try {
    const sid = (await call(client, 'run', { command: 'exec sleep 1000', yield_s: 0 })).id;
    const done = (await call(client, 'run', { command: 'echo done' })).id;
    const cases = [
      ['run', {}, '`command` is required'],
      ['run', { command: '  ' }, 'is empty'],
      ['run', { command: 'ls', cwd: missing }, 'failed to start'],
      ['run', { argv: ['/no/such/program'] }, 'failed to start'],
      ['run', { command: 'ls', bogus: 1 }, 'unknown argument `bogus`'],
      ['run', { command: 'ls', yield_s: 51 }, 'one call waits at most 50 s'],
      ['read', { id: 'nosuchsession' }, 'no session "nosuchsession"'],
      ['read', { id: sid, grep: '(unclosed' }, 'not a valid regex'],
      ['read', { id: sid, stream: 'stderr' }, 'merges stderr'],
      ['read', { id: sid, offset: 1e9 }, 'past the end'],
      ['read', { id: sid, first_line: 3 }, 'give it with grep and offset'],
      ['write', { id: sid, data: 'x' }, 'takes no input'],
      ['write', { id: done, data: 'x' }, 'exited'],
      ['write', { id: sid }, '`data` is required'],
      ['wait', { id: 'nosuchsession', timeout_s: 1 }, 'no session'],
      ['wait', { id: sid }, '`timeout_s` is required'],
      ['wait', { id: sid, timeout_s: 1, until: '(unclosed' }, 'not a valid regex'],
      ['kill', { id: 'nosuchsession' }, 'no session'],
      ['kill', { id: sid, grace_s: 31 }, 'from 0 to 30'],
      ['list', { all: true }, 'unknown argument `all`'],
      ['screen', { id: sid }, 'no screen'],
    ];
    for (const [tool, args, expected] of cases) {
      const result = await client.callTool({ name: tool, arguments: args });
      assert.equal(result.isError, true, `${tool} ${JSON.stringify(args)}: ${JSON.stringify(result)}`);
      assert.ok(result.content[0].text.includes(expected), `${tool}: ${result.content[0].text}`);
      // The structured result holds the message too (the text may add a hint).
      assert.ok(result.structuredContent.error.length > 0, JSON.stringify(result));
      assert.ok(result.content[0].text.startsWith(result.structuredContent.error) || failedStart(result), JSON.stringify(result));
    }
    const failed = await call(client, 'run', { argv: ['/no/such/program'] }, { error: true });
    assert.equal(failed.status, 'failed_start');
    assert.ok(failed.error && failed.cwd && failed.hint, JSON.stringify(failed));
  } finally {
    await client.close();
  }
});

test('closing the client kills everything the server started', async () => {
  const tag = tagFor('close');
  const client = await connect(tag);
  await call(client, 'run', { command: 'setsid sleep 1000 & echo ready; exec sleep 1000', until: 'ready', yield_s: 30 });
  assert.ok((await waitForCount(tag, 3)) >= 3);
  await client.close();
  assert.deepEqual(await waitAllDead(tag, BOUND_MS), []);
});
