'use strict';
// Sessions in Node (SPEC §8): an append-only conversation log in SQLite (`sqlite:///path`) or PostgreSQL
// (`postgres://…`). A run in a session continues its live window; compaction appends a boundary and a
// summary and never deletes; a run whose approval handler answers `{decision: "later"}` parks, and
// `resume` — from any process and language that opens the same store — continues it. Every rule lives
// in the Rust core; this only translates.

const native = require('./native.js');
const { refuseUnknown } = require('./options.js');
const content = require('./content.js');
const core = require('./index.js');
const { toApprovalRequest } = require('./policy.js');

/** A session run parked on an approval (code "awaiting_approval"): `sessionId`, `request`. A signal, not a failure. */
class AwaitingApprovalError extends core.AmbitError {
  constructor(message, details = {}) {
    super(message, 'awaiting_approval');
    this.name = 'AwaitingApprovalError';
    this.sessionId = details.sessionId;
    this.request = details.request ? toApprovalRequest(details.request) : undefined;
  }
}

/** The session tools, by built-in name: `new Agent({builtins: SESSION_TOOLS})`. */
const SESSION_TOOLS = [
  'conversation_search',
  'conversation_read',
  'session_list',
  'session_search',
  'context_check',
  'context_compact',
];

function toError(error) {
  if (error.code === 'awaiting_approval') return new AwaitingApprovalError(error.message, error.details);
  const plain = ['session_not_found', 'session_store', 'invalid_argument', 'session_busy', 'session_not_parked'];
  if (plain.includes(error.code)) {
    return new core.AmbitError(error.message, error.code);
  }
  // A run's own failure: the same error class Agent.run would throw.
  const { usage, index, field } = error.details ?? {};
  const details = usage ? JSON.stringify({ usage }) : field !== undefined ? JSON.stringify({ index, field }) : undefined;
  return core._toError({ code: error.code, message: error.message, details });
}

function unwrap(text) {
  const envelope = JSON.parse(text);
  if (!envelope.ok) throw toError(envelope.error);
  return envelope.value;
}

function handle(agent) {
  if (!(agent instanceof core.Agent)) throw new TypeError('Sessions: agent must be an ambit Agent');
  return agent._nativeHandle();
}

/** An open session store. */
class Sessions {
  constructor(handle) {
    this._native = handle;
  }

