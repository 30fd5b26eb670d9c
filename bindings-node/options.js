'use strict';
// How the facade reads option objects and list-typed options (the argument rule's spirit): a bare
// string is a one-entry list, an array of strings is itself, anything else is a ConfigError naming the
// option; a key no one reads is a ConfigError naming it. Never a silent default.

const { ConfigError } = require('./errors.js');

function show(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return `the string ${JSON.stringify(value)}`;
  return typeof value;
}

/** `value` as an array of strings: one string is a one-entry list. */
function stringList(option, value) {
  if (typeof value === 'string') return [value];
  if (!Array.isArray(value)) {
    throw new ConfigError(`${option} must be an array of strings (or one string), got ${show(value)}`);
  }
  value.forEach((v, i) => {
    if (typeof v !== 'string') throw new ConfigError(`${option}[${i}] must be a string, got ${show(v)}`);
  });
  return value;
}

/** Refuses the keys of `object` that are not in `known`, naming them. */
function refuseUnknown(what, object, known) {
  const unknown = Object.keys(object).filter((k) => !known.includes(k));
  if (unknown.length > 0) {
    throw new ConfigError(`${what}: unknown option${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `'${k}'`).join(', ')} (known: ${known.join(', ')})`);
  }
}

module.exports = { stringList, refuseUnknown };
