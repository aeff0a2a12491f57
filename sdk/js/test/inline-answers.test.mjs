// The inline runtime's answers, delivery by delivery, without a server: signed
// deliveries as Duraton sends them (history in the body, Duraton-Inline offered) to the
// Fetch handler, and the answers' kinds, step messages and bodies checked.

import { test } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { workflow, serve } from "../dist/index.js";

const keys = { current: "sig_current_key", next: "sig_next_key" };
const env = { QSTASH_URL: "http://127.0.0.1:9", QSTASH_TOKEN: "t", QSTASH_CURRENT_SIGNING_KEY: keys.current, QSTASH_NEXT_SIGNING_KEY: keys.next };
const base = "http://app.test/wf";
const b64 = (s) => Buffer.from(s).toString("base64");
const b64u = (v) => Buffer.from(JSON.stringify(v)).toString("base64url");

function sign(url, body) {
  const now = Math.floor(Date.now() / 1000);
  const claims = { iss: "Upstash", sub: url, jti: crypto.randomUUID(), body: crypto.createHash("sha256").update(body).digest("base64url"), iat: now, nbf: now - 1, exp: now + 300 };
  const head = `${b64u({ alg: "HS256", typ: "JWT" })}.${b64u(claims)}`;
  return `${head}.${crypto.createHmac("sha256", keys.current).update(head).digest("base64url")}`;
}

/** A delivery of run "wfr_t" to workflow name with these recorded steps after the payload. */
function delivery(name, payload, steps = [], { inline = "16777216", sign: signed = true } = {}) {
  const url = `${base}/${name}`;
  const history = [{ messageId: "msg_0", body: b64(JSON.stringify(payload)), callType: "step" }, ...steps.map((s, i) => ({ messageId: `msg_${i + 1}`, body: b64(JSON.stringify(s)), callType: "step" }))];
  const body = JSON.stringify(history);
  const headers = { "upstash-workflow-runid": "wfr_t", "upstash-workflow-sdk-version": "1", "upstash-workflow-url": url, "upstash-workflow-createdat": "1700000000000", "content-type": "application/json" };
  if (inline) headers["duraton-inline"] = inline;
  if (signed) headers["upstash-signature"] = sign(url, body);
  return new Request(url, { method: "POST", headers, body });
}

const runStep = (id, name, value) => ({ stepId: id, stepName: name, stepType: "Run", out: JSON.stringify(value), concurrent: 1 });
const entries = (text) => JSON.parse(text).map((e) => ({ ...e, body: JSON.parse(e.body) }));

function served(wf) {
  return serve({ app: "t", workflows: [wf], baseUrl: base, env, registerOnStart: false });
}

test("inline: a step's result goes on to the next step, whose call answers it; the last one rides with the end", async () => {
  const ran = [];
  const wf = workflow({
    name: "three",
    handler: async (ctx) => {
      const a = await ctx.step.run("a", () => (ran.push("a"), { n: ctx.event.data.n + 1 }));
      const b = await ctx.step.run("b", () => (ran.push("b"), a.n * 2));
      return { a, b };
    },
  });
  const s = served(wf);
  // First delivery: a runs, its result is deferred, b's call ends the delivery with it.
  let res = await s.fetch(delivery("three", { n: 1 }));
  assert.equal(res.status, 200);
  assert.equal(res.headers.get("duraton-inline"), "steps");
  const [first] = entries(await res.text());
  assert.equal(first.destination, `${base}/three`);
  assert.equal(first.headers["upstash-workflow-runid"], "wfr_t");
  assert.equal(first.headers["upstash-workflow-init"], "false");
  assert.deepEqual(first.body, runStep(1, "a", { n: 2 }));
  assert.deepEqual(ran, ["a"], "b did not run in the delivery that answers a");
  // Second delivery (a recorded): b runs and the handler ends: result and end together.
  res = await s.fetch(delivery("three", { n: 1 }, [runStep(1, "a", { n: 2 })]));
  assert.equal(res.headers.get("duraton-inline"), "end");
  const text = await res.text();
  const stepsBytes = Number(res.headers.get("duraton-inline-steps"));
  assert.ok(stepsBytes > 0);
  const [second] = entries(text.slice(0, stepsBytes));
  assert.deepEqual(second.body, runStep(2, "b", 4));
  assert.deepEqual(JSON.parse(text.slice(stepsBytes)), { a: { n: 2 }, b: 4 });
  assert.deepEqual(ran, ["a", "b"]);
});

