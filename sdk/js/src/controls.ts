// The flat flow controls of a native workflow, typed exactly as docs/protocol.md
// ("Controls") lists them. Every object type is closed: an unknown field (a typo) in an object literal is a
// compile error, as it is a 400 on the server. Times are milliseconds, as on the wire.

/**
 * A dotted path into the event's `data` ("accountId", "user.id"), or a CEL expression
 * over `event` (`event.data.accountId + "/" + event.data.region`): a key that starts with
 * `event.` or is not a plain dotted path is an expression.
 */
export type KeyPath = string;

/** At most `limit` deliveries of the workflow (per key value) hold a slot at once. */
export interface Concurrency {
  /** 1–100,000. */
  limit: number;
  key?: KeyPath;
  /**
   * "workflow" (default): the workflow's own limit. "app": shared by every workflow of the
   * app that declares the same `key` text and `limit` with scope "app".
   */
  scope?: "workflow" | "app";
}

/** Run starts per window (GCRA, burst = limit): throttle delays, rateLimit drops. */
export interface Rate {
  /** ≥ 1. */
  limit: number;
  /** throttle: 1 s – 7 d; rateLimit: 1 s – 24 h. */
  perMs: number;
  key?: KeyPath;
}

/** Run starts per window: `burst` (1–limit, default limit) go at once from idle, then one every perMs/limit. */
export interface Throttle extends Rate {
  burst?: number;
}

/** One run `periodMs` after the burst's last event (at the latest `timeoutMs` after its first). */
export interface Debounce {
  /** 1 s – 7 d. */
  periodMs: number;
  key?: KeyPath;
  /** ≥ periodMs. */
  timeoutMs?: number;
}

/** One run per `maxSize` events or `timeoutMs` after the first; the run sees `ctx.events`. */
export interface Batch {
  /** 2–1,000. */
  maxSize: number;
  /** 1 s – 1 h. */
  timeoutMs: number;
  key?: KeyPath;
}

/**
 * Deliveries ordered as if enqueued `shiftMs` earlier (−12 h … +12 h); or, per run, `run`
 * seconds earlier: a CEL expression over `event` whose int value is clamped to −600 … 600.
 */
export type Priority = { shiftMs: number; run?: never } | { run: string; shiftMs?: never };

/** At most one live run per key: `skip` drops the new trigger, `cancel` (default) cancels the holder. */
export interface Singleton {
  key?: KeyPath;
  mode?: "skip" | "cancel";
}

/** One run per key value per window (default 24 h; 1 s – 30 d). */
export interface Idempotency {
  key?: KeyPath;
  periodMs?: number;
}

/** A run's AI spend ceiling: at least one of the two (cost in USD). */
export type Cap = { maxCost: number; maxTokens?: number } | { maxCost?: number; maxTokens: number };

/** AI tokens per scope: `tokens` per `perMs` (1 s – 24 h). */
export interface TokenThrottle {
  tokens: number;
  perMs: number;
  key?: KeyPath;
  /** Tokens a run is assumed to spend until the scope has seen runs end (1–tokens); without it one run starts at a time until then. */
  estimate?: number;
}

/**
 * An event that cancels the workflow's live runs (queued, running, sleeping, waiting)
 * whose triggering event it matches; a workflow has at most 8.
 */
export interface CancelOn {
  event: string;
  /** A dotted path ("data.orderId"): the two events' values there must be equal. */
  match?: string;
  /** A CEL condition over `event` (the run's triggering event) and `async` (the incoming one). */
  if?: string;
  /** Only runs created at most this long before the event. */
  timeoutMs?: number;
}

/** Every control is optional and off when absent. */
export interface Controls {
  /** One scope, or an array of at most 2. */
  concurrency?: Concurrency | readonly [Concurrency] | readonly [Concurrency, Concurrency];
  throttle?: Throttle;
  rateLimit?: Rate;
  debounce?: Debounce;
  batch?: Batch;
  priority?: Priority;
  singleton?: Singleton;
  idempotency?: Idempotency;
  cap?: Cap;
  tokenThrottle?: TokenThrottle;
}

/** The names of the controls, in the order docs/protocol.md ("Controls") lists them. */
export const controlNames = [
  "concurrency",
  "throttle",
  "rateLimit",
  "debounce",
  "batch",
  "priority",
  "singleton",
  "idempotency",
  "cap",
  "tokenThrottle",
] as const satisfies readonly (keyof Controls)[];
