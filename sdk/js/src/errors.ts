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

/**
 * An AI step was refused because it would cross the run's `cap` (HTTP 402,
 * `"code": "budget_exceeded"`). It is non-retryable: the run fails, and the failure
 * handler receives it. `POST /runs/{id}/replay` with a raised cap resumes the run.
 */
export class BudgetError extends WorkflowNonRetryableError {
  readonly status: number;
  readonly code = BUDGET_EXCEEDED;
  /** The answer's body, parsed. */
  readonly details: Record<string, unknown>;
  constructor(message: string, status = 402, details: Record<string, unknown> = {}) {
    super(message);
    this.name = "BudgetError";
    this.status = status;
    this.details = details;
  }
}

/** Reports whether v is a BudgetError (also across copies of this package). */
export function isBudgetError(v: unknown): v is BudgetError {
  return v instanceof BudgetError || (typeof v === "object" && v !== null && (v as { name?: unknown }).name === "BudgetError" && (v as { code?: unknown }).code === BUDGET_EXCEEDED);
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
  const nested = typeof obj.error === "object" && obj.error !== null ? (obj.error as Record<string, unknown>) : undefined;
  if (obj.code !== BUDGET_EXCEEDED && nested?.code !== BUDGET_EXCEEDED) return undefined;
  const msg = typeof obj.error === "string" ? obj.error : typeof obj.message === "string" ? obj.message : typeof nested?.message === "string" ? nested.message : "AI budget exceeded";
  return new BudgetError(msg, status, obj);
}

function parseObject(body: unknown, depth = 0): Record<string, unknown> | undefined {
  if (typeof body === "object" && body !== null && !Array.isArray(body)) return body as Record<string, unknown>;
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
