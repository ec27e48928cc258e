'use strict';
// Loads the addon and points it at the `tether` executable the package
// carries (its keeper and its CLI). napi-rs's layout: the addon is
// `process-tether.<platform>.node` in this package (built from source, or
// the package for this platform when published: process-tether-<platform>).
const path = require('node:path');
const fs = require('node:fs');

const root = path.join(__dirname, '..');

function platformSuffix() {
  const { platform, arch } = process;
  if (platform === 'linux') {
    // glibc or musl: what the running node was built against.
    const report = process.report && process.report.getReport && process.report.getReport();
    const glibc = report && report.header && report.header.glibcVersionRuntime;
    return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`;
  }
  if (platform === 'win32') return `win32-${arch}-msvc`;
  return `${platform}-${arch}`;
}

function load() {
  // A package built here holds one addon for this platform: load it
  // without asking which libc runs (process.report costs ~15 ms).
  const prefix = `process-tether.${process.platform}-${process.arch}`;
  const local = fs.readdirSync(root).filter((f) => f.startsWith(prefix) && f.endsWith('.node'));
  if (local.length === 1) return require(path.join(root, local[0]));
  const suffix = platformSuffix();
  const named = path.join(root, `process-tether.${suffix}.node`);
  if (fs.existsSync(named)) return require(named);
  try {
    return require(`process-tether-${suffix}`);
  } catch (e) {
    const err = new Error(
      `process-tether: no native addon for ${suffix} (looked for ${named} and the package ` +
        `process-tether-${suffix}); see docs/node.md, "Other platforms"`,
    );
    err.code = 'ERR_DLOPEN_FAILED';
    err.cause = e;
    throw err;
  }
}

const native = load();

// The executables beside the addon: `tether` (the CLI, `npx process-tether`)
// and the small `tether-keeper` every command's keeper runs (a smaller
// program to exec on each spawn; tether itself serves as one too).
const exe = process.platform === 'win32' ? '.exe' : '';
const bin = path.join(root, 'bin');
const tetherPath = path.join(bin, `tether${exe}`);
const keeperPath = path.join(bin, `tether-keeper${exe}`);
if (fs.existsSync(keeperPath)) native.setKeeper(keeperPath);
else if (fs.existsSync(tetherPath)) native.setKeeper(tetherPath);
// Up to two keepers of finished commands wait for the next ones: the
// keeper's exec leaves the spawn path of every command but the first
// (docs/benchmarks.md). They are this process's children and die with it.
native.setWarmKeepers(2);

module.exports = { native, tetherPath, keeperPath };
