// workflow({ name, triggers, retries, ...controls, handler }): a native workflow whose
// handler runs on @upstash/workflow's context. Each ctx.step.* is one call of that
// context, so the step protocol is @upstash/workflow's own.

import { WorkflowNonRetryableError, type WorkflowContext } from "@upstash/workflow";
import type { CancelOn, Controls } from "./controls.js";
import { BudgetError, budgetErrorFrom, budgetErrorFromMessage, WorkflowFailure } from "./errors.js";
import type { SendEvent } from "./client.js";
import { sendEventStep, type EventSender } from "./sendevent.js";
import { flowControlOf, runUnder, type FlowControl, type RunOptions } from "./stepflow.js";

/** One event as the run received it. */
export interface ReceivedEvent<TData = any> {
  id: string;
  name: string;
  data: TData;
  /** Receive time, Unix milliseconds. */
  ts: number;
}

/** A step duration as @upstash/workflow takes it: seconds, or "10s", "5m", "2h", "1d". */
export type Duration = number | `${bigint}${"s" | "m" | "h" | "d"}`;

/** What waitForEvent resumes with. */
export interface WaitResult<T = unknown> {
  /** True when the timeout passed first (then `data` is undefined). */
  timeout: boolean;
  data: T | undefined;
}

/** How waitForEvent waits. */
export interface WaitOptions {
  /** Seconds or a duration string (default 7d). */
  timeout?: Duration;
  /**
   * A dotted path ("data.orderId"): only an event whose value there equals this run's
   * triggering event's wakes the wait (the server indexes it).
   */
  match?: string;
  /**
   * A CEL condition over `event` (this run's triggering event) and `async` (the incoming
   * event), e.g. `async.data.amount > 100`: only an event for which it holds wakes the
   * wait. With `match`, both must hold.
   */
  if?: string;
}

/** The answer of a call or AI step (Duraton makes the request; a non-2xx status does not throw). */
export interface CallResult<T = unknown> {
  status: number;
  body: T;
  header: Record<string, string[]>;
}

export interface CallOptions {
  url: string;
  method?: "GET" | "POST" | "PUT" | "DELETE" | "PATCH" | "HEAD" | "OPTIONS";
  /** A string is sent as it is; anything else as JSON (with content-type application/json unless given). */
  body?: unknown;
  headers?: Record<string, string>;
  retries?: number;
  /** Seconds, or a duration string. */
  timeout?: Duration;
}

/** An OpenAI-compatible request, metered by Duraton (cost, tokens, `cap`). */
export interface AIOptions {
  /** The provider's base URL (default https://api.openai.com); `/v1/chat/completions` is appended. */
  baseURL?: string;
  /** The provider's API key (default: $OPENAI_API_KEY). */
  token?: string;
  /** The request body; `max_tokens` bounds what the call may add to the run's spend. */
  body: { model: string; messages: { role: string; content: unknown }[]; max_tokens?: number; [k: string]: unknown };
  headers?: Record<string, string>;
  retries?: number;
  timeout?: Duration;
}

export interface InvokeOptions {
  /** A workflow() served by the same serve() (same base URL), or the URL of any workflow endpoint (a Go one, say). */
  workflow: Workflow<any> | string;
  body?: unknown;
  headers?: Record<string, string>;
  retries?: number;
}

export interface InvokeResult<T = unknown> {
  body: T | undefined;
  isFailed: boolean;
  isCanceled: boolean;
}

export interface Steps {
  /**
   * Runs fn once; its result is recorded and replayed on later deliveries. With
   * `{ flowControl }` the step runs in a delivery of its own, gated under that key alone
   * (the steps of every run sharing the key share its limits).
   */
  run<T>(name: string, fn: () => T | Promise<T>, opts?: RunOptions): Promise<T>;
  sleep(name: string, duration: Duration): Promise<void>;
  sleepUntil(name: string, when: Date | number | string): Promise<void>;
  /**
   * Waits for an event named `event` (sent with POST /events or notify), up to `timeout`
   * (default 7d); with `match` or `if`, only for an event that satisfies them. A condition
   * that does not compile fails the step (the server answers 400 naming it).
   */
  waitForEvent<T = unknown>(name: string, event: string, opts?: WaitOptions): Promise<WaitResult<T>>;
  /** Starts another workflow as a child run and resumes with how it ended. */
  invoke<T = unknown>(name: string, opts: InvokeOptions): Promise<InvokeResult<T>>;
  /** An outbound HTTP request made by Duraton; the run holds no slot while it waits. */
  call<T = unknown>(name: string, opts: CallOptions): Promise<CallResult<T>>;
  /**
   * An AI step: a chat completion that Duraton makes and meters. A call refused by the
   * run's `cap` fails the run with a BudgetError (the failure handler receives it).
   */
  ai<T = unknown>(name: string, opts: AIOptions): Promise<CallResult<T>>;
  /**
   * Sends events (POST /events) as a recorded step and returns their ids: a replay returns
   * the recorded ids and sends nothing again.
   */
  sendEvent(name: string, events: SendEvent | SendEvent[]): Promise<string[]>;
}

