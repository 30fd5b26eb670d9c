'use strict';
// Sub-agent settings (SPEC §7) in the core's form. The rules (narrowing, depth, the five agent tools)
// live in the core, which also refuses a bad value by name; this only renames keys.

const KEYS = { maxDepth: 'max_depth', memory: 'memory' };

/**
 * `subagents: true | { maxDepth?, memory? }` as the core's `AgentOptions.subagents`, or nothing.
 * @returns {{subagents?: Record<string, unknown>}}
 */
function toNativeSubagents(subagents) {
  if (subagents == null || subagents === false) return {};
  if (subagents === true) return { subagents: {} };
  if (typeof subagents !== 'object' || Array.isArray(subagents)) {
    throw new TypeError(`Agent: subagents must be true or an object {maxDepth, memory}, got ${typeof subagents}`);
  }
  const out = {};
  for (const [key, value] of Object.entries(subagents)) {
    if (value !== undefined) out[KEYS[key] ?? key] = value;
  }
  return { subagents: out };
}

module.exports = { toNativeSubagents };
