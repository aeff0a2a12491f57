// ctx.step.run(name, fn, { flowControl }): the step runs in a delivery of its own, gated
// under its key alone; ctx.flowControl says what a delivery was admitted under. Each test
// runs in every answering mode (lib.mjs modes): the plan step, its headers and the
// history are the same whichever runtime answers a delivery.

import { test } from "node:test";
import assert from "node:assert/strict";
import { workflow, runFor } from "../dist/index.js";
import { client, host, runEnded, out, tag, short, sleep, Gauge, modes, modeOptions, inlineMessages, recording } from "./lib.mjs";

for (const mode of modes) {
  test(`${mode}: step.run with flowControl: one step of three runs at a time, the rest free`, { timeout: 60000 }, async (t) => {
    const k = tag();
    const gauge = new Gauge();
    const free = new Gauge();
    const seen = [];
    const wf = workflow({
      name: `stepfc.${mode}.${k}`,
      triggers: [`stepfc.${mode}.${k}`],
      handler: async (ctx) => {
        const before = await ctx.step.run("before", () => free.around("before", async () => {
          await sleep(300);
          return ctx.flowControl ?? null;
        }));
        const charged = await ctx.step.run(
          "charge",
          () => gauge.around("charge", async () => {
            seen.push(ctx.flowControl);
            await sleep(300);
            return `charged ${ctx.event.data.n}`;
          }),
          { flowControl: { key: `pay-${mode}-${k}`, parallelism: 1 } },
        );
        const after = await ctx.step.run("after", () => `after ${charged}`);
        return ctx.step.run("sum", () => ({ before, charged, after }));
      },
    });
    const answers = [];
    await host(t, { app: `stepfc-${mode}-${k}`, workflows: [wf], ...modeOptions(mode, answers) });
    const res = await client.sendEvents([1, 2, 3].map((n) => ({ name: `stepfc.${mode}.${k}`, data: { n } })));
    for (const [i, r] of res.entries()) {
      const run = await runEnded(runFor(r, wf).runId, { timeoutMs: 30000 });
      assert.equal(run.status, "succeeded", short(run));
      const sum = out(run, "sum");
      assert.equal(sum.charged, `charged ${i + 1}`);
      assert.equal(sum.after, `after charged ${i + 1}`, "the steps after the planned one replay in order");
      assert.equal(sum.before, null, "a step without its own config has no flow control");
      assert.deepEqual(run.steps.map((s) => s.name), ["before", "charge", "after", "sum"], short(run.steps));
    }
    assert.equal(gauge.max.get("charge"), 1, "one charge step at a time across the runs");
    assert.equal(free.max.get("before"), 3, "the other steps are not limited");
    assert.equal(gauge.total, 3, "each charge step ran once");
    for (const fc of seen) assert.deepEqual(fc, { key: `pay-${mode}-${k}`, parallelism: 1 });
    const mine = answers.filter((a) => a.path.endsWith(wf.name));
    if (mode === "inline") {
      // The plan rode in an inline answer, with the step's flow-control headers (as the Go SDK's).
      const plans = inlineMessages(mine).filter((m) => m.step.targetStep);
      assert.equal(plans.length, 3, short(plans));
      for (const p of plans) {
        assert.deepEqual(p.step, { stepId: 0, stepName: "charge", stepType: "Run", concurrent: 1, targetStep: 2 });
        assert.equal(p.headers["upstash-flow-control-key"], `pay-${mode}-${k}`);
        assert.equal(p.headers["upstash-flow-control-value"], "parallelism=1");
      }
    } else if (mode.startsWith("mixed")) {
      assert.ok(mine.some((a) => a.inline) && mine.some((a) => !a.inline), `both runtimes answered: ${short(mine)}`);
    } else {
      assert.equal(mine.filter((a) => a.inline).length, 0, `no inline answer: ${short(mine)}`);
    }
  });

  test(`${mode}: step.run with flowControl: a config without a limit is refused`, { timeout: 30000 }, async (t) => {
    const k = tag();
    const wf = workflow({
      name: `stepfcbad.${mode}.${k}`,
      triggers: [`stepfcbad.${mode}.${k}`],
      retries: 0,
      handler: async (ctx) => {
        await ctx.step.run("ok", () => 1);
        await ctx.step.run("bad", () => 2, { flowControl: { key: `k-${k}` } });
      },
    });
    await host(t, { app: `stepfcbad-${mode}-${k}`, workflows: [wf], ...modeOptions(mode) });
    const run = await runEnded(runFor(await client.sendEvent({ name: `stepfcbad.${mode}.${k}` }), wf).runId);
    assert.equal(run.status, "failed", short(run));
    // The view ends a failed run's steps with the failed one; only "ok" was recorded.
    assert.deepEqual(run.steps.filter((s) => s.status === "succeeded").map((s) => s.name), ["ok"], short(run.steps));
    assert.equal(run.steps.at(-1).status, "failed", short(run.steps));
  });

  test(`${mode}: step.run with flowControl in a parallel group is refused`, { timeout: 30000 }, async (t) => {
    const k = tag();
    let ran = 0;
    const wf = workflow({
      name: `stepfcgroup.${mode}.${k}`,
      triggers: [`stepfcgroup.${mode}.${k}`],
      handler: async (ctx) => {
        await ctx.step.run("ok", () => 1);
        await Promise.all([
          ctx.step.run("a", () => ran++),
          ctx.step.run("b", () => ran++, { flowControl: { key: `g-${k}`, parallelism: 1 } }),
        ]);
      },
    });
    await host(t, { app: `stepfcgroup-${mode}-${k}`, workflows: [wf], ...modeOptions(mode) });
    const run = await runEnded(runFor(await client.sendEvent({ name: `stepfcgroup.${mode}.${k}` }), wf).runId);
    assert.equal(run.status, "failed", short(run));
    // The view ends a failed run's steps with the failed one; only "ok" was recorded.
    assert.deepEqual(run.steps.filter((s) => s.status === "succeeded").map((s) => s.name), ["ok"], short(run.steps));
    assert.equal(run.steps.at(-1).status, "failed", short(run.steps));
    assert.equal(ran, 0, "no step of the group ran");
  });
}

