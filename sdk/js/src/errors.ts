import { WorkflowNonRetryableError } from "@upstash/workflow";

/** A Duraton API request answered with an error status ({"error": "..."}). */
export class DuratonApiError extends Error {
  readonly status: number;
  readonly body: string;
  constructor(method: string, path: string, status: number, body: string) {
    super(`${method} ${path}: HTTP ${status}: ${apiMessage(body)}`);
    this.name = "DuratonApiError";
    this.status = status;
    this.body = body;
  }
}

function apiMessage(body: string): string {
  try {
    const v = JSON.parse(body) as { error?: unknown };
    if (typeof v?.error === "string") return v.error;
  } catch {
    /* not JSON: show it as it is */
  }
  return body.length > 500 ? body.slice(0, 500) + "…" : body;
}

/** The code Duraton gives an AI step refused by the run's `cap`. */
export const BUDGET_EXCEEDED = "budget_exceeded";
/** The code of an AI step refused because a `maxCost` cap cannot price its model. */
export const AI_PRICE_UNKNOWN = "ai_price_unknown";

const budgetCodes: readonly string[] = [BUDGET_EXCEEDED, AI_PRICE_UNKNOWN];

/** Tokens and USD cost, as Duraton reports AI usage. */
export interface AIUsage {
  inputTokens: number;
  outputTokens: number;
  tokens: number;
  cost: number;
}

/**
 * An AI step was refused because it would cross the run's `cap` (HTTP 402,
 * `"code": "budget_exceeded"`). It is non-retryable: the run fails, and the failure
 * handler receives it. `POST /runs/{id}/replay` with a raised cap resumes the run.
 */
export class BudgetError extends WorkflowNonRetryableError {
  readonly status: number;
  /** "budget_exceeded", or "ai_price_unknown" (a maxCost cap and a model without a price). */
  readonly code: string;
  /** The run's spend when the step was stopped, and what the call could have added. */
  readonly spent?: AIUsage;
  readonly projected?: AIUsage;
  /** The cap in force. */
  readonly cap?: { maxCost?: number; maxTokens?: number };
  /** The answer's body, parsed (empty when only its message was known). */
  readonly details: Record<string, unknown>;
  constructor(message: string, status = 402, details: Record<string, unknown> = {}) {
    super(message);
    this.name = "BudgetError";
    this.status = status;
    this.details = details;
    this.code = typeof details.code === "string" && budgetCodes.includes(details.code) ? details.code : (budgetCodes.find((c) => message.startsWith(c)) ?? BUDGET_EXCEEDED);
    if (isObject(details.spent)) this.spent = details.spent as unknown as AIUsage;
    if (isObject(details.projected)) this.projected = details.projected as unknown as AIUsage;
    if (isObject(details.cap)) this.cap = details.cap as BudgetError["cap"];
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Reports whether v is a BudgetError (also across copies of this package). */
export function isBudgetError(v: unknown): v is BudgetError {
  return v instanceof BudgetError || (isObject(v) && v.name === "BudgetError" && typeof v.code === "string" && budgetCodes.includes(v.code));
}

/**
 * budgetErrorFrom returns the BudgetError an answer (status and body) describes, or
 * undefined: status 402 and a JSON body whose `code` (at the top level or under
 * `error`) is budget_exceeded. A body that is a JSON string holding that JSON is read too
 * (a failure callback may carry the step's answer encoded once more).
 */
export function budgetErrorFrom(status: number, body: unknown): BudgetError | undefined {
  if (status !== 402) return undefined;
  const obj = parseObject(body);
  if (!obj) return undefined;
  const nested = isObject(obj.error) ? obj.error : undefined;
  const code = budgetCodes.find((c) => obj.code === c || nested?.code === c);
  if (!code) return undefined;
  const msg = typeof obj.error === "string" ? obj.error : typeof obj.message === "string" ? obj.message : typeof nested?.message === "string" ? nested.message : "AI budget exceeded";
  return new BudgetError(msg, status, nested && obj.code === undefined ? { ...nested, code } : obj);
}

/**
 * budgetErrorFromMessage reads a budget stop from the failure message alone (what
 * @upstash/workflow passes its failure function): status 402 and a message that starts
 * with the code, "budget_exceeded: ...".
 */
export function budgetErrorFromMessage(status: number, message: string): BudgetError | undefined {
  if (status !== 402 || !budgetCodes.some((c) => message.startsWith(c + ":") || message === c)) return undefined;
  return new BudgetError(message, status);
}

function parseObject(body: unknown, depth = 0): Record<string, unknown> | undefined {
  if (isObject(body)) return body;
  if (typeof body !== "string" || depth > 2) return undefined;
  try {
    return parseObject(JSON.parse(body), depth + 1);
  } catch {
    return undefined;
  }
}

/** A run that failed for another reason than its AI budget: the endpoint's last answer. */
export class WorkflowFailure extends Error {
  readonly status: number;
  readonly body: string;
  constructor(status: number, body: string) {
    super(`workflow failed: HTTP ${status}: ${body.length > 500 ? body.slice(0, 500) + "…" : body}`);
    this.name = "WorkflowFailure";
    this.status = status;
    this.body = body;
  }
}