/** What a handler receives. */
export interface Context<TData = any> {
  /** The event that started the run (for a batch the first, for a debounce the last). */
  event: ReceivedEvent<TData>;
  /** Every event of the run in receive order (one for an unbatched run). */
  events: ReceivedEvent<TData>[];
  runId: string;
  /** The workflow's name and its app. */
  workflow: string;
  app: string;
  /** The request headers of this delivery. */
  headers: Headers;
  /** The flow control this delivery was admitted under (the run's, or a step's own); undefined without one. */
  flowControl: FlowControl | undefined;
  step: Steps;
  /** The @upstash/workflow context underneath (parallel steps, webhooks, notify, cancel, ...). */
  upstash: WorkflowContext<unknown>;
}

/** What a failure handler receives once a run has failed. */
export interface FailureContext<TData = any> {
  event: ReceivedEvent<TData>;
  events: ReceivedEvent<TData>[];
  runId: string;
  workflow: string;
  app: string;
  /** A BudgetError when the run's `cap` stopped an AI step; a WorkflowFailure otherwise. */
  error: BudgetError | WorkflowFailure;
}

/**
 * A trigger: an event name (or `{ event }`, as on the wire), or a cron schedule: five
 * fields read in the IANA zone `tz` (default UTC); each fire's event is `duraton/cron`
 * with data `{ cron, tz?, scheduledAt, late? }`.
 */
export type Trigger = string | { event: string } | { cron: string; tz?: string };

/** A trigger as it is registered. */
export type WireTrigger = { event: string } | { cron: string; tz?: string };

export interface WorkflowOptions<TData = any, TResult = unknown> extends Controls {
  /** 1–128 chars of [A-Za-z0-9._:-], unique in the project. */
  name: string;
  /** Event names that start a run (default: one event named like the workflow). */
  triggers?: Trigger[];
  /** Retries of each delivery, 0–100 (server default 3). */
  retries?: number;
  /** Events that cancel the workflow's live runs they match (at most 8). */
  cancelOn?: CancelOn[];
  handler: (ctx: Context<TData>) => Promise<TResult> | TResult;
  /** Called once when a run has failed (retries exhausted, or a non-retryable error). */
  onFailure?: (f: FailureContext<TData>) => Promise<void> | void;
}

/** A workflow() definition: data for the server plus the code that runs it. */
export interface Workflow<TData = any, TResult = unknown> extends Readonly<WorkflowOptions<TData, TResult>> {
  readonly triggers: WireTrigger[];
  readonly kind: "duraton.workflow";
}

const namePattern = /^[A-Za-z0-9._:-]{1,128}$/;

/** Defines a native workflow. Nothing is registered until serve() (or registerApp()). */
export function workflow<TData = any, TResult = unknown>(opts: WorkflowOptions<TData, TResult>): Workflow<TData, TResult> {
  if (!namePattern.test(opts.name ?? "")) {
    throw new Error(`duraton: workflow name ${JSON.stringify(opts.name)}: 1–128 characters of [A-Za-z0-9._:-]`);
  }
  if (typeof opts.handler !== "function") throw new Error(`duraton: workflow ${opts.name}: handler is not a function`);
  const triggers = (opts.triggers ?? [opts.name]).map((t): WireTrigger =>
    typeof t === "string" ? { event: t } : "cron" in t ? (t.tz === undefined ? { cron: t.cron } : { cron: t.cron, tz: t.tz }) : { event: t.event },
  );
  if (triggers.length === 0) throw new Error(`duraton: workflow ${opts.name}: at least one trigger`);
  return Object.freeze({ ...opts, triggers, kind: "duraton.workflow" as const });
}

