// Type-level tests, compiled by `tsc -p tsconfig.test.json` (go test runs it): the line
// after each expect-error directive must be a compile error, or tsc fails ("Unused
// directive"). A typo in a control, or a value of the wrong shape, does not compile.

import { workflow, Client, outcome, type Controls, type EventRun, type Context, controlNames } from "@duraton/sdk";

const handler = async (ctx: Context) => {
  await ctx.step.run("x", () => ctx.event.data.anything);
};

// The documentation's shapes compile.
workflow({ name: "ok.1", concurrency: { limit: 5, key: "accountId" }, handler });
workflow({ name: "ok.2", concurrency: [{ limit: 5, key: "accountId" }, { limit: 50 }], handler });
workflow({ name: "ok.3", throttle: { limit: 100, perMs: 60_000, key: "customer" }, handler });
workflow({ name: "ok.4", rateLimit: { limit: 1000, perMs: 60_000, key: "ip" }, handler });
workflow({ name: "ok.5", debounce: { periodMs: 5_000, key: "documentId", timeoutMs: 30_000 }, handler });
workflow({ name: "ok.6", batch: { maxSize: 100, timeoutMs: 5_000, key: "index" }, handler });
workflow({ name: "ok.7", priority: { shiftMs: 60_000 }, handler });
workflow({ name: "ok.8", singleton: { key: "accountId", mode: "skip" }, handler });
workflow({ name: "ok.9", idempotency: { key: "orderId", periodMs: 86_400_000 }, handler });
workflow({ name: "ok.10", cap: { maxCost: 0.5 }, handler });
workflow({ name: "ok.11", cap: { maxTokens: 10_000 }, handler });
workflow({ name: "ok.12", tokenThrottle: { tokens: 100_000, perMs: 60_000, key: "team" }, handler });
workflow({ name: "ok.13", triggers: ["a", { event: "b" }], retries: 3, handler });

// @ts-expect-error a typo in a control's name
workflow({ name: "bad.1", concurency: { limit: 5 }, handler });
// @ts-expect-error a typo in a control's field
workflow({ name: "bad.2", concurrency: { limit: 5, kye: "accountId" }, handler });
// @ts-expect-error a required field missing
workflow({ name: "bad.3", throttle: { limit: 100 }, handler });
// @ts-expect-error perMs is a number of milliseconds, not a string
workflow({ name: "bad.4", rateLimit: { limit: 10, perMs: "1m" }, handler });
// @ts-expect-error singleton mode is "skip" or "cancel"
workflow({ name: "bad.5", singleton: { mode: "drop" }, handler });
// @ts-expect-error cap needs maxCost or maxTokens
workflow({ name: "bad.6", cap: {}, handler });
// @ts-expect-error at most two concurrency scopes
workflow({ name: "bad.7", concurrency: [{ limit: 1 }, { limit: 2 }, { limit: 3 }], handler });
// @ts-expect-error batch takes timeoutMs, not periodMs
workflow({ name: "bad.8", batch: { maxSize: 10, periodMs: 1000 }, handler });
// @ts-expect-error debounce's field is periodMs
workflow({ name: "bad.9", debounce: { period: 1000 }, handler });
// @ts-expect-error priority's field is shiftMs
workflow({ name: "bad.10", priority: { shift: 1000 }, handler });
// @ts-expect-error idempotency has no limit
workflow({ name: "bad.11", idempotency: { key: "a", limit: 1 }, handler });
// @ts-expect-error tokenThrottle counts tokens
workflow({ name: "bad.12", tokenThrottle: { limit: 1, perMs: 1000 }, handler });
// @ts-expect-error a handler is required
workflow({ name: "bad.13" });
// @ts-expect-error ctx has no such step
workflow({ name: "bad.14", handler: async (ctx) => ctx.step.runn("x", () => 1) });

// controlNames lists every control of Controls, and only those.
type Listed = (typeof controlNames)[number];
const everyControlListed: Exclude<keyof Controls, Listed> extends never ? true : false = true;
void everyControlListed;

// An event's outcome per workflow is one of six, each with its own fields.
async function outcomes(c: Client) {
  const r = await c.sendEvent({ name: "sync.account", data: { accountId: "a1" } });
  const run: EventRun = r.runs[0];
  if ("runId" in run) {
    const id: string = run.runId;
    void id;
  } else if ("skipped" in run) {
    const holder: string = run.holderRunId;
    void holder;
  }
  const o: "started" | "dropped" | "deduped" | "skipped" | "debounced" | "batched" = outcome(run);
  void o;
  // @ts-expect-error a dropped event has no run id
  const none: string = ({ workflow: "w", dropped: true } as EventRun).runId;
  void none;
}
void outcomes;

// Typed event data.
workflow<{ accountId: string }>({
  name: "typed",
  handler: async (ctx) => {
    const id: string = ctx.event.data.accountId;
    // @ts-expect-error not a field of the event data
    void ctx.event.data.accountID;
    return id;
  },
});

// Cron triggers, throttle burst, app-scope concurrency, a token estimate; step flowControl.
workflow({ name: "ok.cron", triggers: [{ cron: "0 * * * *", tz: "Europe/Berlin" }, "manual"], handler });
workflow({ name: "ok.burst", throttle: { limit: 10, perMs: 60_000, burst: 1 }, concurrency: { limit: 2, key: "a", scope: "app" }, handler });
workflow({ name: "ok.est", tokenThrottle: { tokens: 1000, perMs: 60_000, estimate: 200 }, handler });
// @ts-expect-error a scope is "workflow" or "app"
workflow({ name: "bad.scope", concurrency: { limit: 2, scope: "project" }, handler });
// @ts-expect-error a cron trigger has no event
workflow({ name: "bad.cron", triggers: [{ crn: "* * * * *" }], handler });
const stepFlow = async (ctx: Context) => {
  await ctx.step.run("pay", () => 1, { flowControl: { key: "payments", parallelism: 3 } });
  // @ts-expect-error a typo in a step's flow control
  await ctx.step.run("pay", () => 1, { flowControl: { key: "payments", paralelism: 3 } });
  const ids: string[] = await ctx.step.sendEvent("emit", [{ name: "e", data: { a: 1 }, delay: "90s" }]);
  return [ids, ctx.flowControl?.key];
};
workflow({ name: "ok.stepflow", handler: stepFlow });
