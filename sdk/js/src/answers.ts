// What an inline-mode delivery answers, and the few API calls it makes, in the shapes of
// @upstash/workflow 1.3.3 (the same status codes and JSON bodies, so Duraton logs and a
// failure handler see the same thing whichever path answered).

import { DuratonApiError } from "./errors.js";

/** An answer to a delivery, written by the Fetch or the Node adapter. */
export interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** The protocol version every answer names (Upstash-Workflow-Sdk-Version). */
export const protocolVersion = "1";
/** The feature set step messages carry (as @upstash/workflow and the Go SDK send it). */
export const featureSet = "LazyFetch,InitialBody,WF_DetectTrigger,WF_TriggerOnConfig";

const baseHeaders = (): Record<string, string> => ({ "content-type": "application/json", "upstash-workflow-sdk-version": protocolVersion });

/** A delivery that did its work: {workflowRunId, finishCondition}. */
export function finished(runId: string, condition: string): Answer {
  return { status: 200, headers: baseHeaders(), body: `{"workflowRunId":${JSON.stringify(runId)},"finishCondition":${JSON.stringify(condition)}}` };
}

/** An inline answer: the steps' /v2/batch array, or the run's end (with the steps' byte length first). */
export function inlineAnswer(kind: "steps" | "end", body: string, stepsBytes = 0): Answer {
  const headers = baseHeaders();
  headers["duraton-inline"] = kind;
  if (stepsBytes > 0) headers["duraton-inline-steps"] = String(stepsBytes);
  return { status: 200, headers, body };
}

/** The constructor names of v's prototype chain (@upstash/workflow's isInstanceOf: it works across copies of a package). */
function isA(v: unknown, name: string): boolean {
  for (let p = v as object | null; p; p = Object.getPrototypeOf(p) as object | null) {
    if ((p as { constructor?: { name?: string } }).constructor?.name === name) return true;
  }
  return false;
}

/** {error, message, stack} as @upstash/workflow formats a route's error. */
function formatError(err: unknown): { error: string; message: string; stack?: string } {
  if (err instanceof Error) return { error: err.name, message: err.message, stack: err.stack };
  return { error: "Error", message: `An error occured while executing workflow: '${typeof err === "string" ? err : JSON.stringify(err)}'` };
}

/**
 * A route's (or an API call's) error: 489 non-retryable (also for a limit Duraton refused
 * with 412), 429 with Retry-After, 200 when Duraton says the run is over (400), else 500.
 */
export function failed(runId: string, err: unknown): Answer {
  const headers = baseHeaders();
  if (err instanceof DuratonApiError && err.status === 400) return finished(runId, "workflow-already-ended");
  if (isA(err, "WorkflowNonRetryableError") || (err instanceof DuratonApiError && err.status === 412)) {
    headers["upstash-nonretryable-error"] = "true";
    return { status: 489, headers, body: JSON.stringify(formatError(err)) };
  }
  if (isA(err, "WorkflowRetryAfterError")) {
    headers["retry-after"] = String((err as { retryAfter?: unknown }).retryAfter ?? 1);
    return { status: 429, headers, body: JSON.stringify(formatError(err)) };
  }
  const step = (err as { errorStepName?: unknown } | null)?.errorStepName;
  if (typeof step === "string") headers["upstash-error-step-name"] = step.replace(/[\u0000-\u001F\u007F]+/g, " ").trim();
  return { status: 500, headers, body: JSON.stringify(formatError(err)) };
}

/** Names the step an error came from (the 500 answer's Upstash-Error-Step-Name). */
export function attachStepName(err: unknown, step: string): void {
  if (typeof err !== "object" || err === null || "errorStepName" in err || !Object.isExtensible(err)) return;
  try {
    (err as { errorStepName?: string }).errorStepName = step;
  } catch {
    /* a frozen error keeps no name */
  }
}

/** Duraton's API, for the calls a step cannot answer inline (a wait, an invoke, an answer over the offered size). */
export interface Api {
  call(method: string, path: string, headers: Record<string, string>, body?: string): Promise<void>;
}

/** The API at url with token; each request bounded by timeoutMs. */
export function apiAt(url: string, token: string | undefined, timeoutMs = 30_000): Api {
  return {
    async call(method, path, headers, body) {
      const h: Record<string, string> = { ...headers };
      if (token) h.authorization = `Bearer ${token}`;
      const res = await fetch(url + path, { method, headers: h, body, signal: AbortSignal.timeout(timeoutMs) });
      const text = await res.text();
      if (!res.ok) throw new DuratonApiError(method, path, res.status, text);
    },
  };
}
