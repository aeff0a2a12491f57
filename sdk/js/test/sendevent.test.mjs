// ctx.step.sendEvent: events sent as a recorded step; replays return the recorded ids
// and send nothing again. Delayed events from the client: ts and delay.

import { test } from "node:test";
import assert from "node:assert/strict";
import { workflow, runFor } from "../dist/index.js";
import { client, env, host, runEnded, runsOf, out, tag, short } from "./lib.mjs";

async function eventsNamed(name) {
  const res = await fetch(`${env.QSTASH_URL}/events?name=${encodeURIComponent(name)}&limit=100`, {
    headers: { authorization: `Bearer ${env.QSTASH_TOKEN}` },
  });
  assert.equal(res.status, 200);
  return (await res.json()).events;
}

test("sendEvent: a recorded step, replays send nothing twice", { timeout: 60000 }, async (t) => {
  const k = tag();
  const seen = [];
  const parent = workflow({
    name: `send.parent.${k}`,
    triggers: [`send.order.${k}`],
    handler: async (ctx) => {
      const ids = await ctx.step.sendEvent("emit", [
        { name: `send.child.${k}`, data: { n: 1 } },
        { name: `send.child.${k}`, data: { n: 2 }, dedupeId: `mine-${k}` },
      ]);
      seen.push(ids);
      await ctx.step.sleep("a", 1);
      await ctx.step.run("b", () => 1);
      const one = await ctx.step.sendEvent("emit.one", { name: `send.child.${k}`, data: { n: 3 } });
      seen.push(one);
      return ctx.step.run("done", () => ({ ids, one }));
    },
  });
  const child = workflow({ name: `send.child.${k}`, triggers: [`send.child.${k}`], handler: async (ctx) => ctx.step.run("got", () => ctx.event.data.n) });
  await host(t, { app: `send-${k}`, workflows: [parent, child] });
  const r = runFor(await client.sendEvent({ name: `send.order.${k}` }), parent);
  const run = await runEnded(r.runId, { timeoutMs: 30000 });
  assert.equal(run.status, "succeeded", short(run));
  const { ids, one } = out(run, "done");
  assert.equal(ids.length, 2);
  assert.equal(one.length, 1);
  const emits = seen.filter((x) => x.length === 2);
  assert.ok(emits.length >= 3, `the handler was replayed (${emits.length} times past emit)`);
  for (const x of emits) assert.deepEqual(x, ids, "every replay returns the recorded ids");
  const events = await eventsNamed(`send.child.${k}`);
  assert.deepEqual(events.map((e) => e.id).sort(), [...ids, ...one].sort(), "each event sent once");
  const runs = await runsOf(child.name, 3);
  await new Promise((r) => setTimeout(r, 300));
  assert.equal((await runsOf(child.name, 3)).length, 3, `one child run per event: ${short(runs)}`);
});

test("sendEvent from the client: delay and ts fan out later", { timeout: 60000 }, async (t) => {
  const k = tag();
  const wf = workflow({ name: `later.${k}`, triggers: [`later.${k}`], handler: async (ctx) => ctx.step.run("at", () => Date.now()) });
  await host(t, { app: `later-${k}`, workflows: [wf] });
  const t0 = Date.now();
  const [byDelay, byTs] = await client.sendEvents([
    { name: `later.${k}`, data: { how: "delay" }, delay: "2s" },
    { name: `later.${k}`, data: { how: "ts" }, ts: t0 + 2000 },
  ]);
  assert.deepEqual(byDelay.runs, []);
  assert.ok(byDelay.scheduledFor >= t0 + 2000, short(byDelay));
  assert.equal(byTs.scheduledFor, t0 + 2000);
  const runs = await runsOf(wf.name, 2, { timeoutMs: 20000 });
  for (const r of runs) {
    const ended = await runEnded(r.runId);
    assert.ok(out(ended, "at") >= t0 + 2000, `started no earlier than its time: ${out(ended, "at") - t0} ms`);
  }
});

test("cron trigger: registered next to an event trigger", { timeout: 30000 }, async (t) => {
  const k = tag();
  const wf = workflow({ name: `cron.${k}`, triggers: [{ cron: "0 9 * * 1", tz: "Europe/Berlin" }, `cron.manual.${k}`], handler: async (ctx) => ctx.step.run("x", () => 1) });
  const { served } = await host(t, { app: `cron-${k}`, workflows: [wf] });
  assert.deepEqual(served.definitions[0].triggers, [{ cron: "0 9 * * 1", tz: "Europe/Berlin" }, { event: `cron.manual.${k}` }]);
  const reg = await client.listWorkflows({ app: `cron-${k}` });
  assert.deepEqual(reg[0].triggers, served.definitions[0].triggers);
  const bad = workflow({ name: `cron.bad.${k}`, triggers: [{ cron: "0 0 30 2 *" }], handler: async (ctx) => ctx.step.run("x", () => 1) });
  await assert.rejects(host(t, { app: `cronbad-${k}`, workflows: [bad] }), /triggers\[0\]\.cron.*never occurs/);
});
