// Sessions from Node: pipes and PTY, reads from offsets, writes, keys,
// waits for a pattern or the exit, verified kill, list, screen.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startSession, listSessions, session } from 'process-tether';
import { cleanup, taggedPids, uniqueTag, TAG_VAR } from './helpers.mjs';

test('a piped session: write, wait for a pattern, read from an offset, exit', async () => {
  const tag = uniqueTag('session');
  try {
    const s = await startSession(['sh', '-c', 'echo ready; read name; echo "hello $name"'], {
      stdin: true, env: { [TAG_VAR]: tag },
    });
    const ready = await s.wait({ until: 'ready', timeoutMs: 10000 });
    assert.equal(ready.outcome, 'matched');
    const offset = ready.span[1];
    await s.write('node\n');
    const done = await s.wait({ timeoutMs: 10000 });
    assert.equal(done.outcome, 'exited');
    assert.equal(done.info.code, 0);
    assert.equal(String(s.read().data), 'ready\nhello node\n');
    assert.equal(String(s.read({ offset: offset + 1 }).data), 'hello node\n');
    assert.ok(listSessions().some((i) => i.id === s.id));
    assert.equal(session(s.id).info().state, 'exited');
  } finally {
    cleanup(tag);
  }
});

test('a PTY session: prompt, keys, screen, verified kill of its tree', async () => {
  const tag = uniqueTag('pty');
  try {
    const s = await startSession(['sh', '-c', 'printf "name? "; read n; echo "hi $n"; setsid sleep 1000 & exec sleep 1000'], {
      pty: [24, 80], env: { [TAG_VAR]: tag },
    });
    await s.wait({ until: 'name\\? ', timeoutMs: 10000 });
    await s.write('bob');
    await s.keys('Enter');
    await s.wait({ until: /hi bob/, timeoutMs: 10000 });
    const screen = s.screen();
    assert.equal(screen.rows, 24);
    assert.equal(screen.cols, 80);
    assert.match(screen.text, /name\? bob\r?\nhi bob/);
    assert.equal(s.info().pty[0], 24);
    const killed = await s.kill({ grace: 200 });
    assert.equal(killed.state, 'killed');
    assert.equal(killed.alreadyExited, false);
    assert.ok(killed.descendantsKilled >= 1);
    assert.deepEqual(taggedPids(tag), []);
  } finally {
    cleanup(tag);
  }
});

test('a session that times out is killed and says so; unknown ids are errors', async () => {
  const s = await startSession('sleep 1000', { timeout: 200, grace: 100 });
  const w = await s.wait({ timeoutMs: 10000, settled: true });
  assert.equal(w.info.timedOut, true);
  assert.equal(w.info.killReason, 'timeout');
  assert.throws(() => session('nosuchsession').info(), { code: 'ETETHER_NO_SESSION' });
  await assert.rejects(startSession(['no-such-program-for-tether']), { code: 'ENOENT' });
});
