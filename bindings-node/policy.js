'use strict';
// Permissions in the JavaScript face of ambit: the policy's camelCase options to the core's snake_case
// PolicyConfig (as JSON text), the approval handler wrapped so nothing it does can throw into Rust, a
// tool's level declarations, and the listing API's rows back to camelCase. Every rule (levels, filters,
// which call goes to the handler, what an answer means) lives in the Rust core.

const { ConfigError } = require('./errors.js');
const { stringList, refuseUnknown } = require('./options.js');

/** Every key a policy object may have; the list-typed ones read by `stringList`. */
const POLICY_KEYS = [
  'level', 'approvals', 'allowTools', 'blockTools', 'levelOverrides', 'workingDirectory', 'workspaceDirectories',
  'readableDirectories', 'confineReads', 'network', 'allowLocalAddresses',
];
const POLICY_LISTS = ['allowTools', 'blockTools', 'workspaceDirectories', 'readableDirectories', 'allowLocalAddresses'];

function describe(value) {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value;
}

function errorMessage(e) {
  if (e instanceof Error) return e.message;
  if (e !== null && typeof e === 'object' && typeof e.message === 'string') return e.message;
  return String(e);
}

/** `allowTools` → `allow_tools`. Only the policy's own keys are converted, never tool names. */
function snakeCase(key) {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** The core's approval request (snake_case JSON) as Node's `PendingApproval`. */
function toApprovalRequest(r) {
  return {
    callId: r.call_id,
    tool: r.tool,
    arguments: r.arguments,
    toolLevel: r.tool_level,
    sessionLevel: r.session_level,
    reason: r.reason,
  };
}

/**
 * Wraps an approval handler (plain or async) for the native side: it receives the request's JSON text
 * and resolves to the JSON text of `{ok: true, value: decision}` or `{ok: false, message}`. The core
 * reads the decision; a throw, or an answer that is not a decision, is the core's denial.
 */
function wrapApprovals(handler) {
  return async (requestJson) => {
    try {
      const answer = await handler(toApprovalRequest(JSON.parse(requestJson)));
      return JSON.stringify({ ok: true, value: answer === undefined ? null : answer });
    } catch (e) {
      return JSON.stringify({ ok: false, message: errorMessage(e) });
    }
  };
}

/**
 * The native inputs for `policy`: `{policy: JSON text | undefined, approvals: function | undefined}`.
 * Unknown keys and values go to the core, which refuses them by name.
 */
function toNativePolicy(policy) {
  if (policy == null) return { policy: undefined, approvals: undefined };
  if (typeof policy !== 'object' || Array.isArray(policy)) {
    throw new TypeError(`Agent: policy must be an object such as {level: "read"}, got ${describe(policy)}`);
  }
  refuseUnknown('policy', policy, POLICY_KEYS);
  const config = {};
  let approvals;
  for (const [key, value] of Object.entries(policy)) {
    if (POLICY_LISTS.includes(key) && value !== undefined) {
      config[snakeCase(key)] = stringList(`policy.${key}`, value);
    } else if (key === 'levelOverrides' && value !== undefined
      && (value === null || typeof value !== 'object' || Array.isArray(value))) {
      throw new ConfigError(`policy.levelOverrides must be an object of tool names to levels, got ${describe(value)}`);
    } else if (key === 'approvals') {
      if (value != null && value !== false && typeof value !== 'function') {
        throw new TypeError(`Agent: policy.approvals must be a function (request) => decision, got ${describe(value)}`);
      }
      approvals = typeof value === 'function' ? wrapApprovals(value) : undefined;
    } else if (value !== undefined) {
      config[snakeCase(key)] = value;
    }
  }
  return { policy: JSON.stringify(config), approvals };
}

/** The native inputs for `builtins`: names of built-in tools (the core refuses an unknown one). */
function toNativeBuiltins(builtins) {
  if (builtins == null) return undefined;
  return stringList('Agent: builtins', builtins);
}

/** A tool's permission declarations, checked for their JS types (the core checks the level's value). */
function toolDeclarations(name, definition) {
  const { level, requiresApproval, allowBlank, idempotent } = definition;
  if (level != null && typeof level !== 'string') {
    throw new TypeError(`tool '${name}': level must be a string ("none", "read", "workspace" or "unrestricted"), got ${describe(level)}`);
  }
  if (requiresApproval != null && typeof requiresApproval !== 'boolean') {
    throw new TypeError(`tool '${name}': requiresApproval must be a boolean, got ${describe(requiresApproval)}`);
  }
  if (idempotent != null && typeof idempotent !== 'boolean') {
    throw new TypeError(`tool '${name}': idempotent must be a boolean, got ${describe(idempotent)}`);
  }
  return {
    level: level ?? undefined,
    requiresApproval: requiresApproval ?? undefined,
    allowBlank: allowBlank == null ? undefined : stringList(`tool '${name}': allowBlank`, allowBlank),
    idempotent: idempotent ?? undefined,
  };
}

/** The core's listing rows (JSON text, snake_case) as camelCase objects. */
function toToolListing(json) {
  return JSON.parse(json).map((t) => ({
    name: t.name,
    level: t.level,
    declaredLevel: t.declared_level,
    status: t.status,
    approval: t.approval,
    ...(t.confinement != null ? { confinement: t.confinement } : {}),
  }));
}

module.exports = { toNativePolicy, toNativeBuiltins, toolDeclarations, toToolListing, toApprovalRequest };
