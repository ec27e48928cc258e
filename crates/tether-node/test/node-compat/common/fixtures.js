'use strict';
// Node's test/common/fixtures.js, the part used: fixture paths.
const path = require('path');

const fixturesDir = path.join(__dirname, '..', 'fixtures');

module.exports = {
  fixturesDir,
  path: (...args) => path.join(fixturesDir, ...args),
};
