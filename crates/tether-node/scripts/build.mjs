// `npm run build`: the addon (napi build; in the dev profile a plain cargo
// build, below), then the `tether` executable and its small keeper copied
// into bin/. The profile is $TETHER_NODE_PROFILE
// (default `release`: fat LTO, ~6 min of CPU for both binaries here; CI
// uses `dev`, whose dependencies `cargo test` already built). The target
// dir is $CARGO_TARGET_DIR, else the workspace's target/.
import { execFileSync } from 'node:child_process';
import { copyFileSync, chmodSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const root = path.resolve(here, '../..');
const profile = process.env.TETHER_NODE_PROFILE || 'release';
const targetDir = process.env.CARGO_TARGET_DIR || path.join(root, 'target');
const run = (cmd, args, opts = {}) => execFileSync(cmd, args, { stdio: 'inherit', cwd: here, ...opts });

for (const f of readdirSync(here)) if (f.endsWith('.node')) rmSync(path.join(here, f));
const cargoEnv = { ...process.env, CARGO_TARGET_DIR: targetDir };
if (profile === 'dev') {
  // napi build always passes --target, which gives the addon a target dir
  // of its own (target/<triple>/): in CI that compiled its ~120
  // dependencies again beside the ones `cargo test` had just built. The
  // dev build (CI's) is a plain cargo build of the cdylib, copied to the
  // name napi gives it; releases and other platforms go through napi.
  run('cargo', ['build', '-p', 'process-tether-node'], { cwd: root, env: cargoEnv });
  const lib = { linux: 'libtether_node.so', darwin: 'libtether_node.dylib', win32: 'tether_node.dll' }[process.platform];
  const suffix = { linux: `linux-${process.arch}-gnu`, darwin: `darwin-${process.arch}`, win32: `win32-${process.arch}-msvc` }[process.platform];
  copyFileSync(path.join(targetDir, 'debug', lib), path.join(here, `process-tether.${suffix}.node`));
} else {
  run(process.execPath, [
    path.join(here, 'node_modules/@napi-rs/cli/dist/cli.js'), 'build',
    '--platform', '--no-js', '--no-dts-header', '--dts', 'native.d.ts',
    '--manifest-path', 'Cargo.toml', '--package-json-path', 'package.json',
    '--output-dir', '.', '--target-dir', targetDir,
    ...(profile === 'release' ? ['--release'] : ['--profile', profile]),
  ]);
}
run('cargo', ['build', '--profile', profile, '-p', 'process-tether-cli', '--bin', 'tether',
  '-p', 'process-tether', '--bin', 'tether-keeper'], { cwd: root, env: cargoEnv });
// A debug build carries line tables (19 MB of the addon's 20 MB, 43 MB
// for tether): not in a package.
const stripDebug = (file) => {
  if (profile === 'dev' && process.platform === 'linux') {
    try { run('strip', ['--strip-debug', file]); } catch { /* no binutils: shipped as built */ }
  }
};
for (const f of readdirSync(here)) if (f.endsWith('.node')) stripDebug(path.join(here, f));
const dir = path.join(targetDir, profile === 'dev' ? 'debug' : profile);
const exe = process.platform === 'win32' ? '.exe' : '';
mkdirSync(path.join(here, 'bin'), { recursive: true });
for (const name of ['tether', 'tether-keeper']) {
  const to = path.join(here, 'bin', name + exe);
  rmSync(to, { force: true });
  copyFileSync(path.join(dir, name + exe), to);
  chmodSync(to, 0o755);
  stripDebug(to);
}
