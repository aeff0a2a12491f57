// The native API client: register an app's workflows, send events, read runs
// (docs/protocol.md, "Native workflows"). Reads DURATON_URL / DURATON_TOKEN, else QSTASH_URL /
// QSTASH_TOKEN.

import type { CancelOn, Controls } from "./controls.js";
import { DuratonApiError } from "./errors.js";

export type Env = Record<string, string | undefined>;

export interface ClientOptions {
  /** The Duraton server, e.g. http://127.0.0.1:8080 (default: $DURATON_URL, else $QSTASH_URL). */
  url?: string;
  /** The project's API token (default: $DURATON_TOKEN, else $QSTASH_TOKEN). */
  token?: string;
  /** Where the defaults are read from (default: process.env). */
  env?: Env;
  /** Bounds each request (default 30 s). */
  timeoutMs?: number;
}

/** A workflow definition on the wire: name, url, triggers, retries and the flat controls. */
export interface WorkflowDefinitionJSON extends Controls {
  name: string;
  url: string;
  triggers: ({ event: string } | { cron: string; tz?: string })[];
  retries?: number;
  cancelOn?: CancelOn[];
}

/** A definition as the server stored it, with the controls on `flowControl`. */
export interface RegisteredWorkflow {
  app: string;
  name: string;
  url: string;
  triggers: ({ event: string } | { cron: string; tz?: string })[];
  retries: number;
  flowControl: Controls;
  cancelOn?: CancelOn[];
  createdAt: number;
  updatedAt: number;
}

export interface RegisteredApp {
  name: string;
  createdAt: number;
  updatedAt: number;
  workflows: RegisteredWorkflow[];
}

/**
 * An event to send: `data` is any JSON value; a repeated `dedupeId` within 24 h starts
 * nothing. `ts` (Unix ms) or `delay` (e.g. "90s", "15m", "36h"), at most one and at most
 * 365 days ahead, delays its fan-out: it is stored at once and starts its runs then.
 */
export interface SendEvent<TData = unknown> {
  name: string;
  data?: TData;
  dedupeId?: string;
  ts?: number;
  delay?: string;
}

/** What one workflow did with an event: exactly one outcome. */
export type EventRun =
  | { workflow: string; runId: string }
  | { workflow: string; dropped: true }
  | { workflow: string; deduped: true }
  | { workflow: string; skipped: true; holderRunId: string }
  | { workflow: string; debounced: true }
  | { workflow: string; batched: true };

/** Every outcome's name, as `outcome(run)` reports it. */
export type Outcome = "started" | "dropped" | "deduped" | "skipped" | "debounced" | "batched";

/** What the server did with one event, per workflow whose trigger names it. */
export interface EventResult {
  id: string;
  /** The event's dedupeId was seen within 24 h: `id` is the first event's, `runs` is empty. */
  deduped?: true;
  /** A delayed event: when it fans out (Unix ms); `runs` is empty until then (GET /events/{id}). */
  scheduledFor?: number;
  runs: EventRun[];
  /** Per workflow whose cancelOn the event met, the runs it cancelled. */
  cancelled?: { workflow: string; cancelled: string[] }[];
}

/** Names the outcome of one workflow's run for an event. */
export function outcome(r: EventRun): Outcome {
  if ("runId" in r) return "started";
  if ("dropped" in r) return "dropped";
  if ("deduped" in r) return "deduped";
  if ("skipped" in r) return "skipped";
  if ("debounced" in r) return "debounced";
  return "batched";
}

/** The outcome for `workflow` (a name or a workflow()), or undefined if it did not match. */
export function runFor(result: EventResult, workflow: string | { name: string }): EventRun | undefined {
  const name = typeof workflow === "string" ? workflow : workflow.name;
  return result.runs.find((r) => r.workflow === name);
}

export type RunStatus = "queued" | "running" | "sleeping" | "waiting" | "succeeded" | "failed" | "cancelled";