// One run whose deliveries alternate between the runtimes: the plan written by one is
// run by the other, both ways round.
for (const strip of ["alternate", "alternate-first"]) {
  test(`${strip}: step.run with flowControl: planned by one runtime, run by the other`, { timeout: 30000 }, async (t) => {
    const k = tag();
    const seen = [];
    const wf = workflow({
      name: `stepfcswitch.${strip}.${k}`,
      triggers: [`stepfcswitch.${strip}.${k}`],
      handler: async (ctx) => {
        const a = await ctx.step.run("before", () => 1);
        const b = await ctx.step.run("charge", () => (seen.push(ctx.flowControl), a + 1), { flowControl: { key: `sw-${k}`, rate: 5, period: "1s" } });
        const c = await ctx.step.run("after", () => b + 1);
        return ctx.step.run("sum", () => [a, b, c]);
      },
    });
    const answers = [];
    await host(t, { app: `stepfcswitch-${strip}-${k}`, workflows: [wf], mount: recording(answers, strip) });
    const run = await runEnded(runFor(await client.sendEvent({ name: `stepfcswitch.${strip}.${k}` }), wf).runId);
    assert.equal(run.status, "succeeded", short(run));
    assert.deepEqual(out(run, "sum"), [1, 2, 3]);
    assert.deepEqual(run.steps.map((s) => s.name), ["before", "charge", "after", "sum"], short(run.steps));
    assert.deepEqual(seen, [{ key: `sw-${k}`, rate: 5, period: "1s" }], "the step ran once, admitted under its own key");
    assert.ok(answers.some((a) => a.inline) && answers.some((a) => !a.inline), `both runtimes answered: ${short(answers)}`);
    // The second delivery plans the step, the third runs it: one of them inline.
    const inline = inlineMessages(answers).map((m) => m.step.stepName + (m.step.targetStep ? " (plan)" : ""));
    const [inlined, other] = strip === "alternate" ? ["charge", "charge (plan)"] : ["charge (plan)", "charge"];
    assert.ok(inline.includes(inlined) && !inline.includes(other), `answered inline: ${short(inline)}`);
  });
}
