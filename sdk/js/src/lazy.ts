// The step kinds of the inline runtime: how each is named in the history, how a recorded
// one is read back (exactly as @upstash/workflow 1.3.3 reads it, so a run can move
// between the two runtimes), and what a new one publishes.

import type { RecordedStep } from "./history.js";
import { decodeBase64 } from "./history.js";

/** One step call of a delivery, before the executor knows whether it is recorded. */
export interface Lazy {
  readonly name: string;
  readonly type: string;
  /** The value a recorded step resumes with. */
  parse(s: RecordedStep): unknown;
  /** The plan step of a parallel group (undefined: this kind is left to @upstash/workflow in a group). */
  plan?(concurrent: number, target: number): { body: Record<string, unknown>; headers?: Record<string, string> };
}

export class RunLazy implements Lazy {
  readonly type: string = "Run";
  /**
   * fn gets the step's id (sendEvent's dedupeIds are made of it). flow: the step's own
   * flow-control headers (Upstash-Flow-Control-Key/Value, lower case as in /v2/batch):
   * the step is planned first and runs in the delivery the plan produces.
   */
  constructor(
    readonly name: string,
    readonly fn: (stepId: number) => unknown,
    readonly flow?: Record<string, string>,
  ) {}
  parse(s: RecordedStep): unknown {
    return s.out === undefined ? undefined : parseOut(s);
  }
  /** The plan of a single step with its own flow control (docs/protocol.md, "Per-step flow control"). */
  flowPlan(targetStep: number): Record<string, unknown> {
    return { stepId: 0, stepName: this.name, stepType: this.type, concurrent: 1, targetStep };
  }
  plan(concurrent: number, targetStep: number) {
    return { body: { stepId: 0, stepName: this.name, stepType: this.type, concurrent, targetStep } };
  }
}

export class SleepLazy implements Lazy {
  readonly type = "SleepFor";
  constructor(
    readonly name: string,
    readonly sleepFor: number | string,
  ) {}
  parse(s: RecordedStep): unknown {
    return s.out === undefined ? undefined : parseOut(s);
  }
  /** The delay header of a message that sleeps this long. */
  delay(): Record<string, string> {
    return { "upstash-delay": typeof this.sleepFor === "number" ? `${this.sleepFor}s` : this.sleepFor };
  }
  plan(concurrent: number, targetStep: number) {
    return { body: { stepId: 0, stepName: this.name, stepType: this.type, sleepFor: this.sleepFor, concurrent, targetStep }, headers: this.delay() };
  }
}

export class SleepUntilLazy implements Lazy {
  readonly type = "SleepUntil";
  constructor(
    readonly name: string,
    readonly sleepUntil: number,
  ) {}
  parse(): unknown {
    return undefined;
  }
  notBefore(): Record<string, string> {
    return { "upstash-not-before": String(this.sleepUntil) };
  }
  plan(concurrent: number, targetStep: number) {
    return { body: { stepId: 0, stepName: this.name, stepType: this.type, sleepUntil: this.sleepUntil, concurrent, targetStep }, headers: this.notBefore() };
  }
}

export class WaitLazy implements Lazy {
  readonly type = "Wait";
  /** cond: the wait's Duraton-Wait-If value (workflow.ts waitCondition; "" for none). */
  constructor(
    readonly name: string,
    readonly eventId: string,
    readonly timeout: string,
    readonly cond = "",
  ) {}
  parse(s: RecordedStep): { eventData: unknown; timeout: boolean } {
    const out = typeof s.out === "string" && s.out ? s.out : undefined;
    return { eventData: out ? tryParsing(decodeBase64(out)) : undefined, timeout: s.waitTimeout ?? false };
  }
}

export class InvokeLazy implements Lazy {
  readonly type = "Invoke";
  constructor(
    readonly name: string,
    readonly target: string,
    readonly opts: { body?: unknown; headers?: Record<string, string>; retries?: number },
  ) {}
  parse(s: RecordedStep): unknown {
    const r = JSON.parse(outString(s, this.type)) as Record<string, unknown>;
    return { ...r, body: tryParsing(r.body) };
  }
}

/** A call (and an AI call): recorded ones are read here; a new one is left to @upstash/workflow. */
export class CallLazy implements Lazy {
  readonly type = "Call";
  constructor(readonly name: string) {}
  parse(s: RecordedStep): unknown {
    const out = outString(s, this.type);
    const { header, status, body } = JSON.parse(out) as { header: Record<string, string[]>; status: number; body: unknown };
    if (!isText(new Headers(header as unknown as Record<string, string>).get("content-type"))) return { header, status, body };
    // @upstash/workflow re-reads the out's characters as UTF-8 bytes (the callback's body
    // was decoded with atob); the same here, for the same value.
    const bytes = Uint8Array.from(out, (c) => c.charCodeAt(0));
    const again = JSON.parse(new TextDecoder().decode(bytes)) as { body: unknown };
    return { status, header, body: tryParsing(again.body) };
  }
}

const textTypes = ["application/json", "application/xml", "application/javascript", "application/x-www-form-urlencoded", "application/xhtml+xml", "application/ld+json", "application/rss+xml", "application/atom+xml"];

function isText(ct: string | null): boolean {
  if (!ct) return false;
  return textTypes.some((t) => ct.includes(t)) || ct.startsWith("text/");
}

/** A step's out: a string holding JSON (an object is taken as it is, as @upstash/workflow does with a warning). */
function parseOut(s: RecordedStep): unknown {
  if (typeof s.out === "object") return s.out;
  if (typeof s.out !== "string") throw new Error(`duraton: step ${s.stepName}: out is a ${typeof s.out}, not a string`);
  return tryParsing(s.out);
}

function outString(s: RecordedStep, type: string): string {
  if (typeof s.out !== "string") throw new Error(`duraton: ${type} step ${s.stepName}: no recorded out`);
  return s.out;
}

export function tryParsing(v: unknown): unknown {
  if (typeof v !== "string") return v;
  try {
    return JSON.parse(v);
  } catch {
    return v;
  }
}