test("inline: a parallel group publishes its plan steps, then each branch its result; all recorded, the group resolves", async () => {
  const wf = workflow({
    name: "par",
    handler: async (ctx) => {
      const [x, y] = await Promise.all([ctx.step.run("x", () => 1), ctx.step.run("y", () => 2)]);
      return x + y;
    },
  });
  const s = served(wf);
  let res = await s.fetch(delivery("par", {}));
  assert.equal(res.headers.get("duraton-inline"), "steps");
  const plans = entries(await res.text()).map((e) => e.body);
  assert.deepEqual(plans, [
    { stepId: 0, stepName: "x", stepType: "Run", concurrent: 2, targetStep: 1 },
    { stepId: 0, stepName: "y", stepType: "Run", concurrent: 2, targetStep: 2 },
  ]);
  // Each plan step's delivery runs its branch (the history ends with that plan step).
  res = await s.fetch(delivery("par", {}, [plans[0]]));
  assert.deepEqual(entries(await res.text()).map((e) => e.body), [{ stepId: 1, stepName: "x", stepType: "Run", out: "1", concurrent: 2 }]);
  res = await s.fetch(delivery("par", {}, [plans[0], plans[1]]));
  assert.deepEqual(entries(await res.text()).map((e) => e.body), [{ stepId: 2, stepName: "y", stepType: "Run", out: "2", concurrent: 2 }]);
  // A branch's result while the other is pending: nothing to do.
  res = await s.fetch(delivery("par", {}, [plans[0], plans[1], { stepId: 1, stepName: "x", stepType: "Run", out: "1", concurrent: 2 }]));
  assert.equal(res.headers.get("duraton-inline"), null);
  assert.equal((await res.json()).finishCondition, "success");
  const results = [
    { stepId: 1, stepName: "x", stepType: "Run", out: "1", concurrent: 2 },
    { stepId: 2, stepName: "y", stepType: "Run", out: "2", concurrent: 2 },
  ];
  res = await s.fetch(delivery("par", {}, [...plans, ...results]));
  assert.equal(res.headers.get("duraton-inline"), "end");
  assert.equal(await res.text(), "3");
});

test("inline: a sleep is a delayed step message; a result JSON cannot encode fails the delivery (500) instead of leaving it unanswered", async () => {
  const wf = workflow({
    name: "odd",
    handler: async (ctx) => {
      await ctx.step.run("a", () => 1);
      await ctx.step.sleep("nap", "5s");
      return { big: 1n };
    },
  });
  const s = served(wf);
  let res = await s.fetch(delivery("odd", {}, [runStep(1, "a", 1)]));
  const [nap] = entries(await res.text());
  assert.equal(nap.headers["upstash-delay"], "5s");
  assert.deepEqual(nap.body, { stepId: 2, stepName: "nap", stepType: "SleepFor", sleepFor: "5s", concurrent: 1 });
  res = await s.fetch(delivery("odd", {}, [runStep(1, "a", 1), { stepId: 2, stepName: "nap", stepType: "SleepFor", sleepFor: "5s", concurrent: 1 }]));
  assert.equal(res.status, 500);
  assert.match((await res.json()).message, /BigInt/);
});

test("inline: a step that differs from the history fails; a non-retryable error answers 489", async () => {
  const { WorkflowNonRetryableError } = await import("@upstash/workflow");
  const wf = workflow({
    name: "strict",
    handler: async (ctx) => {
      await ctx.step.run("renamed", () => 1);
      throw new WorkflowNonRetryableError("stop here");
    },
  });
  const s = served(wf);
  let res = await s.fetch(delivery("strict", {}, [runStep(1, "a", 1)]));
  assert.equal(res.status, 500);
  assert.match((await res.json()).message, /Incompatible step name/);
  res = await s.fetch(delivery("strict", {}, [runStep(1, "renamed", 1)]));
  assert.equal(res.status, 489);
  assert.equal(res.headers.get("upstash-nonretryable-error"), "true");
  assert.equal((await res.json()).message, "stop here");
});

test("inline: an unsigned delivery is left to @upstash/workflow's receiver, which refuses it", async () => {
  const wf = workflow({ name: "plain", handler: async (ctx) => ctx.step.run("a", () => 1) });
  const unsigned = await served(wf).fetch(delivery("plain", {}, [], { sign: false }));
  assert.equal(unsigned.headers.get("duraton-inline"), null);
  assert.ok(unsigned.status >= 400, `refused (${unsigned.status})`);
});
