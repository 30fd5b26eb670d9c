'use strict';
// The work ledger in Node: `Ledger.open("sqlite:///path")` or a `postgres://` URL. It only translates:
// camelCase in, the core's snake_case JSON out as camelCase objects, and the core's ledger error codes
// to error classes. Every rule (claims, fencing, cooldowns, backlog) lives in the Rust core. Times are
// milliseconds since the Unix epoch.

const native = require('./native.js');
const { AmbitError } = require('./index.js');
const { envelopeReader, toCamel, toSnake } = require('./envelope.js');
const { stringList, refuseUnknown } = require('./options.js');

/** A ledger call refused or failed; a refused batch wrote nothing. */
class LedgerError extends AmbitError {
  constructor(message, code = 'ledger_store', details = {}, options) {
    super(message, code, options);
    this.name = 'LedgerError';
    Object.assign(this, details);
  }
}

/** An unknown outcome, a missing subject_key or the same subject twice (code "ledger_invalid_batch"). */
class InvalidBatchError extends LedgerError {
  constructor(message, details) {
    super(message, 'ledger_invalid_batch', details);
    this.name = 'InvalidBatchError';
  }
}

/** A record for a grant another run has since reclaimed (code "ledger_stale_token"); `subjectKey`. */
class StaleTokenError extends LedgerError {
  constructor(message, details) {
    super(message, 'ledger_stale_token', details);
    this.name = 'StaleTokenError';
  }
}

/** A record for a subject this run never claimed (code "ledger_not_claimed"); `subjectKey`. */
class NotClaimedError extends LedgerError {
  constructor(message, details) {
    super(message, 'ledger_not_claimed', details);
    this.name = 'NotClaimedError';
  }
}

/** A routine claiming outside the scope its first claim pinned (code "ledger_scope_pinned"). */
class ScopePinnedError extends LedgerError {
  constructor(message, details) {
    super(message, 'ledger_scope_pinned', details);
    this.name = 'ScopePinnedError';
  }
}

/** An argument the ledger cannot use: an empty key, a batch size below 1, an unknown limit, a bad URL (code "ledger_invalid_argument"). */
class InvalidLedgerArgumentError extends LedgerError {
  constructor(message, details) {
    super(message, 'ledger_invalid_argument', details);
    this.name = 'InvalidLedgerArgumentError';
  }
}

const BY_CODE = {
  ledger_invalid_argument: InvalidLedgerArgumentError,
  ledger_invalid_batch: InvalidBatchError,
  ledger_stale_token: StaleTokenError,
  ledger_not_claimed: NotClaimedError,
  ledger_scope_pinned: ScopePinnedError,
};

const { toError, unwrap } = envelopeReader(LedgerError, BY_CODE);

/** A routine's limits as the core reads them (it refuses an unknown field or a bad value, naming it). */
function limitsJson(limits = {}) {
  if (limits === null || typeof limits !== 'object' || Array.isArray(limits)) {
    throw new TypeError(`limits must be an object ({parallelLimit, dailyCap, running, startedToday}), got ${limits === null ? 'null' : typeof limits}`);
  }
  return JSON.stringify(toSnake({ parallelLimit: 1, running: 1, startedToday: 0, dailyCap: null, ...limits }));
}

/** Refuses an argument that is not a string, naming it (the native layer would only say its Rust type). */
function requireString(what, value) {
  if (typeof value !== 'string') throw new TypeError(`${what} must be a string, got ${value === null ? 'null' : typeof value}`);
  return value;
}

class ClaimResult {
  constructor(raw) {
    this.scope = raw.scope;
    /** Every candidate in the order given: `{subjectKey, status: "granted"|"skipped", grantReason, token, leaseUntil, skipReason, eligibleAt}`. */
    this.candidates = raw.candidates;
  }
  /** The granted candidates. */
  get granted() {
    return this.candidates.filter((c) => c.status === 'granted');
  }
  /** The candidate with this subject key. */
  get(subjectKey) {
    return this.candidates.find((c) => c.subjectKey === subjectKey);
  }
}

/**
 * The ledger's four agent tools (`claim_work`, `record_work`, `list_work_ledger`, `report_backlog`)
 * bound to one run of a routine: `new Agent({model, ledger: ledger.forRoutine(scope, {runId, routineId})})`.
 * The scope, routine id, run id and claim tokens are filled in by the SDK, never by the model.
 */
class RoutineLedger {
  constructor(handle, scope, routineId, runId) {
    this._native = handle;
    this.scope = scope;
    this.routineId = routineId;
    this.runId = runId;
  }
  /** The tools' names, in registration order. */
  get toolNames() {
    return this._native.names();
  }
}

