// The workflow serve() that ships inside @upstash/qstash (@upstash/qstash/workflow, the
// predecessor of @upstash/workflow), run against duraton as the live tests of Upstash's
// qstash-js repository (src/client/workflow/integration.test.ts) run it against QStash: each
// run is started by a plain publish and every request to the endpoint is counted.

import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { Client, Receiver } from "@upstash/qstash";
import { serve } from "@upstash/qstash/workflow";
import { Host, env, sleep, tag, waitFor, waitForRun } from "./wflib.mjs";

const qstashClient = new Client({ baseUrl: env.url, token: env.token });

/**
 * Mounts routeFunction with @upstash/qstash/workflow's serve() at path, publishes the initial
 * payload to it and waits until the endpoint has had `count` requests and no more, and the
 * route has reached its end (finished()).
 */
async function runEndpoint(t, { path, payload, routeFunction, count, finished, retries }) {
  const host = await Host.start(t);
  const url = host.url(path);
  // Signatures are verified: the Receiver is made from QSTASH_*_SIGNING_KEY.
  const receiver = new Receiver({ currentSigningKey: env.currentSigningKey, nextSigningKey: env.nextSigningKey });
  const handler = serve(routeFunction, { qstashClient, url, receiver });
  host.routes.set(path, { kind: "workflow", handler });
  await qstashClient.publishJSON({ url, body: payload, headers: { Authentication: "Bearer secretPassword" }, retries });
  await waitFor(`the route at ${path} to finish`, finished, { timeoutMs: 30000, describe: () => host.describe(path) });
  await waitFor(`${count} requests to ${path}`, () => host.deliveries(path).length >= count, { describe: () => host.describe(path) });
  await sleep(1500);
  assert.equal(host.deliveries(path).length, count, host.describe(path));
  return host;
}

const work = (input) => `processed '${input}'`;