/** The payload of a native run's deliveries (docs/protocol.md, "Native workflows"). */
interface NativePayload {
  id: string;
  name: string;
  data: unknown;
  ts: number;
  events: ReceivedEvent[];
}

function isNativePayload(p: unknown): p is NativePayload {
  const v = p as NativePayload;
  return typeof v === "object" && v !== null && typeof v.id === "string" && typeof v.name === "string" && typeof v.ts === "number" && Array.isArray(v.events);
}

/** The event(s) of a run: a native run's payload, or (invoked or triggered) its body as the data of an unnamed event. */
export function eventsOf(payload: unknown, createdAt: number): { event: ReceivedEvent; events: ReceivedEvent[] } {
  if (isNativePayload(payload)) {
    const { events, ...first } = payload;
    return { event: first, events };
  }
  const event = { id: "", name: "", data: payload, ts: createdAt || Date.now() };
  return { event, events: [event] };
}

/** Builds ctx for one delivery from the @upstash/workflow context. */
export function makeContext(c: WorkflowContext<unknown>, wf: Workflow, app: string, siblingURL: (name: string) => string, client?: EventSender): Context {
  const { event, events } = eventsOf(c.requestPayload, c.workflowRunCreatedAt);
  const step: Steps = {
    sendEvent: (name, evs) => sendEventStep(c, client, name, evs),
    run: (name, fn, opts) => (opts?.flowControl ? runUnder(c, name, fn, opts.flowControl) : c.run(name, fn)) as Promise<never>,
    sleep: (name, d) => c.sleep(name, d),
    sleepUntil: (name, when) => c.sleepUntil(name, when),
    async waitForEvent(name, ev, opts = {}) {
      const cond = waitCondition(opts.match, opts.if);
      const wc = cond === "" ? c : withWaitCondition(c, cond);
      const r = await c.waitForEvent.call(wc, name, ev, { timeout: opts.timeout ?? "7d" });
      return { timeout: r.timeout, data: r.timeout ? undefined : (r.eventData as never) };
    },
    invoke: (name, opts) => invoke(c, name, opts, siblingURL) as Promise<never>,
    call: (name, opts) =>
      c.call(name, {
        url: opts.url,
        method: opts.method ?? "GET",
        // A non-string body is sent as JSON.
        body: opts.body === undefined || typeof opts.body === "string" ? opts.body : JSON.stringify(opts.body),
        headers: opts.body === undefined || typeof opts.body === "string" ? opts.headers : { "content-type": "application/json", ...opts.headers },
        retries: opts.retries,
        timeout: opts.timeout,
      } as never) as Promise<never>,
    async ai(name, opts) {
      const token = opts.token ?? processEnvKey("OPENAI_API_KEY");
      if (!token) throw new Error(`duraton: ai step ${name}: no token (pass { token } or set OPENAI_API_KEY)`);
      const r = await c.api.openai.call(name, {
        token,
        baseURL: opts.baseURL,
        operation: "chat.completions.create",
        body: opts.body as never,
        headers: opts.headers,
        retries: opts.retries,
        timeout: opts.timeout,
      });
      // Refused by the cap but handed back as an answer: the run must still fail.
      const budget = budgetErrorFrom(r.status, r.body);
      if (budget) throw budget;
      return r as never;
    },
  };
  return {
    event,
    events,
    runId: c.workflowRunId,
    workflow: c.headers.get("duraton-workflow") ?? wf.name,
    app: c.headers.get("duraton-app") ?? app,
    headers: c.headers,
    flowControl: flowControlOf((k) => c.headers.get(k)),
    step,
    upstash: c,
  };
}

/** The header that carries a wait's condition (sdk/wire HeaderWaitIf). */
export const waitIfHeader = "Duraton-Wait-If";

/** The Duraton-Wait-If value of a match and an if ("" for none), on one line. */
export function waitCondition(match?: string, cond?: string): string {
  const c = (cond ?? "").replace(/\r\n|\n|\r/g, " ");
  const m = match ? `async.${match} == event.${match}` : "";
  if (m && c) return `(${m}) && (${c})`;
  return m || c;
}

/**
 * The context seen by one waitForEvent: its wait step sends the condition in the
 * Duraton-Wait-If header of its POST /v2/wait request (the step's submit, nothing else).
 */
