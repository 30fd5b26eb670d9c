// The ES module entry point: `import { Agent, Ledger, Sessions } from "ambit-sdk"`. The package is one
// CommonJS module (index.js); this re-exports its exports by name, so both entry points hand out the
// very same classes (an error thrown by one is `instanceof` the other's). Node cannot see the names
// index.js adds with Object.assign (the ledger, memory, knowledge and sessions), so they are listed here;
// tests/esm.test.mjs fails when a name of index.js is missing from this list.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const ambit = require('./index.js');

export default ambit;
export const {
  Agent,
  McpServer,
  Model,
  OpenAIChat,
  OpenAIResponses,
  Anthropic,
  BudgetError,
  TaskContext,
  tool,
  AmbitError,
  ConfigError,
  ModelError,
  MaxTurnsError,
  OutputTruncatedError,
  OutputInvalidError,
  InvalidMessageError,
  HookFailedError,
  GuardrailTrippedError,
  HookContext,
  CancelledError,
  InternalError,
  wireName,
  Ledger,
  RoutineLedger,
  ClaimResult,
  LedgerError,
  InvalidBatchError,
  StaleTokenError,
  NotClaimedError,
  ScopePinnedError,
  InvalidLedgerArgumentError,
  Memory,
  MemoryError,
  InvalidMemoryArgumentError,
  MemoryNotFoundError,
  MemoryReadOnlyError,
  Knowledge,
  KnowledgeError,
  InvalidKnowledgeArgumentError,
  KnowledgeExistsError,
  Sessions,
  AwaitingApprovalError,
  SESSION_TOOLS,
  ToolContext,
  Credentials,
  TestModel,
  FunctionModel,
  Routines,
  Runner,
  RunContext,
  RoutineRunTools,
  RoutineError,
  InvalidRoutineError,
  RoutineNotFoundError,
  RoutineStoreError,
  telemetry,
} = ambit;
