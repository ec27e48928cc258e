'use strict';
// The parts of Node's test/common/index.js the vendored tests use,
// written anew (Node's own pulls in much of its internals): mustCall and
// friends check their counts at exit as Node's do.
const assert = require('assert');
const path = require('path');
const util = require('util');

const mustCallChecks = [];

function runCallChecks(exitCode) {
  if (exitCode !== 0) return;
  const failed = mustCallChecks.filter((context) => {
    if ('minimum' in context) return context.actual < context.minimum;
    return context.actual !== context.exact;
  });
  for (const context of failed) {
    const want = 'minimum' in context ? `at least ${context.minimum}` : `exactly ${context.exact}`;
    console.log(`Mismatched ${context.name} function calls. Expected ${want}, actual ${context.actual}.`);
    console.log(context.stack.split('\n').slice(2).join('\n'));
  }
  if (failed.length) process.exit(1);
}

function _mustCallInner(fn, criteria = 1, field) {
  if (typeof fn === 'number') {
    criteria = fn;
    fn = () => {};
  } else if (fn === undefined) {
    fn = () => {};
  }
  const context = { [field]: criteria, actual: 0, stack: new Error().stack, name: fn.name || '<anonymous>' };
  if (mustCallChecks.length === 0) process.on('exit', runCallChecks);
  mustCallChecks.push(context);
  const wrapped = function(...args) {
    context.actual++;
    return fn.apply(this, args);
  };
  Object.defineProperty(wrapped, 'length', { value: fn.length });
  return wrapped;
}

function mustCall(fn, exact) {
  return _mustCallInner(fn, exact, 'exact');
}

function mustCallAtLeast(fn, minimum) {
  return _mustCallInner(fn, minimum, 'minimum');
}

function mustSucceed(fn, exact) {
  return mustCall(function(err, ...args) {
    assert.ifError(err);
    if (typeof fn === 'function') return fn.apply(this, args);
  }, exact);
}

function mustNotCall(msg) {
  const callSite = new Error().stack.split('\n')[2];
  return function mustNotCall(...args) {
    const argsInfo = args.length > 0 ? `\ncalled with arguments: ${args.map((a) => util.inspect(a)).join(', ')}` : '';
    assert.fail(`${msg || 'function should not have been called'} at ${callSite}${argsInfo}`);
  };
}

function expectsError(validator, exact) {
  return mustCall((...args) => {
    if (args.length !== 1) assert.fail(`Expected one argument, got ${util.inspect(args)}`);
    const error = args.pop();
    assert.throws(() => { throw error; }, validator);
    return true;
  }, exact);
}

function invalidArgTypeHelper(input) {
  if (input == null) return ` Received ${input}`;
  if (typeof input === 'function') return ` Received function ${input.name}`;
  if (typeof input === 'object') {
    if (input.constructor?.name) return ` Received an instance of ${input.constructor.name}`;
    return ` Received ${util.inspect(input, { depth: -1 })}`;
  }
  let inspected = util.inspect(input, { colors: false });
  if (inspected.length > 28) inspected = `${inspected.slice(0, 25)}...`;
  return ` Received type ${typeof input} (${inspected})`;
}

// Node's escapePOSIXShell: the command with its interpolations passed as
// environment variables, and the options carrying them.
function escapePOSIXShell(cmdParts, ...args) {
  if (process.platform === 'win32') {
    return [String.raw({ raw: cmdParts }, ...args)];
  }
  const env = { ...process.env };
  let cmd = cmdParts[0];
  for (let i = 0; i < args.length; i++) {
    const envVarName = `ESCAPED_${i}`;
    env[envVarName] = args[i];
    cmd += '${' + envVarName + '}' + cmdParts[i + 1];
  }
  return [cmd, { env }];
}

const isWindows = process.platform === 'win32';

// `cat` (or Windows' `more`) through the child_process under test.
function spawnCat(options) {
  const { spawn } = require('../child_process');
  return isWindows ? spawn('more', [], options) : spawn('cat', [], options);
}

module.exports = {
  mustCall,
  mustCallAtLeast,
  mustSucceed,
  mustNotCall,
  expectsError,
  spawnCat,
  invalidArgTypeHelper,
  escapePOSIXShell,
  isWindows,
  isLinux: process.platform === 'linux',
  isMacOS: process.platform === 'darwin',
  fixturesDir: path.join(__dirname, '..', 'fixtures'),
  pwdCommand: isWindows ? ['cmd.exe', ['/d', '/c', 'cd']] : ['pwd', []],
  platformTimeout: (ms) => ms,
  fail: (msg) => assert.fail(msg),
  print: (...args) => process.stdout.write(args.join(' ')),
};
