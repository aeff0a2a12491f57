// flow-control doc, "Concurrency": the sync.account example as written.

import { test } from "node:test";
import assert from "node:assert/strict";
import { workflow } from "../dist/index.js";
import { client, host, runEnded, sleep, waitFor, Gauge, short } from "./lib.mjs";

test("concurrency: sync.account runs at most 5 at once per accountId, accounts independent", { timeout: 60000 }, async (t) => {
  // a1's syncs are held until released, so a1 fills its 5 slots and stays there; a2's
  // three syncs wait for each other (all three at once), which they can only do if a1's
  // full limit does not hold them back.
  const gauge = new Gauge();
  let releaseA1;
  const a1Gate = new Promise((r) => (releaseA1 = r));
  let a2Enter;
  const a2All = new Promise((r) => (a2Enter = r));
  let a1WhenA2Met;
  const syncAccount = (accountId) =>
    gauge.around(accountId, async () => {
      if (accountId === "a1") await a1Gate;
      else {
        if (gauge.now.get("a2") === 3) {
          a1WhenA2Met = gauge.now.get("a1");
          a2Enter();
        }
        await a2All;
      }
      return { synced: accountId };
    });

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

  const send = (accountId, n) => client.sendEvents(Array.from({ length: n }, (_, i) => ({ name: "sync.account", data: { accountId, i } })));
  const a1 = await send("a1", 9);
  await waitFor("a1 to fill its 5 slots", () => gauge.now.get("a1") === 5, { describe: () => [...gauge.now] });
  const a2 = await send("a2", 3);
  await a2All;
  assert.equal(a1WhenA2Met, 5, "a2's three ran at once while a1 held its five");
  await sleep(300);
  assert.equal(gauge.now.get("a1"), 5, "no sixth a1 run starts while five hold their slots");
  releaseA1();

  const runIds = [...a1, ...a2].map((r) => {
    assert.equal(r.runs.length, 1, short(r));
    assert.ok("runId" in r.runs[0], `every event starts a run: ${short(r)}`);
    return r.runs[0].runId;
  });
  for (const id of runIds) assert.equal((await runEnded(id, { timeoutMs: 30000 })).status, "succeeded");
  assert.equal(gauge.total, 12, "each run's sync step ran once");
  assert.equal(gauge.max.get("a1"), 5, "a1: never more than 5 at once");
  assert.equal(gauge.max.get("a2"), 3);
});