  /**
   * Opens the store, applying its migrations. Auto-compaction fires when a run would start past
   * `compactAt` of the context window: the model's (its `contextWindow` option, else its family's
   * default) unless `contextWindow` names one for this store; a compaction keeps the latest
   * `keepRecent` rounds verbatim. `leaseMs`: how long a run holds the session unless its heartbeat
   * renews it (default 30000; also how long a background task's process may stay silent before the
   * task is `lost`). `busyWaitMs`: how long a run on a session another run holds waits for it before it
   * is refused with `session_busy` (default: refused at once; at most one hour).
   */
  static async open(url, options = {}) {
    refuseUnknown('Sessions.open', options, ['contextWindow', 'compactAt', 'keepRecent', 'leaseMs', 'busyWaitMs']);
    const { contextWindow, compactAt = 0.85, keepRecent = 2, leaseMs, busyWaitMs } = options;
    // JSON has no NaN or Infinity (JSON.stringify would make them null, "not set"): they travel as
    // their names, which the core refuses by setting.
    const config = JSON.stringify(
      {
        context_window: contextWindow,
        compact_at: compactAt,
        keep_recent: keepRecent,
        lease_ms: leaseMs,
        busy_wait_ms: busyWaitMs,
      },
      (_key, value) => (typeof value === 'number' && !Number.isFinite(value) ? String(value) : value),
    );
    try {
      return new Sessions(await native.openSessions(url, config));
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

  /** A new, empty session; its id. */
  async create() {
    return unwrap(await this._native.create());
  }

  /** Runs `agent` on `input` in the session, continuing its conversation. `input` is the next user
   *  message: a string, or an array of parts (`Text`, `Image`, `File`, strings as text) stored in the
   *  session so later turns send them again. `options.context`: a value of yours every tool, hook and
   *  guardrail of the run reads as `ctx.context` (never sent, never stored). */
  async run(agent, sessionId, input, options = {}) {
    refuseUnknown('Sessions.run', options ?? {}, ['context']);
    // The session is the history: a list of messages is refused, nothing stored (run the agent without
    // a session to keep a history yourself).
    const parts = Array.isArray(input) && input.length > 0 && input.some(content.isPart)
      && input.every((p) => content.isPart(p) || typeof p === 'string');
    if (typeof input !== 'string' && !parts) {
      throw new core.ConfigError(
        `a session keeps its own history: Sessions.run takes the next user message (a string or an array of parts), not ${Array.isArray(input) ? 'an array of messages' : typeof input}; ` +
          'to pass a history of your own, run the agent without a session (agent.run(messages))',
      );
    }
    const messages = parts ? JSON.stringify([{ role: 'user', content: input.map(content.partJson) }]) : undefined;
    const text = parts ? '' : input;
    const context = core._enterContext(options);
    try {
      return core._toRunResult(
        unwrap(await this._native.run(handle(agent), sessionId, text, context, messages)),
        agent._outputParser(),
      );
    } finally {
      core._leaveContext(context);
    }
  }

  /** Answers the approval a parked session waits on (`{decision: "approve"}`, `"deny"` with a reason,
   *  `"revise"` with arguments) and continues the run as if the answer had come live. */
  async resume(agent, sessionId, decision, options = {}) {
    refuseUnknown('Sessions.resume', options ?? {}, ['context']);
    // A parked run's context is not stored: the host gives it again.
    const context = core._enterContext(options);
    try {
      return core._toRunResult(
        unwrap(await this._native.resume(handle(agent), sessionId, JSON.stringify(decision), context)),
        agent._outputParser(),
      );
    } finally {
      core._leaveContext(context);
    }
  }

  /** The approval a parked session waits on, or null. */
  async pending(sessionId) {
    const r = unwrap(await this._native.pending(sessionId));
    return r == null ? null : toApprovalRequest(r);
  }

  /** Compacts now (the agent's model writes the summary); false when there was nothing to summarise. */
  async compact(agent, sessionId) {
    return unwrap(await this._native.compact(handle(agent), sessionId));
  }

  /** `conversation_search`: matching lines tagged `#N role:`. */
  async search(sessionId, query, { isRegex = false, limit = 20 } = {}) {
    return unwrap(await this._native.search(sessionId, query, isRegex, limit));
  }

  /** `conversation_read`: up to 20 entries from `#start`. */
  async read(sessionId, start, limit = 1) {
    return unwrap(await this._native.read(sessionId, start, limit));
  }

  /** The whole log, boundaries and summaries included. */
  async entries(sessionId) {
    return unwrap(await this._native.entries(sessionId));
  }

  /**
   * Work that outlives the run (SPEC §8b): a run in a session ends without waiting for its background
   * tasks; each result lands in the session as its own turn when it comes and is announced here, from
   * now on (as this process runs the task). An async iterator: `for await (const d of sessions.deliveries())`.
   */
  deliveries() {
    const rx = this._native.deliveries();
    return {
      async next() {
        const d = unwrap(await rx.next());
        return d == null ? { value: undefined, done: true } : { value: toDelivery(d), done: false };
      },
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }

  /** A session's background task from any process: status (`running`, `finished`, `failed`,
   *  `cancelled`, or `lost` when its process died), latest progress note and result. */
  async taskResult(sessionId, taskId) {
    const t = unwrap(await this._native.taskResult(sessionId, taskId));
    return { sessionId: t.session_id, taskId: t.task_id, name: t.name, status: t.status, note: t.note, result: t.result };
  }
}

function toDelivery(d) {
  return { sessionId: d.session_id, taskId: d.task_id, name: d.name, status: d.status, result: d.result };
}

module.exports = { Sessions, AwaitingApprovalError, SESSION_TOOLS };