describe("@upstash/qstash/workflow serve() as Upstash's qstash-js integration tests run it", { concurrency: true }, () => {
  test("path endpoint: 2 steps in 4 requests", { timeout: 45000 }, async (t) => {
    let result;
    await runEndpoint(t, {
      path: "/path",
      payload: "my-payload",
      count: 4,
      finished: () => result,
      routeFunction: async (ctx) => {
        const r1 = await ctx.run("step1", async () => work(ctx.requestPayload));
        const r2 = await ctx.run("step2", async () => work(r1));
        result = r2;
      },
    });
    assert.equal(result, "processed 'processed 'my-payload''");
  });

  test("path sleep: sleepUntil and sleep between 3 steps in 7 requests", { timeout: 45000 }, async (t) => {
    let result;
    await runEndpoint(t, {
      path: "/sleep",
      payload: undefined,
      count: 7,
      finished: () => result,
      routeFunction: async (ctx) => {
        const a = await ctx.run("step1", async () => Date.now());
        await ctx.sleepUntil("sleep1", Date.now() / 1000 + 3);
        const b = await ctx.run("step2", async () => Date.now());
        await ctx.sleep("sleep2", 2);
        const c = await ctx.run("step3", async () => Date.now());
        result = { payload: ctx.requestPayload, a, b, c };
      },
    });
    assert.equal(result.payload, undefined);
    assert.ok(result.b - result.a >= 2500, `sleepUntil: ${result.b - result.a} ms`);
    assert.ok(result.c - result.b >= 2000, `sleep: ${result.c - result.b} ms`);
  });

  test("sleepWithoutAwait: a sleep in parallel with two steps, 13 requests", { timeout: 45000 }, async (t) => {
    let attempts = 0;
    let result;
    await runEndpoint(t, {
      path: "/sleep-without-await",
      payload: { date: 123, email: "my@mail.com", amount: 10 },
      count: 13,
      finished: () => result,
      routeFunction: async (ctx) => {
        for (let i = 0; i < 3; i++) {
          const charge = await ctx.run("attemptCharge", async () => ({ invoice: ctx.requestPayload, success: ++attempts === 3 }));
          if (charge.success) {
            const [amount, email, slept] = await Promise.all([
              ctx.run("updateDb", async () => charge.invoice.amount),
              ctx.run("sendReceipt", async () => charge.invoice.email),
              ctx.sleep("sleep", 5),
            ]);
            result = { amount, email, slept };
            return;
          }
          await ctx.sleep("retrySleep", 2);
        }
        await ctx.run("paymentFailed", async () => true);
      },
    });
    assert.deepEqual(result, { amount: 10, email: "my@mail.com", slept: undefined });
  });

  test("auth endpoint: the forwarded header lets the run through, 4 requests; a wrong one ends it after 1", { timeout: 45000 }, async (t) => {
    let ok;
    await runEndpoint(t, {
      path: "/auth",
      payload: "my-payload",
      count: 4,
      finished: () => ok,
      routeFunction: async (ctx) => {
        if (ctx.headers.get("authentication") !== "Bearer secretPassword") return;
        const r1 = await ctx.run("step1", async () => work(ctx.requestPayload));
        ok = await ctx.run("step2", async () => work(r1));
      },
    });
    assert.equal(ok, "processed 'processed 'my-payload''");

    let refused = false;
    await runEndpoint(t, {
      path: "/auth-fail",
      payload: "my-payload",
      count: 1,
      retries: 0,
      finished: () => refused,
      routeFunction: async (ctx) => {
        if (ctx.headers.get("authentication") !== "Bearer aDifferentPassword") {
          refused = true;
          return;
        }
        throw new Error("shouldn't be here.");
      },
    });
  });

  test("call endpoint: POST and GET to a third party with a sleep between, 7 requests", { timeout: 45000 }, async (t) => {
    const third = await Host.start(t);
    const target = third.plain("/third", async ({ req, body }) => {
      if (req.method === "GET") return { status: 200, body: `called GET 'third-party-result' '${req.headers["get-header"]}'` };
      if (req.method === "POST") return { status: 200, body: `called POST 'third-party-result' '${req.headers["post-header"]}' '${body}'` };
      return { status: 400, body: "method not allowed" };
    });
    let result;
    await runEndpoint(t, {
      path: "/call",
      payload: "my-payload",
      count: 7,
      finished: () => result,
      routeFunction: async (ctx) => {
        const post = await ctx.call("post call", target, "POST", "post-payload", { "post-header": "post-header-value-x" });
        await ctx.sleep("sleep 1", 2);
        const get = await ctx.call("get call", target, "GET", undefined, { "get-header": "get-header-value-x" });
        result = { post, get };
      },
    });
    assert.equal(result.post, `called POST 'third-party-result' 'post-header-value-x' '"post-payload"'`);
    assert.equal(result.get, "called GET 'third-party-result' 'get-header-value-x'");
  });
  test("client.workflow.cancel of a live run answers true and ends it; an unknown run is a 404 naming it", { timeout: 45000 }, async (t) => {
    const host = await Host.start(t);
    const url = host.url("/cancel");
    const receiver = new Receiver({ currentSigningKey: env.currentSigningKey, nextSigningKey: env.nextSigningKey });
    let after = false;
    host.routes.set("/cancel", {
      kind: "workflow",
      handler: serve(async (ctx) => {
        await ctx.run("step1", async () => "one");
        await ctx.sleep("long", 60);
        after = true;
      }, { qstashClient, url, receiver }),
    });
    await qstashClient.publishJSON({ url, body: "x" });
    const runId = await waitFor("the run id", () => host.deliveries("/cancel").find((d) => d.runId)?.runId);
    // Wait until the sleep is planned: the delivery of step1's result has been answered.
    await waitFor("the sleep to be planned", () => host.deliveries("/cancel").filter((d) => d.status === 200).length >= 3, { describe: () => host.describe("/cancel") });
    assert.equal(await qstashClient.workflow.cancel(runId), true);
    await waitForRun(runId, { want: "RUN_CANCELED" });
    const unknown = `wfr-${tag()}`;
    await assert.rejects(qstashClient.workflow.cancel(unknown), (e) => {
      assert.equal(e.status, 404, e.message);
      assert.ok(e.message.includes(unknown), `the error names the run: ${e.message}`);
      return true;
    });
    assert.equal(after, false);
  });
});
