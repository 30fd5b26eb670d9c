'use strict';
// Telemetry in Node: the core's spans (OpenTelemetry GenAI conventions: invoke_agent > turn > chat
// {model} + execute_tool {name}) exported over OTLP/HTTP with protobuf bodies. Off by default; message
// contents only with `recordContent: true`, and then after the credential redactor. The core does the
// work; this module only translates. `setLogger` is the logging bridge: the core's `tracing` events
// (what Rust logs with `RUST_LOG`, Python with `logging`) handed to a JS function.

const native = require('./native.js');
const { ConfigError, InternalError } = require('./errors.js');
const { refuseUnknown } = require('./options.js');

function unwrap(text) {
  const envelope = JSON.parse(text);
  if (envelope.ok) return undefined;
  const { code, message } = envelope.error;
  if (code === 'internal') throw new InternalError(message);
  throw new ConfigError(message);
}

const KNOWN = ['endpoint', 'headers', 'recordContent', 'serviceName'];

/**
 * Turns export on: `enable({ endpoint: 'http://localhost:4318', headers, recordContent, serviceName })`.
 * A base URL gets `/v1/traces`. Again after `disable()`: on again (one endpoint per process).
 */
function enable(options) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new ConfigError('telemetry.enable takes an options object: { endpoint, headers?, recordContent?, serviceName? }');
  }
  refuseUnknown('telemetry.enable', options, KNOWN);
  const { endpoint, headers = {}, recordContent = false, serviceName = 'ambit' } = options;
  if (typeof endpoint !== 'string') throw new ConfigError(`telemetry.enable: endpoint must be a string, got ${typeof endpoint}`);
  if (typeof recordContent !== 'boolean') {
    throw new ConfigError(`telemetry.enable: recordContent must be true or false, got ${typeof recordContent}`);
  }
  if (typeof serviceName !== 'string') throw new ConfigError(`telemetry.enable: serviceName must be a string, got ${typeof serviceName}`);
  if (headers === null || typeof headers !== 'object' || Array.isArray(headers)) {
    throw new ConfigError('telemetry.enable: headers must be an object of header names to values');
  }
  const pairs = Object.entries(headers).map(([k, v]) => {
    if (typeof v !== 'string') throw new ConfigError(`telemetry.enable: header '${k}' must be a string, got ${typeof v}`);
    return [k, v];
  });
  unwrap(native.telemetryEnable(endpoint, pairs, recordContent, serviceName));
}

/** Exports every finished span not yet sent, waiting for the collector's answer. */
function flush() {
  unwrap(native.telemetryFlush());
}

/** Exports what is pending and turns export off (content recording too). */
function disable() {
  unwrap(native.telemetryDisable());
}

const LEVELS = ['error', 'warn', 'info', 'debug', 'trace'];

/**
 * The logging bridge: `setLogger((record) => ..., { level: 'info' })` calls the function with every
 * record of the core at `level` or above (`error` < `warn` < `info` < `debug` < `trace`; default
 * `info`), as `{ level, target, message }` (`target` names the core's module: `ambit::agent`,
 * `ambit::tools`, `ambit::mcp::client`, ...), on the JS thread, in order; `setLogger(null)` stops it.
 * Off by default. The function's own exceptions are not the core's concern: they are reported as
 * uncaught, as any callback's.
 */
function setLogger(logger, options = {}) {
  if (logger !== null && typeof logger !== 'function') {
    throw new ConfigError(`telemetry.setLogger takes a function or null, got ${typeof logger}`);
  }
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new ConfigError('telemetry.setLogger: options must be an object: { level? }');
  }
  refuseUnknown('telemetry.setLogger', options, ['level']);
  const { level = 'info' } = options;
  if (!LEVELS.includes(level)) {
    throw new ConfigError(`telemetry.setLogger: level must be one of ${LEVELS.join(', ')}, got ${JSON.stringify(level)}`);
  }
  // The empty text is `flushLogger`'s marker, not a record.
  const callback = logger === null ? null : (text) => { if (text !== '') logger(Object.freeze(JSON.parse(text))); };
  native.telemetrySetLogger(callback, level);
}

/**
 * Resolves once every record handed to the logger before the call has reached it. The logger does not
 * keep the process alive: a program that ends right after a run awaits this to be sure its last records
 * were logged. Resolves at once without a logger.
 */
function flushLogger() {
  return native.telemetryFlushLogger();
}

module.exports = { telemetry: Object.freeze({ enable, flush, disable, setLogger, flushLogger }) };