export interface Usage {
  inputTokens: number;
  outputTokens: number;
  tokens: number;
  cost: number;
}

export interface RunStep {
  id: number;
  name: string;
  type: string;
  /** "succeeded", or "failed" for the step that failed its run (the last one). */
  status: string;
  startedAt: number;
  endedAt: number;
  /** The step's value as JSON: an object stays an object; a Wait step's event data, decoded. */
  out?: unknown;
  error?: StepError;
  usage?: Usage;
}

/** Stable codes of a run's error. */
export type RunErrorCode =
  | "budget_exceeded"
  | "retries_exhausted"
  | "non_retryable"
  | "timeout"
  | "invoke_failed"
  | "internal";

/** Why a step failed its run; `status` is the last HTTP status its endpoint answered. */
export interface StepError {
  code: RunErrorCode;
  message: string;
  status?: number;
}

/** Why a run failed; `step` names the failed step when the failure named it. */
export interface RunError extends StepError {
  step?: string;
}

/** Who cancelled a run: an event's cancelOn, the singleton run that replaced it, or the API. */
export type CancelledBy = { eventId: string } | { singleton: string } | { api: true };

export interface Run {
  runId: string;
  workflow: string;
  app: string;
  status: RunStatus;
  createdAt: number;
  startedAt?: number;
  endedAt?: number;
  eventIds: string[];
  keys: Record<string, unknown>;
  steps: RunStep[];
  dlqId?: string;
  error?: RunError;
  cancelledBy?: CancelledBy;
  usage?: Usage;
  waiting?: { reason: string; since: number | string };
}

/** Run filters (AND-combined): GET /runs and the bulk operations take the same. */
export interface RunFilter {
  workflow?: string;
  app?: string;
  status?: RunStatus;
  label?: string;
  eventName?: string;
  /** Creation time bounds, inclusive: RFC 3339 or unix milliseconds. */
  from?: string | number;
  to?: string | number;
  /** A CEL condition over the run's triggering event, e.g. `event.data.accountId == "a1"`. */
  q?: string;
}

export interface ListRuns extends RunFilter {
  cursor?: string;
  limit?: number;
}

/** POST /runs/cancel and POST /runs/replay: the filters, and `all: true` when there is none. */
export interface BulkRuns extends RunFilter {
  all?: boolean;
  dryRun?: boolean;
  cursor?: string;
  limit?: number;
}

/** What a bulk operation did; follow `cursor` while there is one. */
export interface BulkResult {
  matched: number;
  done: number;
  cursor?: string;
}

/** GET /flow-state: debounce and batch backlogs per workflow, and the project's concurrency. */
export interface FlowState {
  debounce: { app: string; workflow: string; pending: number; nextFireAt: string }[];
  batch: { app: string; workflow: string; buffered: number; oldestAt: string }[];
  /** The project ceiling (0 = unlimited) and its deliveries in flight. */
  concurrency: { limit: number; inUse: number };
  [more: string]: unknown;
}

/** GET /runs/stats. */
export interface RunStats {
  active: number;
  queued: number;
  running: number;
}

/** The events of one request are at most this many (the server's limit). */
export const maxEventsPerRequest = 1000;

export class Client {
  readonly url: string;
  readonly token: string | undefined;
  private readonly timeoutMs: number;

  constructor(opts: ClientOptions = {}) {
    const env = opts.env ?? processEnv();
    const url = opts.url ?? env.DURATON_URL ?? env.QSTASH_URL;
    if (!url) throw new Error("duraton: no server URL: pass { url } or set DURATON_URL (or QSTASH_URL)");
    this.url = url.replace(/\/+$/, "");
    this.token = opts.token ?? env.DURATON_TOKEN ?? env.QSTASH_TOKEN;
    this.timeoutMs = opts.timeoutMs ?? 30_000;
  }