function withWaitCondition(c: WorkflowContext<unknown>, cond: string): WorkflowContext<unknown> {
  type Step = { submitStep(a: { headers?: Record<string, string> }): unknown };
  return Object.create(c, {
    addStep: {
      value: (s: Step) => {
        const { submitStep } = s;
        if (typeof submitStep !== "function") throw new Error("duraton: waitForEvent with match or if needs the wait step of @upstash/workflow 1.3.3");
        s.submitStep = async (a) => {
          try {
            return await submitStep.call(s, { ...a, headers: { ...a.headers, [waitIfHeader]: cond } });
          } catch (err) {
            // @upstash/workflow reads any 400 of a step's submit as "the run was cancelled"
            // and exits quietly, which would leave the run waiting: a refused condition
            // fails the run instead.
            const e = err as { status?: number; message?: string };
            if (e?.status === 400 && /invalid wait condition/.test(e.message ?? "")) throw new WorkflowNonRetryableError(e.message ?? "invalid wait condition");
            throw err;
          }
        };
        return (c as unknown as { addStep(s: Step): unknown }).addStep(s);
      },
    },
  }) as WorkflowContext<unknown>;
}

function processEnvKey(k: string): string | undefined {
  return (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[k];
}

/**
 * invoke through @upstash/workflow's own invoke step. The SDK derives the child's URL
 * from the parent's by replacing its last path segment with the child's workflowId, so a
 * sibling of the same serve() needs nothing more. For any other URL (a Go workflow, say)
 * the step's headers and its publish are built against that URL instead, while its body
 * keeps the parent's URL, which is where the child's result comes back.
 */
async function invoke(c: WorkflowContext<unknown>, name: string, opts: InvokeOptions, siblingURL: (name: string) => string) {
  const settings = { body: opts.body, headers: opts.headers, retries: opts.retries };
  let target: string;
  try {
    target = typeof opts.workflow === "string" ? opts.workflow : siblingURL(opts.workflow.name);
  } catch (err) {
    // Failed as a step, so that @upstash/workflow fails the run and calls its failure
    // function (an error thrown before any step reads as an unauthenticated request).
    const msg = err instanceof Error ? err.message : String(err);
    return c.run(name, () => {
      throw new WorkflowNonRetryableError(msg);
    });
  }
  const parentURL = c.url;
  const lastSegment = /[^/]+$/.exec(target)?.[0];
  if (target.replace(/[^/]+$/, "") === parentURL.replace(/[^/]+$/, "") && lastSegment) {
    return c.invoke(name, { ...settings, workflow: { workflowId: lastSegment, routeFunction: noRoute, options: {} } as never });
  }
  type Step = {
    getHeaders(a: { context: WorkflowContext<unknown> }): unknown;
    submitStep(a: { context: WorkflowContext<unknown> }): unknown;
  };
  const at = (ctx: WorkflowContext<unknown>) => Object.create(ctx, { url: { value: target } }) as WorkflowContext<unknown>;
  const view = Object.create(c, {
    addStep: {
      value: (s: Step) => {
        const { getHeaders, submitStep } = s;
        if (typeof getHeaders !== "function" || typeof submitStep !== "function") {
          throw new Error(`duraton: invoke ${name}: invoking by URL needs the invoke step of @upstash/workflow 1.3.3`);
        }
        s.getHeaders = (a) => getHeaders.call(s, { ...a, context: at(a.context) });
        s.submitStep = (a) => submitStep.call(s, { ...a, context: at(a.context) });
        return (c as unknown as { addStep(s: Step): unknown }).addStep(s);
      },
    },
  }) as WorkflowContext<unknown>;
  // The step replaces the last segment of its context's URL (here: target) with this id.
  const workflowId = (lastSegment ?? "").replaceAll("$", "$$$$");
  return c.invoke.call(view, name, { ...settings, workflow: { workflowId: workflowId || "_", routeFunction: noRoute, options: {} } as never });
}

const noRoute = async () => {
  throw new Error("duraton: an invoked workflow runs at its own URL");
};

/**
 * Maps a failed run's last answer to the error a failure handler receives: message is
 * what @upstash/workflow passes (the answer's `message`), raw the whole answer when the
 * failure callback carried it.
 */
export function failureError(status: number, message: string, raw?: string): BudgetError | WorkflowFailure {
  return budgetErrorFrom(status, raw) ?? budgetErrorFrom(status, message) ?? budgetErrorFromMessage(status, message) ?? new WorkflowFailure(status, message);
}
