// Type-checks index.d.ts against the ways the package is used (npm run
// typecheck; nothing here runs).
import { promisify } from 'node:util';
import {
  spawn, execFile, exec, run, startSession, listSessions, session, ChildProcess, tetherPath,
  type RunResult, type Waited,
} from 'process-tether';

async function usage(): Promise<void> {
  const child: ChildProcess = spawn('sh', ['-c', 'echo hi'], { stdio: ['ignore', 'pipe', 'inherit'], grace: 500, memory: '512M' });
  child.stdout?.on('data', (d: Buffer) => d.length);
  child.on('exit', (code: number | null, signal: NodeJS.Signals | null) => [code, signal]);
  child.on('close', () => child.descendantsKilled + (child.timedOut ? 1 : 0));
  child.on('error', (err: NodeJS.ErrnoException) => err.code);
  const killed: boolean = child.kill('SIGKILL');
  child.unref();
  const limits = child.limits?.memory?.enforced;

  execFile('ls', ['-l'], (err, stdout, stderr) => [err?.code, stdout, stderr]);
  exec('echo $HOME', { cwd: '/tmp' }, (err) => err?.killed);
  const { stdout } = await promisify(execFile)('git', ['status']);

  const done: RunResult<string> = await run('make', ['test'], { timeout: 600_000, input: 'x', pids: 100 });
  const bytes = await run('cat', [], { encoding: 'buffer' });
  const buffer: Buffer = bytes.stdout;

  const s = await startSession(['python3', '-q'], { pty: [24, 80], stdin: true });
  const waited: Waited = await s.wait({ until: />>> /, timeoutMs: 5000 });
  await s.write('1+1\n');
  await s.keys('C-d');
  const text: string = s.screen().text;
  const info = s.info();
  await s.kill({ grace: 100 });
  listSessions().map((i) => i.id);
  session(info.id).read({ offset: 0 }).data.length;
  void [killed, limits, stdout, done.code, buffer, waited.outcome, text, tetherPath];
}
void usage;