  /** Registers (or replaces) the app's whole set of workflows: PUT /apps/{app}. Idempotent. */
  async registerApp(app: string, workflows: WorkflowDefinitionJSON[]): Promise<RegisteredApp> {
    if (!app) throw new Error("duraton: registerApp: empty app name");
    return this.request<RegisteredApp>("PUT", `/apps/${encodeURIComponent(app)}`, { workflows });
  }

  /** Sends one event: POST /events. */
  async sendEvent<TData>(event: SendEvent<TData>): Promise<EventResult> {
    const [r] = await this.sendEvents([event]);
    return r;
  }

  /** Sends events in one request (at most 1,000), answered after they are durable; results in order. */
  async sendEvents<TData>(events: SendEvent<TData>[]): Promise<EventResult[]> {
    if (events.length === 0) return [];
    if (events.length > maxEventsPerRequest) {
      throw new Error(`duraton: sendEvents: ${events.length} events, at most ${maxEventsPerRequest} per request`);
    }
    const out = await this.request<{ events: EventResult[] }>("POST", "/events", events);
    if (!Array.isArray(out?.events) || out.events.length !== events.length) {
      throw new Error(`duraton: POST /events answered ${out?.events?.length ?? "no"} results for ${events.length} events`);
    }
    return out.events;
  }

  getRun(runId: string): Promise<Run> {
    return this.request<Run>("GET", `/runs/${encodeURIComponent(runId)}`);
  }

  listRuns(q: ListRuns = {}): Promise<{ runs: Run[]; cursor?: string }> {
    return this.request("GET", `/runs${query(q)}`);
  }

  /** The live backlogs (`app` and `workflow` narrow it; a workflow that names nothing is a 404). */
  flowState(q: { app?: string; workflow?: string } = {}): Promise<FlowState> {
    return this.request("GET", `/flow-state${query(q)}`);
  }

  runStats(): Promise<RunStats> {
    return this.request("GET", "/runs/stats");
  }

  /** The registered definitions (of one app, when given), controls on `flowControl`. */
  async listWorkflows(q: { app?: string } = {}): Promise<RegisteredWorkflow[]> {
    return (await this.request<{ workflows: RegisteredWorkflow[] }>("GET", `/workflows${query(q)}`)).workflows;
  }

  cancelRun(runId: string): Promise<unknown> {
    return this.request("POST", `/runs/${encodeURIComponent(runId)}/cancel`);
  }

  /** Cancels every live run the filters select (at most `limit` per call; follow `cursor`). */
  cancelRuns(b: BulkRuns): Promise<BulkResult> {
    return this.request("POST", "/runs/cancel", b);
  }

  /** Replays every failed run the filters select from its failed step; `cap` raises their AI cap. */
  replayRuns(b: BulkRuns & { cap?: Controls["cap"] }): Promise<BulkResult> {
    return this.request("POST", "/runs/replay", b);
  }

  /** Re-runs a failed run from its failed step; `cap` raises the run's AI cap. */
  replayRun(runId: string, body: { cap?: Controls["cap"] } = {}): Promise<unknown> {
    return this.request("POST", `/runs/${encodeURIComponent(runId)}/replay`, body);
  }

  /** One authenticated JSON request; an error status throws a DuratonApiError. */
  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = {};
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    const res = await fetch(this.url + path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    const text = await res.text();
    if (!res.ok) throw new DuratonApiError(method, path, res.status, text);
    try {
      return (text ? JSON.parse(text) : undefined) as T;
    } catch {
      throw new DuratonApiError(method, path, res.status, `answer is not JSON: ${text.slice(0, 200)}`);
    }
  }
}

function query(q: object): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== "") p.set(k, String(v));
  const qs = p.toString();
  return qs ? "?" + qs : "";
}

/** process.env where there is one (Node, Bun, Deno with compat), else nothing. */
export function processEnv(): Env {
  const p = (globalThis as { process?: { env?: Env } }).process;
  return p?.env ?? {};
}
