'use strict';
// One reader for the core's JSON envelopes (`{"ok": true, "value": …}` or `{"ok": false, "error": {code,
// message, details}}`), shared by the ledger and memory modules: the error code picks the class, `internal`
// is always `InternalError`, anything else the module's base class.

const { InternalError } = require('./errors.js');

/**
 * `toError` and `unwrap` for a module whose errors are `Base` (the fallback, given the code) and the
 * subclasses of `byCode` (constructed with the message and the error's details).
 */
function envelopeReader(Base, byCode) {
  function toError(error) {
    if (error.code === 'internal') return new InternalError(error.message);
    const Cls = byCode[error.code];
    return Cls ? new Cls(error.message, error.details || {}) : new Base(error.message, error.code, error.details || {});
  }
  function unwrap(text) {
    const envelope = JSON.parse(text);
    if (!envelope.ok) throw toError(envelope.error);
    return envelope.value;
  }
  return { toError, unwrap };
}

/** snake_case to camelCase. */
const camel = (s) => s.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
/** camelCase to snake_case. */
const snake = (s) => s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** snake_case keys to camelCase, deeply; values (reasons, states) stay as the core's strings. */
function toCamel(v) {
  if (Array.isArray(v)) return v.map(toCamel);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [camel(k), toCamel(x)]));
  return v;
}

/** camelCase keys to snake_case, deeply, for the core. */
function toSnake(v) {
  if (Array.isArray(v)) return v.map(toSnake);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [snake(k), toSnake(x)]));
  return v;
}

module.exports = { envelopeReader, camel, snake, toCamel, toSnake };
