'use strict';
// The facade's one door to the native module. Every function and method it exports is wrapped once
// here: an error the native side throws (or a promise it rejects) for a caught panic, whose reason
// starts with "ambit-internal:", becomes InternalError (code "internal"). Everything else passes as is.

const native = require('./native/index.js');
const { InternalError } = require('./errors.js');

const MARK = 'ambit-internal:';

function translate(e) {
  if (e instanceof Error && typeof e.message === 'string' && e.message.startsWith(MARK)) {
    return new InternalError(e.message.slice(MARK.length));
  }
  return e;
}

function guarded(fn) {
  return function guardedNative(...args) {
    let out;
    try {
      out = fn.apply(this, args);
    } catch (e) {
      throw translate(e);
    }
    if (out !== null && typeof out === 'object' && typeof out.then === 'function') {
      return out.then(undefined, (e) => {
        throw translate(e);
      });
    }
    return out;
  };
}

const wrapped = {};
for (const [name, value] of Object.entries(native)) {
  if (typeof value !== 'function') {
    wrapped[name] = value;
    continue;
  }
  const methods = value.prototype ? Object.getOwnPropertyNames(value.prototype).filter((k) => k !== 'constructor') : [];
  if (/^[A-Z]/.test(name)) {
    // A class: its methods are wrapped in place, so `instanceof` still holds for what it makes.
    for (const key of methods) {
      const d = Object.getOwnPropertyDescriptor(value.prototype, key);
      if (typeof d.value === 'function') {
        Object.defineProperty(value.prototype, key, { ...d, value: guarded(d.value) });
      }
    }
    for (const key of Object.getOwnPropertyNames(value)) {
      const d = Object.getOwnPropertyDescriptor(value, key);
      if (typeof d.value === 'function' && d.configurable) Object.defineProperty(value, key, { ...d, value: guarded(d.value) });
    }
    wrapped[name] = value;
  } else {
    wrapped[name] = guarded(value);
  }
}

module.exports = wrapped;
