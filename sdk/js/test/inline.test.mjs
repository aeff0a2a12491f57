// The two ways a delivery is answered, against the real server: inline (Duraton offers
// it: the step messages or the run's end ride in the delivery's answer) and the API calls
// of @upstash/workflow (serve({ inlineAnswers: false }), or a delivery without the offer,
// as from QStash). The same
// workflows run in both: a parallel group, a sleep, a wait woken by an event, an invoke
// of a sibling, a failure after a step, and a handler that reads ctx.upstash (the rest
// of its run moves to @upstash/workflow over the history the inline runtime wrote).

import { test } from "node:test";
import assert from "node:assert/strict";
import { workflow, runFor, WorkflowFailure } from "../dist/index.js";
import { client, host, runEnded, out, waitFor, tag, short, recording } from "./lib.mjs";

// inline: Duraton's offer taken; api: serve({ inlineAnswers: false }); no-offer: the
// deliveries carry no offer, so @upstash/workflow answers them.
for (const mode of ["inline", "api", "no-offer"]) {
  const inlineAnswers = mode !== "api";
  const strip = mode === "no-offer";
  const answersInline = mode === "inline";

  test(`${mode}: a parallel group, a sleep, a wait and an invoke`, { timeout: 60000 }, async (t) => {
    const k = tag();
    const child = workflow({
      name: `child.${mode}.${k}`,
      handler: async (ctx) => ctx.step.run("square", () => ctx.event.data.n ** 2),
    });
    const wf = workflow({
      name: `all.${mode}.${k}`,
      triggers: [`all.${mode}.${k}`],
      handler: async (ctx) => {
        const a = await ctx.step.run("a", () => ctx.event.data.n + 1);
        const [p, q] = await Promise.all([ctx.step.run("p", () => a * 2), ctx.step.run("q", async () => ({ q: a * 3 }))]);
        const t0 = await ctx.step.run("t0", () => Date.now());
        await ctx.step.sleep("nap", 1);
        const t1 = await ctx.step.run("t1", () => Date.now());
        const got = await ctx.step.waitForEvent("wait", `go.${mode}.${k}`, { timeout: "30s" });
        const invoked = await ctx.step.invoke("child", { workflow: child, body: { n: p } });
        return ctx.step.run("sum", () => ({ a, p, q, slept: t1 - t0, got, invoked }));
      },
    });
    const answers = [];
    await host(t, { app: `${mode}-${k}`, workflows: [wf, child], inlineAnswers, mount: recording(answers, strip) });
    const r = runFor(await client.sendEvent({ name: `all.${mode}.${k}`, data: { n: 4 } }), wf);
    await waitFor("the run to wait for its event", async () => (await client.getRun(r.runId)).status === "waiting", { timeoutMs: 30000 });
    const woke = await client.sendEvent({ name: `go.${mode}.${k}`, data: { ok: true } });
    assert.equal(woke.runs.length, 0, short(woke));
    const run = await runEnded(r.runId, { timeoutMs: 30000 });
    assert.equal(run.status, "succeeded", short(run));
    const sum = out(run, "sum");
    assert.equal(sum.a, 5);
    assert.equal(sum.p, 10);
    assert.deepEqual(sum.q, { q: 15 });
    assert.ok(sum.slept >= 1000, `slept ${sum.slept} ms`);
    assert.deepEqual(sum.got, { timeout: false, data: { ok: true } });
    assert.deepEqual(sum.invoked, { body: 100, isFailed: false, isCanceled: false });
    const names = run.steps.map((s) => s.name);
    for (const n of ["a", "p", "q", "t0", "nap", "t1", "wait", "child", "sum"]) assert.ok(names.includes(n), `step ${n} recorded: ${short(names)}`);
    const mine = answers.filter((a) => a.path.endsWith(wf.name));
    assert.ok(mine.every((a) => a.status === 200), short(mine));
    const inlined = mine.filter((a) => a.inline);
    if (answersInline) {
      assert.ok(inlined.some((a) => a.inline === "steps") && inlined.some((a) => a.inline === "end"), `inline answers: ${short(mine)}`);
    } else {
      assert.equal(inlined.length, 0, `no inline answer: ${short(mine)}`);
    }
  });

  test(`${mode}: a failure after a step fails the run and calls onFailure once`, { timeout: 60000 }, async (t) => {
    const k = tag();
    const failures = [];
    let ran = 0;
    const wf = workflow({
      name: `fail.${mode}.${k}`,
      triggers: [`fail.${mode}.${k}`],
      retries: 0,
      handler: async (ctx) => {
        await ctx.step.run("first", () => {
          ran++;
          return 1;
        });
        throw new Error(`broken ${ctx.event.data.n}`);
      },
      onFailure: (f) => {
        failures.push(f);
      },
    });
    await host(t, { app: `fail-${mode}-${k}`, workflows: [wf], inlineAnswers, mount: recording([], strip) });
    const r = runFor(await client.sendEvent({ name: `fail.${mode}.${k}`, data: { n: 3 } }), wf);
    const run = await runEnded(r.runId, { timeoutMs: 30000 });
    assert.equal(run.status, "failed", short(run));
    assert.equal(out(run, "first"), 1, "the step before the failure is recorded");
    assert.equal(ran, 1, "the step ran once");
    await waitFor("the failure handler", () => failures.length === 1);
    assert.ok(failures[0].error instanceof WorkflowFailure, short(failures[0].error));
    assert.match(failures[0].error.body, /broken 3/);
    assert.deepEqual(failures[0].event.data, { n: 3 });
  });

  test(`${mode}: a handler that reads ctx.upstash runs on @upstash/workflow's context`, { timeout: 60000 }, async (t) => {
    const k = tag();
    let ran = 0;
    const wf = workflow({
      name: `up.${mode}.${k}`,
      triggers: [`up.${mode}.${k}`],
      handler: async (ctx) => {
        const a = await ctx.step.run("a", () => {
          ran++;
          return "x";
        });
        const id = ctx.upstash.workflowRunId;
        return ctx.step.run("b", () => ({ a, same: id === ctx.runId }));
      },
    });
    await host(t, { app: `up-${mode}-${k}`, workflows: [wf], inlineAnswers, mount: recording([], strip) });
    const r = runFor(await client.sendEvent({ name: `up.${mode}.${k}` }), wf);
    const run = await runEnded(r.runId, { timeoutMs: 30000 });
    assert.equal(run.status, "succeeded", short(run));
    assert.deepEqual(out(run, "b"), { a: "x", same: true });
    assert.equal(ran, 1, "step a ran once, whichever runtime answered");
  });
}