/** The work ledger on SQLite or PostgreSQL. */
class Ledger {
  constructor(handle) {
    this._native = handle;
  }

  /** Opens `sqlite:///path` or `postgres://…`, applying migrations; `{durability: "fast"}` trades durability for speed. */
  static async open(url, options = {}) {
    refuseUnknown('Ledger.open', options, ['durability']);
    const { durability = 'full' } = options;
    try {
      return new Ledger(await native.openLedger(url, durability));
    } catch (e) {
      let error;
      try {
        error = JSON.parse(e.message);
      } catch {
        throw e;
      }
      throw toError(error);
    }
  }

  /** Labels every candidate granted or skipped, granting at most `limit`, in one atomic step. */
  async claim(scope, candidates, { limit, leaseMs = 3_600_000, runId = null, routineId = null } = {}) {
    const request = {
      scope,
      candidates: candidates.map((c) => (typeof c === 'string' ? { subject_key: c } : toSnake(c))),
      limit: limit ?? candidates.length,
      lease_ms: leaseMs,
      run_id: runId,
      routine_id: routineId,
    };
    return new ClaimResult(toCamel(unwrap(await this._native.claim(JSON.stringify(request)))));
  }

  /** Records outcomes (`{subjectKey, outcome, token?, fingerprint?}`): the whole batch or nothing. */
  async record(scope, records, { runId = null } = {}) {
    return toCamel(unwrap(await this._native.record(scope, JSON.stringify(toSnake(records)), runId)));
  }

  /** Ledger rows, soonest eligible first; `state` is "all", "eligible" or "suppressed". */
  async list({ scope = null, state = 'all', routineId = null } = {}) {
    return toCamel(unwrap(await this._native.list(JSON.stringify({ scope, state, routine_id: routineId }))));
  }

  /** Per scope, how many rows were last granted for each reason (the fingerprint health check). */
  async grantReasonCounts(scope) {
    return toCamel(unwrap(await this._native.grantReasonCounts(scope)));
  }

  /**
   * Counts how many of `subjectKeys` are workable now in the routine's scope; `extraRuns` is
   * `ceil(workable / batchSize)` capped by the routine's limits. The report is kept for the drain. A bad
   * argument (a batch size below 1, an empty key, an unknown limit) throws `InvalidLedgerArgumentError`
   * naming it; a value of the wrong type, a `TypeError`.
   */
  async reportBacklog(routineId, subjectKeys, batchSize, { limits, runId = null } = {}) {
    requireString('routineId', routineId);
    if (runId !== null) requireString('runId', runId);
    const keys = stringList('subjectKeys', subjectKeys);
    if (!Number.isInteger(batchSize)) throw new TypeError(`batchSize must be a whole number, got ${batchSize}`);
    return toCamel(unwrap(await this._native.reportBacklog(routineId, keys, batchSize, limitsJson(limits), runId)));
  }

  /**
   * The four agent tools bound to one run of a routine, for `new Agent({ledger})`. `limit`: the most one
   * `claim_work` grants; `limits`: the routine's, for `report_backlog` (which needs `routineId`).
   */
  forRoutine(scope, { runId, routineId = null, limit = 5, leaseMs = 3_600_000, limits } = {}) {
    if (typeof scope !== 'string' || typeof runId !== 'string') {
      throw new TypeError('forRoutine(scope, {runId}): scope and runId are strings');
    }
    let handle;
    try {
      handle = this._native.toolsForRoutine(scope, runId, limit, leaseMs, limitsJson(limits), routineId);
    } catch (e) {
      let error;
      try {
        error = JSON.parse(e.message);
      } catch {
        throw e;
      }
      throw toError(error);
    }
    return new RoutineLedger(handle, scope, routineId, runId);
  }

  /** After a run of a draining routine finishes: `{stop, startRuns}`. */
  async drainDecision(routineId, runId, options = {}) {
    refuseUnknown('Ledger.drainDecision', options, ['limits']);
    const { limits } = options;
    requireString('routineId', routineId);
    requireString('runId', runId);
    return toCamel(unwrap(await this._native.drainDecision(routineId, runId, limitsJson(limits))));
  }
}

module.exports = {
  Ledger,
  RoutineLedger,
  ClaimResult,
  LedgerError,
  InvalidBatchError,
  StaleTokenError,
  NotClaimedError,
  ScopePinnedError,
  InvalidLedgerArgumentError,
};
