export { workflow, waitCondition, waitIfHeader } from "./workflow.js";
export type {
  AIOptions,
  CallOptions,
  CallResult,
  Context,
  Duration,
  FailureContext,
  InvokeOptions,
  InvokeResult,
  ReceivedEvent,
  Steps,
  Trigger,
  WireTrigger,
  WaitOptions,
  WaitResult,
  Workflow,
  WorkflowOptions,
} from "./workflow.js";
export { serve, definition } from "./serve.js";
export type { ServeOptions, Served, FetchHandler, ExpressMiddleware } from "./serve.js";
export { Client, outcome, runFor, maxEventsPerRequest } from "./client.js";
export type {
  ClientOptions,
  EventResult,
  EventRun,
  FlowState,
  ListRuns,
  RunStats,
  Outcome,
  RegisteredApp,
  RegisteredWorkflow,
  Run,
  RunStatus,
  RunStep,
  SendEvent,
  Usage,
  WorkflowDefinitionJSON,
} from "./client.js";
export type * from "./controls.js";
export type { FlowControl, RunOptions } from "./stepflow.js";
export { controlNames } from "./controls.js";
export { BudgetError, isBudgetError, budgetErrorFrom, DuratonApiError, WorkflowFailure, BUDGET_EXCEEDED, AI_PRICE_UNKNOWN } from "./errors.js";
export type { AIUsage } from "./errors.js";
