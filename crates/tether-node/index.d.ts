// Types of process-tether (hand-written: the JavaScript API over the addon).
/// <reference types="node" />
import { EventEmitter } from 'node:events';
import { Readable, Writable } from 'node:stream';
import type { SpawnOptions as NodeSpawnOptions, ExecFileOptions, ExecOptions } from 'node:child_process';

/** What containment adds to Node's options. */
export interface TetherOptions {
  /** Milliseconds the kill ladder waits after SIGTERM before SIGKILL (default 2000). */
  grace?: number;
  /** The spawn tag's purpose (default 'run'): shown by `tether ps`. */
  purpose?: string;
  /** Memory limit: bytes, or a size such as '512M'. */
  memory?: number | string;
  /** Process-count limit. */
  pids?: number;
  /** CPU limit in cores. */
  cpu?: number;
  /** Refuse to start unless every limit is enforced. */
  requireLimits?: boolean;
}

export interface Limit { value: number; enforced: string; reason?: string }
export interface LimitReport { memory?: Limit; pids?: Limit; cpu?: Limit; cgroup?: string }

export type SpawnOptions = Omit<NodeSpawnOptions, 'stdio'> & TetherOptions & {
  stdio?: 'pipe' | 'overlapped' | 'inherit' | 'ignore' |
    Array<'pipe' | 'overlapped' | 'inherit' | 'ignore' | number | { fd: number } | null | undefined>;
};

