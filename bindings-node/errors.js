'use strict';
// The base of every error ambit throws, and the one for a bug in ambit itself. The other classes live in
// index.js, ledger.js and sessions.js.

/** Every error ambit throws. `code` is the core's stable machine-readable code. */
class AmbitError extends Error {
  constructor(message, code, options) {
    super(message, options);
    this.name = 'AmbitError';
    this.code = code;
  }
}

/** The agent or a tool was configured wrongly (code "config"). */
class ConfigError extends AmbitError {
  constructor(message, options) {
    super(message, 'config', options);
    this.name = 'ConfigError';
  }
}

/**
 * A bug in ambit (code "internal"): a panic in the native core was caught at the boundary instead of
 * taking the process down. The message is the panic's; please report it.
 */
class InternalError extends AmbitError {
  constructor(message, options) {
    super(message, 'internal', options);
    this.name = 'InternalError';
  }
}

module.exports = { AmbitError, ConfigError, InternalError };
