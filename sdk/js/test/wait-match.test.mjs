// waitForEvent with match and if, and cancelOn, against a real duraton process: an event
// wakes only the waits whose condition holds, and cancels only the runs it matches.

import { test } from "node:test";
import assert from "node:assert/strict";
import { workflow, runFor, waitCondition } from "../dist/index.js";
import { client, host, runEnded, out, waitFor, tag, short, modes, modeOptions } from "./lib.mjs";

const status = async (id) => (await client.getRun(id)).status;

// Each mode (lib.mjs modes): the wait is registered by the inline runtime or by
// @upstash/workflow, with the same condition on its request.
for (const mode of modes) {
  test(`${mode}: waitForEvent match: one order.paid for o1 wakes exactly o1's run`, { timeout: 60000 }, async (t) => {
    const k = tag();
    const answers = [];
    const wf = workflow({
      name: `paid.${mode}.${k}`,
      triggers: [`placed.${mode}.${k}`],
      handler: async (ctx) => {
        const r = await ctx.step.waitForEvent("paid", `paid.${mode}.${k}`, { timeout: "1h", match: "data.orderId" });
        return ctx.step.run("got", () => r);
      },
    });
    await host(t, { app: `paid-${mode}-${k}`, workflows: [wf], ...modeOptions(mode, answers) });
    const o1 = runFor(await client.sendEvent({ name: `placed.${mode}.${k}`, data: { orderId: "o1" } }), wf).runId;
    const o2 = runFor(await client.sendEvent({ name: `placed.${mode}.${k}`, data: { orderId: "o2" } }), wf).runId;
    for (const id of [o1, o2]) await waitFor(`${id} waiting`, async () => (await status(id)) === "waiting");

    await client.sendEvent({ name: `paid.${mode}.${k}`, data: { orderId: "o1", amount: 10 } });
    const run1 = await runEnded(o1);
    assert.equal(run1.status, "succeeded", short(run1));
    assert.deepEqual(out(run1, "got"), { timeout: false, data: { orderId: "o1", amount: 10 } });
    assert.equal(await status(o2), "waiting", "o2's run does not wake for o1");

    await client.sendEvent({ name: `paid.${mode}.${k}`, data: { orderId: "o2" } });
    assert.deepEqual(out(await runEnded(o2), "got"), { timeout: false, data: { orderId: "o2" } });
    const mine = answers.filter((a) => a.path.endsWith(wf.name));
    if (mode === "inline") assert.ok(mine.some((a) => a.inline), `inline answers: ${short(mine)}`);
    if (mode === "api" || mode === "no-offer") assert.ok(!mine.some((a) => a.inline), `no inline answer: ${short(mine)}`);
  });

  test(`${mode}: waitForEvent if: numbers of both events decide`, { timeout: 60000 }, async (t) => {
    const k = tag();
    const wf = workflow({
      name: `big.${mode}.${k}`,
      triggers: [`placed.${mode}.${k}`],
      handler: async (ctx) => {
        const r = await ctx.step.waitForEvent("paid", `paid.${mode}.${k}`, {
          timeout: 3600,
          match: "data.orderId",
          if: "async.data.amount >= event.data.min",
        });
        return ctx.step.run("got", () => r.data);
      },
    });
    await host(t, { app: `big-${mode}-${k}`, workflows: [wf], ...modeOptions(mode) });
    const id = runFor(await client.sendEvent({ name: `placed.${mode}.${k}`, data: { orderId: "o1", min: 100 } }), wf).runId;
    await waitFor("waiting", async () => (await status(id)) === "waiting");
    await client.sendEvents([
      { name: `paid.${mode}.${k}`, data: { orderId: "o1", amount: 99.5 } },
      { name: `paid.${mode}.${k}`, data: { orderId: "o2", amount: 500 } },
    ]);
    assert.equal(await status(id), "waiting", "99.5 < 100, and o2 is not this order");
    await client.sendEvent({ name: `paid.${mode}.${k}`, data: { orderId: "o1", amount: 100 } });
    assert.deepEqual(out(await runEnded(id), "got"), { orderId: "o1", amount: 100 });
  });

  test(`${mode}: waitForEvent with a condition that does not compile fails the run`, { timeout: 60000 }, async (t) => {
    const k = tag();
    const wf = workflow({
      name: `badwait.${mode}.${k}`,
      triggers: [`badwait.${mode}.${k}`],
      retries: 0,
      handler: async (ctx) => {
        await ctx.step.waitForEvent("paid", `paid.${mode}.${k}`, { if: "async.data.amount >" });
      },
    });
    await host(t, { app: `badwait-${mode}-${k}`, workflows: [wf], ...modeOptions(mode) });
    const id = runFor(await client.sendEvent({ name: `badwait.${mode}.${k}` }), wf).runId;
    const run = await runEnded(id, { timeoutMs: 30000 });
    assert.equal(run.status, "failed", short(run));
  });
}

test("cancelOn: order.cancelled for o1 cancels o1's waiting run only, and says so", { timeout: 60000 }, async (t) => {
  const k = tag();
  const wf = workflow({
    name: `ship.${k}`,
    triggers: [`placed.${k}`],
    cancelOn: [{ event: `cancelled.${k}`, match: "data.orderId" }],
    handler: async (ctx) => {
      await ctx.step.waitForEvent("paid", `never.${k}`, { timeout: "1h" });
    },
  });
  await host(t, { app: `ship-${k}`, workflows: [wf] });
  const o1 = runFor(await client.sendEvent({ name: `placed.${k}`, data: { orderId: "o1" } }), wf).runId;
  const o2 = runFor(await client.sendEvent({ name: `placed.${k}`, data: { orderId: "o2" } }), wf).runId;
  for (const id of [o1, o2]) await waitFor(`${id} waiting`, async () => (await status(id)) === "waiting");
  const r = await client.sendEvent({ name: `cancelled.${k}`, data: { orderId: "o1" } });
  assert.deepEqual(r.cancelled, [{ workflow: wf.name, cancelled: [o1] }]);
  const run = await client.getRun(o1);
  assert.equal(run.status, "cancelled");
  assert.deepEqual(run.cancelledBy, { eventId: r.id });
  assert.equal(await status(o2), "waiting");
});

test("waitCondition: the header value of match and if", () => {
  assert.equal(waitCondition("data.orderId"), "async.data.orderId == event.data.orderId");
  assert.equal(waitCondition(undefined, "async.data.n >\n 1"), "async.data.n >  1");
  assert.equal(waitCondition("data.id", "async.data.n > 1"), "(async.data.id == event.data.id) && (async.data.n > 1)");
  assert.equal(waitCondition(), "");
});
