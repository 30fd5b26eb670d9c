'use strict';
// Routines in Node (SPEC §13): standing work on a schedule, run by any number of runner processes over
// one store (`sqlite:///path` or `postgres://…`).
//
//   const routines = await Routines.open('sqlite:///var/lib/app/routines.db');
//   await routines.create({ agent: 'po-chaser', instructions: 'Chase the five oldest POs.', intervalSeconds: 1800 }, { actor: 'alice' });
//   const runner = new Runner(routines, sessions, { agents: { 'po-chaser': (ctx) => new Agent({ model, routine: ctx }) } });
//   await runner.runForever({ signal });   // or: await runner.tick()
//
// It only translates: camelCase in, the core's snake_case JSON out as camelCase objects, and the core's
// routine error codes to error classes (a refused field is named in camelCase). Every rule lives in the
// Rust core. Times are milliseconds since the Unix epoch.

const native = require('./native.js');
const { refuseUnknown } = require('./options.js');
const core = require('./index.js');
const { envelopeReader, camel, toCamel, toSnake } = require('./envelope.js');

/** A routine call refused or failed. */
class RoutineError extends core.AmbitError {
  constructor(message, code = 'routine_store', details = {}, options) {
    super(message, code, options);
    this.name = 'RoutineError';
  }
}

/** A field of a definition, an update or an option is wrong (code "invalid_argument"); `field` names it. */
class InvalidRoutineError extends RoutineError {
  constructor(message, details = {}) {
    super(message, 'invalid_argument');
    this.name = 'InvalidRoutineError';
    this.field = details.field == null ? undefined : camel(details.field);
  }
}

/** No routine with that id (code "routine_not_found"). */
class RoutineNotFoundError extends RoutineError {
  constructor(message) {
    super(message, 'routine_not_found');
    this.name = 'RoutineNotFoundError';
  }
}

/** The store failed: unreachable, I/O, a migration that does not apply (code "routine_store"). */
class RoutineStoreError extends RoutineError {
  constructor(message) {
    super(message, 'routine_store');
    this.name = 'RoutineStoreError';
  }
}

const { toError, unwrap } = envelopeReader(RoutineError, {
  invalid_argument: InvalidRoutineError,
  routine_not_found: RoutineNotFoundError,
  routine_store: RoutineStoreError,
});

/** The typed error a native constructor or opener threw with an envelope's error as its message. */
function rethrow(e) {
  let error;
  try {
    error = JSON.parse(e.message);
  } catch {
    throw e;
  }
  throw toError(error);
}

/** A definition or an update as the core reads it: a plain object of fields, camelCase or snake_case. */
function fields(what, value) {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidRoutineError(`invalid ${what}: must be an object of fields, got ${value === null ? 'null' : Array.isArray(value) ? 'an array' : typeof value}`, { field: what });
  }
  return JSON.stringify(toSnake(value));
}

function actorOf(options) {
  const actor = options && options.actor;
  if (typeof actor !== 'string') throw new TypeError(`{actor} must be a string naming who makes the change, got ${actor === null ? 'null' : typeof actor}`);
  return actor;
}

function optionalString(what, v) {
  if (v != null && typeof v !== 'string') throw new TypeError(`${what} must be a string, got ${typeof v}`);
  return v ?? null;
}

/** The routine store on SQLite or PostgreSQL. */
class Routines {
  constructor(handle) {
    this._native = handle;
  }

  /** Opens the store, applying its migrations. */
  static async open(url) {
    if (typeof url !== 'string') throw new TypeError(`Routines.open: url must be a string, got ${typeof url}`);
    try {
      return new Routines(await native.openRoutines(url));
    } catch (e) {
      return rethrow(e);
    }
  }

  /**
   * Creates a routine from its fields (`agent`, `instructions`, `intervalSeconds` or `cronExpression`
   * with `timezone`, `activeWindow`, `enabled`, `parallelLimit`, `catchUp`, `dailyCap`, `model`,
   * `title`, optionally `id`); revision 1, credited to `actor`.
   */
  async create(definition, options) {
    const actor = actorOf(options);
    return toCamel(unwrap(await this._native.create(fields('routine', definition), actor)));
  }

  /** A routine with its revision history (`revisions`, oldest first). */
  async get(id) {
    return toCamel(unwrap(await this._native.get(String(id))));
  }

  /** The revisions of a routine, also after it was deleted. */
  async revisions(id) {
    return toCamel(unwrap(await this._native.revisions(String(id))));
  }

  /** Every routine, or `agent`'s, by id. */
  async list({ agent = null } = {}) {
    return toCamel(unwrap(await this._native.list(optionalString('agent', agent))));
  }

  /** Only the fields in `changes` change; `null` clears the title, a limit, the model or the window. */
  async update(id, changes, options) {
    const actor = actorOf(options);
    return toCamel(unwrap(await this._native.update(String(id), fields('update', changes), actor)));
  }

  /** Removes the routine and its run history; its revisions stay. A run in progress finishes. */
  async delete(id, options) {
    const actor = actorOf(options);
    unwrap(await this._native.delete(String(id), actor));
  }

  /** The runs of a routine (or of all), latest first. */
  async runs({ routineId = null, limit = 100 } = {}) {
    if (!Number.isInteger(limit)) throw new TypeError(`limit must be a whole number, got ${limit}`);
    return toCamel(unwrap(await this._native.runs(optionalString('routineId', routineId), limit)));
  }

  /** One run's record, or null. */
  async run(runId) {
    return toCamel(unwrap(await this._native.run(String(runId))));
  }

