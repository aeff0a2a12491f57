// ctx.step.sendEvent: events sent as a recorded step; replays return the recorded ids
// and send nothing again. Delayed events from the client: ts and delay.

import { test } from "node:test";
import assert from "node:assert/strict";
import { workflow, runFor } from "../dist/index.js";
import { client, env, host, runEnded, runsOf, out, tag, short, modes, modeOptions, inlineMessages } from "./lib.mjs";

async function eventsNamed(name) {
  const res = await fetch(`${env.QSTASH_URL}/events?name=${encodeURIComponent(name)}&limit=100`, {
    headers: { authorization: `Bearer ${env.QSTASH_TOKEN}` },
  });
  assert.equal(res.status, 200);
  return (await res.json()).events;
}

// Each mode (lib.mjs modes): answered inline, through @upstash/workflow, or switching
// between the two at every delivery; the step and its dedupeIds are the same in all.
for (const mode of modes) {
  test(`${mode}: sendEvent: a recorded step, replays send nothing twice`, { timeout: 60000 }, async (t) => {
    const k = tag();
    const seen = [];
    const parent = workflow({
      name: `send.parent.${mode}.${k}`,
      triggers: [`send.order.${mode}.${k}`],
      handler: async (ctx) => {
        const ids = await ctx.step.sendEvent("emit", [
          { name: `send.child.${mode}.${k}`, data: { n: 1 } },
          { name: `send.child.${mode}.${k}`, data: { n: 2 }, dedupeId: `mine-${k}` },
        ]);
        seen.push(ids);
        await ctx.step.sleep("a", 1);
        await ctx.step.run("b", () => 1);
        const one = await ctx.step.sendEvent("emit.one", { name: `send.child.${mode}.${k}`, data: { n: 3 } });
        seen.push(one);
        return ctx.step.run("done", () => ({ ids, one }));
      },
    });
    const child = workflow({ name: `send.child.${mode}.${k}`, triggers: [`send.child.${mode}.${k}`], handler: async (ctx) => ctx.step.run("got", () => ctx.event.data.n) });
    const answers = [];
    await host(t, { app: `send-${mode}-${k}`, workflows: [parent, child], ...modeOptions(mode, answers) });
    const r = runFor(await client.sendEvent({ name: `send.order.${mode}.${k}` }), parent);
    const run = await runEnded(r.runId, { timeoutMs: 30000 });
    assert.equal(run.status, "succeeded", short(run));
    const { ids, one } = out(run, "done");
    assert.equal(ids.length, 2);
    assert.equal(one.length, 1);
    const emits = seen.filter((x) => x.length === 2);
    assert.ok(emits.length >= 3, `the handler was replayed (${emits.length} times past emit)`);
    for (const x of emits) assert.deepEqual(x, ids, "every replay returns the recorded ids");
    const events = await eventsNamed(`send.child.${mode}.${k}`);
    assert.deepEqual(events.map((e) => e.id).sort(), [...ids, ...one].sort(), "each event sent once");
    // The Go SDK's dedupeIds: run, step id (emit is step 1, emit.one step 4), index.
    const dedupe = Object.fromEntries(events.map((e) => [e.id, e.dedupeId]));
    assert.deepEqual([dedupe[ids[0]], dedupe[ids[1]], dedupe[one[0]]], [`step:${r.runId}:1:0`, `mine-${k}`, `step:${r.runId}:4:0`], short(events));
    const runs = await runsOf(child.name, 3);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal((await runsOf(child.name, 3)).length, 3, `one child run per event: ${short(runs)}`);
    // Who answered: the emit steps' results rode in inline answers only when offered.
    const mine = answers.filter((a) => a.path.endsWith(parent.name));
    const inlined = inlineMessages(mine).map((m) => m.step.stepName);
    if (mode !== "api" && mode !== "no-offer") {
      assert.ok(mine.some((a) => a.inline), `inline answers: ${short(mine)}`);
    } else {
      assert.equal(mine.filter((a) => a.inline).length, 0, `no inline answer: ${short(mine)}`);
    }
    if (mode === "inline") assert.ok(inlined.includes("emit") && inlined.includes("emit.one"), `emit results answered inline: ${short(inlined)}`);
    if (mode.startsWith("mixed")) assert.ok(mine.some((a) => !a.inline), `some deliveries answered by @upstash/workflow: ${short(mine)}`);
  });
}

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
