'use strict';
// Node's test/common/tmpdir.js, the part used: a fresh directory per test.
const fs = require('fs');
const os = require('os');
const path = require('path');

const tmpPath = path.join(os.tmpdir(), `node-compat-${process.pid}`);

module.exports = {
  path: tmpPath,
  refresh() {
    fs.rmSync(tmpPath, { recursive: true, force: true });
    fs.mkdirSync(tmpPath, { recursive: true });
    process.on('exit', () => fs.rmSync(tmpPath, { recursive: true, force: true }));
  },
};