  /** The slots of a routine (or of all) that were not run: `reason` missed, daily_cap, window or disabled. */
  async skipped({ routineId = null } = {}) {
    return toCamel(unwrap(await this._native.skipped(optionalString('routineId', routineId))));
  }
}

/** The run's own tools (`report_outcome`, `list_my_routines`, `list_my_outcomes`, and the ledger's with a ledger). */
class RoutineRunTools {
  constructor(handle) {
    this._native = handle;
  }
  /** The tools' names, in registration order. */
  get toolNames() {
    return this._native.names();
  }
}

/** What an agent factory knows of the run: `routine`, `run`, and `tools` for `new Agent({routine: ctx})`. */
class RunContext {
  constructor(routine, run, tools) {
    this.routine = routine;
    this.run = run;
    this.tools = tools;
  }
}

function describe(v) {
  if (v === null) return 'null';
  if (typeof v === 'object') return v.constructor ? v.constructor.name : 'an object';
  return typeof v;
}

/** The factory the native runner calls: request JSON in, `{agent: token}` or `{error}` out. */
function factoryOf(agents) {
  const answer = (agent) => {
    if (!(agent instanceof core.Agent)) {
      return JSON.stringify({ error: `the agent factory returned ${describe(agent)}, not an Agent` });
    }
    return JSON.stringify({ agent: native.keepRoutineAgent(agent._nativeHandle()) });
  };
  const failed = (e) => JSON.stringify({ error: String(e && e.message ? e.message : e) });
  return (request) => {
    try {
      const r = JSON.parse(request);
      const tools = new RoutineRunTools(native.takeRoutineRunTools(r.tools));
      const out = agents[r.agent](new RunContext(toCamel(r.routine), toCamel(r.run), tools));
      if (out !== null && typeof out === 'object' && typeof out.then === 'function') return out.then(answer, failed);
      return answer(out);
    } catch (e) {
      return failed(e);
    }
  };
}

/** Fires the due slots of the routines in a store as session runs; any number may share one store. */
class Runner {
  /**
   * `agents` maps the routines' agent names to factories (`(ctx) => Agent`, or a promise of one);
   * `leaseMs` is how long a run of a runner that died stays held before it is marked lost (default
   * 60000); `pollMs` how often `runForever` ticks (default 1000). With `ledger` (an opened `Ledger`),
   * every run also gets the work ledger's tools and a `report_backlog` starts a drain.
   */
  constructor(routines, sessions, options = {}) {
    refuseUnknown('Runner', options, ['agents', 'leaseMs', 'pollMs', 'id', 'ledger']);
    const { agents, leaseMs, pollMs, id, ledger } = options;
    if (!(routines instanceof Routines)) throw new TypeError(`Runner: routines must be a Routines, got ${describe(routines)}`);
    const { Sessions } = require('./sessions.js');
    if (!(sessions instanceof Sessions)) throw new TypeError(`Runner: sessions must be a Sessions, got ${describe(sessions)}`);
    if (agents === null || typeof agents !== 'object' || !Object.values(agents).every((f) => typeof f === 'function')) {
      throw new TypeError('Runner: agents must map agent names to factories (functions taking a RunContext)');
    }
    const { Ledger } = require('./ledger.js');
    if (ledger != null && !(ledger instanceof Ledger)) throw new TypeError(`Runner: ledger must be a Ledger, got ${describe(ledger)}`);
    for (const [what, v] of [['leaseMs', leaseMs], ['pollMs', pollMs]]) {
      if (v != null && typeof v !== 'number') throw new TypeError(`Runner: ${what} must be a number of milliseconds, got ${typeof v}`);
    }
    const agentsCopy = { ...agents };
    try {
      this._native = new native.NativeRunner(
        routines._native,
        sessions._native,
        Object.keys(agentsCopy),
        factoryOf(agentsCopy),
        { leaseMs: leaseMs ?? undefined, pollMs: pollMs ?? undefined, id: optionalString('id', id) ?? undefined },
        ledger == null ? undefined : ledger._native,
      );
    } catch (e) {
      rethrow(e);
    }
  }

  /** The runner's id in run records. */
  get id() {
    return this._native.id();
  }

  /**
   * One pass at `now` (ms; the clock when omitted): renews this runner's leases, marks lost the runs
   * whose lease ran out, claims the due slots and starts their runs in the background, and finishes
   * parked runs a resume ended. `{started, lost, skipped, resumed}`.
   */
  async tick(now) {
    if (now != null && !Number.isInteger(now)) throw new TypeError(`tick: now must be whole milliseconds, got ${now}`);
    return toCamel(unwrap(await this._native.tick(now ?? null)));
  }

  /** Waits until every run this runner started has ended (finished, parked or failed). */
  async waitIdle() {
    unwrap(await this._native.waitIdle());
  }

  /** Ticks until `signal` aborts (or `stop()`); runs in progress go on. */
  async runForever(options = {}) {
    refuseUnknown('Runner.runForever', options, ['signal']);
    const { signal } = options;
    const onAbort = () => this._native.stop();
    if (signal) {
      if (signal.aborted) return;
      signal.addEventListener('abort', onAbort, { once: true });
    }
    try {
      unwrap(await this._native.runForever());
    } finally {
      if (signal) signal.removeEventListener('abort', onAbort);
    }
  }

  /** Ends `runForever`. */
  stop() {
    this._native.stop();
  }
}

module.exports = {
  Routines,
  Runner,
  RunContext,
  RoutineRunTools,
  RoutineError,
  InvalidRoutineError,
  RoutineNotFoundError,
  RoutineStoreError,
};