export class ChildProcess extends EventEmitter {
  readonly pid: number | undefined;
  readonly stdin: Writable | null;
  readonly stdout: Readable | null;
  readonly stderr: Readable | null;
  readonly stdio: [Writable | null, Readable | null, Readable | null];
  readonly exitCode: number | null;
  readonly signalCode: NodeJS.Signals | null;
  readonly killed: boolean;
  readonly connected: false;
  readonly spawnfile: string;
  readonly spawnargs: string[];
  /** How the tree is held: 'subreaper', 'pidns', … */
  readonly containment?: string;
  /** The session id in the spawn tag every process of the tree carries. */
  readonly sessionId?: string;
  /** Descendants killed on the way to an empty tree (known at 'exit'). */
  readonly descendantsKilled: number;
  /** Killed because its `timeout` passed (known at 'exit'). */
  readonly timedOut: boolean;
  /** 'memory' or 'pids' when the tree ran into that limit. */
  readonly limitHit: 'memory' | 'pids' | null;
  readonly limits: LimitReport | null;
  /** Signals the whole tree; SIGTERM (default) climbs the kill ladder. */
  kill(signal?: NodeJS.Signals | number): boolean;
  ref(): void;
  unref(): void;
  on(event: 'spawn', listener: () => void): this;
  on(event: 'exit', listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
  on(event: 'close', listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
  on(event: 'error', listener: (err: NodeJS.ErrnoException) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
}

export function spawn(command: string, options?: SpawnOptions): ChildProcess;
export function spawn(command: string, args?: readonly string[], options?: SpawnOptions): ChildProcess;

export type ExecCallback<T = string | Buffer> = (error: ExecException | null, stdout: T, stderr: T) => void;
export interface ExecException extends Error {
  code?: number | string;
  killed?: boolean;
  signal?: NodeJS.Signals | null;
  cmd?: string;
  stdout?: string | Buffer;
  stderr?: string | Buffer;
}

export function execFile(file: string, callback?: ExecCallback): ChildProcess;
export function execFile(file: string, args: readonly string[] | null | undefined, callback?: ExecCallback): ChildProcess;
export function execFile(file: string, args: readonly string[] | null | undefined, options: (ExecFileOptions & TetherOptions & { encoding?: BufferEncoding | 'buffer' | null }) | null | undefined, callback?: ExecCallback): ChildProcess;
export function execFile(file: string, options: (ExecFileOptions & TetherOptions & { encoding?: BufferEncoding | 'buffer' | null }) | null | undefined, callback?: ExecCallback): ChildProcess;
export namespace execFile {
  function __promisify__(file: string, args?: readonly string[] | null, options?: ExecFileOptions & TetherOptions & { encoding?: BufferEncoding | 'buffer' | null }): Promise<{ stdout: string | Buffer; stderr: string | Buffer }> & { child: ChildProcess };
}

export function exec(command: string, callback?: ExecCallback): ChildProcess;
export function exec(command: string, options: (ExecOptions & TetherOptions & { encoding?: BufferEncoding | 'buffer' | null }) | null | undefined, callback?: ExecCallback): ChildProcess;
export namespace exec {
  function __promisify__(command: string, options?: ExecOptions & TetherOptions & { encoding?: BufferEncoding | 'buffer' | null }): Promise<{ stdout: string | Buffer; stderr: string | Buffer }> & { child: ChildProcess };
}

export interface RunOptions extends TetherOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  shell?: boolean | string;
  /** Milliseconds; the tree is killed (ladder) and `timedOut` is true. */
  timeout?: number;
  /** Written to stdin, which is then closed (stdin is the null device without it). */
  input?: string | Buffer;
  /** 'utf8' (default) or 'buffer'. */
  encoding?: BufferEncoding | 'buffer';
  /** Most bytes of stdout plus stderr (default unlimited); past it the tree is killed and the promise rejects. */
  maxBuffer?: number;
  signal?: AbortSignal;
  /** As spawn's (the timeout's signal, the user and group, argv[0], a session of its own). */
  killSignal?: NodeJS.Signals | number;
  uid?: number;
  gid?: number;
  argv0?: string;
  detached?: boolean;
}

export interface RunResult<T = string> {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: T;
  stderr: T;
  descendantsKilled: number;
  timedOut: boolean;
  limitHit: 'memory' | 'pids' | null;
  limits: LimitReport | null;
  pid: number;
}

export function run(command: string, args?: readonly string[], options?: RunOptions & { encoding?: BufferEncoding }): Promise<RunResult<string>>;
export function run(command: string, args: readonly string[], options: RunOptions & { encoding: 'buffer' }): Promise<RunResult<Buffer>>;
export function run(command: string, options?: RunOptions): Promise<RunResult<string | Buffer>>;

export interface SessionOptions extends TetherOptions {
  cwd?: string;
  /** Set over the inherited environment (or over none with envClear). */
  env?: Record<string, string | undefined>;
  envClear?: boolean;
  /** A pipe to stdin (write()); the null device otherwise. */
  stdin?: boolean;
  separateStderr?: boolean;
  /** A terminal of [rows, cols]. */
  pty?: [number, number];
  timeout?: number;
  idleTimeout?: number;
  maxMemory?: number;
  spillCap?: number;
}

export interface Chunk { data: Buffer; offset: number; nextOffset: number; dropped: number; endOffset: number; eof: boolean }

export interface SessionInfo {
  id: string;
  command: string;
  state: string;
  code?: number;
  signal?: number;
  timedOut: boolean;
  killReason?: string;
  pid: number;
  containment: string;
  descendants: Array<{ pid: number; command: string }>;
  descendantsKilled: number;
  outputBytes: number;
  stderrBytes?: number;
  outputEof: boolean;
  stdinOpen: boolean;
  settled: boolean;
  startedAt: number;
  exitedAt?: number;
  purpose: string;
  pty?: [number, number];
  limits: LimitReport;
  limitHit?: string;
}

export interface Waited { outcome: 'exited' | 'matched' | 'quiet' | 'running'; span?: [number, number]; info: SessionInfo }
export interface Killed { state: string; alreadyExited: boolean; descendantsKilled: number }
export interface ScreenView {
  rows: number; cols: number; lines: string[]; cursorRow: number; cursorCol: number;
  cursorHidden: boolean; alternateScreen: boolean; text: string;
}

export class Session {
  readonly id: string;
  read(options?: { offset?: number; maxBytes?: number; stderr?: boolean }): Chunk;
  write(data: string | Buffer): Promise<void>;
  closeStdin(): void;
  keys(...names: Array<string | string[]>): Promise<void>;
  wait(options?: { until?: string | RegExp; timeoutMs?: number; offset?: number; stderr?: boolean; settled?: boolean; throughExit?: boolean }): Promise<Waited>;
  kill(options?: { grace?: number }): Promise<Killed>;
  info(): SessionInfo;
  screen(): ScreenView;
  resize(rows: number, cols: number): void;
}

export function startSession(command: readonly string[] | string, options?: SessionOptions): Promise<Session>;
export function listSessions(): SessionInfo[];
export function session(id: string): Session;

export const tetherPath: string;
export const keeperPath: string;
export function setWarmKeepers(n: number): void;
export const version: string;
