// flow-control doc, "Singleton": singleton: { key: "accountId", mode: "skip" }. At most
// one live run per key; a colliding trigger is skipped and reports the holder.

import { test } from "node:test";
import assert from "node:assert/strict";
import { workflow, runFor } from "../dist/index.js";
import { client, host, runEnded, waitFor, tag, short } from "./lib.mjs";

test("singleton skip: a second trigger for a live accountId is skipped; another account runs; after the end it runs again", { timeout: 60000 }, async (t) => {
  const k = tag();
  const wf = workflow({
    name: `singleton.${k}`,
    triggers: [`account.sync.${k}`],
    singleton: { key: "accountId", mode: "skip" },
    handler: async (ctx) => {
      // Held until a release event: the run stays live (waiting) meanwhile.
      const got = await ctx.step.waitForEvent("hold", `release.${k}.${ctx.event.data.accountId}`, { timeout: "1m" });
      return ctx.step.run("done", () => ({ released: !got.timeout, by: got.data }));
    },
  });
  await host(t, { app: `singleton-${k}`, workflows: [wf] });

  const send = (accountId) => client.sendEvent({ name: `account.sync.${k}`, data: { accountId } });
  const first = runFor(await send("a1"), wf);
  assert.ok("runId" in first, short(first));
  await waitFor("the holder to wait for its release", async () => (await client.getRun(first.runId)).status === "waiting");
  const second = runFor(await send("a1"), wf);
  assert.deepEqual(second, { workflow: wf.name, skipped: true, holderRunId: first.runId }, "skipped, naming the holder");
  const otherAccount = runFor(await send("a2"), wf);
  assert.ok("runId" in otherAccount, `a2 is another key: ${short(otherAccount)}`);

  await waitFor("the a2 run to wait", async () => (await client.getRun(otherAccount.runId)).status === "waiting");
  // The release is an event too: it wakes the waiter whose event id is its name.
  await client.sendEvents([{ name: `release.${k}.a1`, data: { who: "test" } }, { name: `release.${k}.a2`, data: { who: "test" } }]);
  const ended = await runEnded(first.runId);
  assert.equal(ended.status, "succeeded");
  assert.deepEqual(ended.steps.find((s) => s.name === "done").out, { released: true, by: { who: "test" } });
  await runEnded(otherAccount.runId);
  const again = runFor(await send("a1"), wf);
  assert.ok("runId" in again, `once the holder ended, a1 runs again: ${short(again)}`);
  await waitFor("the new a1 run to wait", async () => (await client.getRun(again.runId)).status === "waiting");
  await client.sendEvent({ name: `release.${k}.a1` });
  assert.equal((await runEnded(again.runId)).status, "succeeded");
});
