// flow-control doc, "Concurrency": the sync.account example as written.

import { test } from "node:test";
import assert from "node:assert/strict";
import { workflow } from "../dist/index.js";
import { client, host, runEnded, sleep, Gauge, short } from "./lib.mjs";

test("concurrency: sync.account runs at most 5 at once per accountId, accounts independent", { timeout: 60000 }, async (t) => {
  const gauge = new Gauge();
  const syncAccount = (accountId) => gauge.around(accountId, () => sleep(700).then(() => ({ synced: accountId })));

  const syncWorkflow = workflow({
    name: "sync.account",
    concurrency: { limit: 5, key: "accountId" },
    handler: async (ctx) => {
      await ctx.step.run("sync", () => syncAccount(ctx.event.data.accountId));
    },
  });

  const { served } = await host(t, { app: "accounts", workflows: [syncWorkflow] });
  assert.deepEqual(served.definitions[0].concurrency, { limit: 5, key: "accountId" });
  assert.deepEqual(served.definitions[0].triggers, [{ event: "sync.account" }], "the default trigger is the workflow's name");

  const events = [
    ...Array.from({ length: 9 }, (_, i) => ({ name: "sync.account", data: { accountId: "a1", i } })),
    ...Array.from({ length: 3 }, (_, i) => ({ name: "sync.account", data: { accountId: "a2", i } })),
  ];
  const results = await client.sendEvents(events);
  const runIds = results.map((r) => {
    assert.equal(r.runs.length, 1, short(r));
    assert.ok("runId" in r.runs[0], `every event starts a run: ${short(r)}`);
    return r.runs[0].runId;
  });
  for (const id of runIds) assert.equal((await runEnded(id, { timeoutMs: 30000 })).status, "succeeded");
  assert.equal(gauge.total, 12, "each run's sync step ran once");
  assert.equal(gauge.max.get("a1"), 5, `a1: at most 5 at once, and the limit is used (max ${gauge.max.get("a1")})`);
  assert.equal(gauge.max.get("a2"), 3, `a2 has its own limit, not blocked by a1's full one (max ${gauge.max.get("a2")})`);
});
