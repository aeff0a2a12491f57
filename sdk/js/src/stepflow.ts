// Step-level flow control (docs/protocol.md, "Per-step flow control"), as the Go SDK's
// sdk.WithStepFlowControl: a step with its own config is first published as a plan step
// carrying Upstash-Flow-Control-Key/Value, so Duraton gates the delivery that runs it
// under that key alone; that delivery (its history ends with the plan) runs the step.
// @upstash/workflow 1.3.3 has no such option on context.run, so this drives its step
// machinery: the plan is its own plan-step shape, and the plan entry is skipped when the
// history is read (as the executor skips a parallel group's plans).

import { WorkflowNonRetryableError, type WorkflowContext } from "@upstash/workflow";

/** A step's own flow control: the steps (of any run) with the same key share its limits. */
export interface FlowControl {
  /** Letters, digits, `-`, `_` and `.`. */
  key: string;
  /** At most this many deliveries of the key in flight at once. */
  parallelism?: number;
  /** At most this many deliveries of the key started per `period`. */
  rate?: number;
  /** Seconds, or a duration such as "10s" or "1m" (default 1 s). */
  period?: number | string;
}

/** Options of `ctx.step.run`. */
export interface RunOptions {
  /** Gates this step under its own flow-control key instead of the run's. */
  flowControl?: FlowControl;
}

type HistoryStep = { stepId: number; targetStep?: number; stepName: string };
type Executor = { steps: HistoryStep[]; stepCount: number; planStepCount: number };
type LazyStep = {
  getPlanStep(concurrent: number, targetStep: number): unknown;
  getResultStep(concurrent: number, stepId: number): Promise<unknown>;
  getHeaders(a: unknown): { headers: Record<string, string> };
};

const keyPattern = /^[A-Za-z0-9._-]{1,256}$/;

/** The Upstash-Flow-Control-Value of a config; throws on one without a limit. */
export function flowControlValue(fc: FlowControl): string {
  if (!keyPattern.test(fc.key ?? "")) throw new Error(`duraton: flowControl key ${JSON.stringify(fc.key)}: 1–256 characters of [A-Za-z0-9._-]`);
  const parts: string[] = [];
  if (fc.parallelism !== undefined) parts.push(`parallelism=${positive("parallelism", fc.parallelism)}`);
  if (fc.rate !== undefined) parts.push(`rate=${positive("rate", fc.rate)}`);
  if (fc.period !== undefined) parts.push(`period=${typeof fc.period === "number" ? `${fc.period}s` : fc.period}`);
  if (fc.parallelism === undefined && fc.rate === undefined) throw new Error(`duraton: flowControl ${fc.key}: give parallelism or rate`);
  return parts.join(", ");
}

function positive(name: string, n: number): number {
  if (!Number.isInteger(n) || n < 1) throw new Error(`duraton: flowControl ${name}: a positive integer, got ${n}`);
  return n;
}

/** A step's flow-control headers in a /v2/batch entry (lower case, as the Go SDK's); throws on a bad config. */
export function flowControlHeaders(fc: FlowControl): Record<string, string> {
  const value = flowControlValue(fc);
  return { "upstash-flow-control-key": fc.key, "upstash-flow-control-value": value };
}

/** Reads a delivery's flow-control headers (undefined without a key); header reads one by its lower-case name. */
export function flowControlOf(header: (name: string) => string | null | undefined): FlowControl | undefined {
  const key = header("upstash-flow-control-key");
  if (!key) return undefined;
  const fc: FlowControl = { key };
  for (const item of (header("upstash-flow-control-value") ?? "").split(",")) {
    const [name, value] = item.split("=").map((s) => s.trim());
    if (!value) continue;
    switch (name.toLowerCase()) {
      case "parallelism":
        fc.parallelism = Number(value);
        break;
      case "rate":
      case "ratepersecond":
        fc.rate = Number(value);
        break;
      case "period":
        fc.period = value;
        break;
    }
  }
  return fc;
}

/** @upstash/workflow 1.3.3's step executor under c (what counts and reads the steps). */
export function executorOf(c: WorkflowContext<unknown>, what: string): Executor {
  const ex = (c as unknown as { executor?: Executor }).executor;
  if (!ex || !Array.isArray(ex.steps) || typeof ex.stepCount !== "number" || typeof ex.planStepCount !== "number") {
    throw new Error(`duraton: ${what} needs the step executor of @upstash/workflow 1.3.3`);
  }
  return ex;
}

/**
 * A step with its own flow control in a parallel group (Promise.all): refused, by both
 * runtimes, as the run's failure. Its plan would be one of the group's, which carry no
 * headers of their own, and the Go SDK has no such step either.
 */
export function flowInGroup(name: string): Error {
  return new WorkflowNonRetryableError(`duraton: step ${name}: flowControl needs a step of its own, not one of a parallel group (Promise.all)`);
}

/** ctx.step.run with a flowControl option. */
export function runUnder<T>(c: WorkflowContext<unknown>, name: string, fn: () => T | Promise<T>, fc: FlowControl): Promise<T> {
  const value = flowControlValue(fc);
  const ex = executorOf(c, `step ${name}: flowControl`);
  const id = ex.stepCount + 1; // the id the step gets (the executor counts it when it is added)
  if (ex.steps.some((s) => s.stepId === 0 && s.targetStep === id)) {
    // Planned already: this delivery runs it (the plan is the history's last entry) or
    // replays its result (the entry after the plan). Either way the plan is skipped.
    ex.planStepCount += 1;
    return c.run(name, fn) as Promise<T>;
  }
  const view = Object.create(c, {
    addStep: {
      value: (s: LazyStep) => {
        // The executor asks a single step for its result (here: the plan) and a parallel
        // group's steps for their plans, or (concurrent > 1) for their results.
        const plan = s.getPlanStep.bind(s);
        let single = false;
        s.getPlanStep = (concurrent, targetStep) => {
          if (!single) throw flowInGroup(name);
          return plan(concurrent, targetStep);
        };
        s.getResultStep = async (concurrent, stepId) => {
          if (concurrent !== 1) throw flowInGroup(name);
          single = true;
          try {
            return s.getPlanStep(concurrent, stepId);
          } finally {
            single = false;
          }
        };
        const headers = s.getHeaders.bind(s);
        s.getHeaders = (a) => {
          const h = headers(a);
          h.headers["Upstash-Flow-Control-Key"] = fc.key;
          h.headers["Upstash-Flow-Control-Value"] = value;
          return h;
        };
        return (c as unknown as { addStep(s: LazyStep): Promise<unknown> }).addStep(s);
      },
    },
  }) as WorkflowContext<unknown>;
  return c.run.call(view, name, fn) as Promise<T>;
}
