// waitForEvent + notify (incl. timeout and lookback) and createWebhook / waitForWebhook.

import { test } from "node:test";
import assert from "node:assert/strict";
import {
  Host,
  newWfClient,
  tag,
  short,
  waitFor,
  waitForRun,
  readLogs,
  describeRun,
  assertDeliveries,
  loggedSteps,
  notifyWhenWaiting,
} from "./wflib.mjs";

const client = newWfClient();

test("waitForEvent: client.notify resumes the run with the event data", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const k = tag();
  const eventId = `evt-${k}`;
  let done;
  const url = host.workflow("/wf/wait", async (ctx) => {
    await ctx.run("before", () => "ok");
    const res = await ctx.waitForEvent("wait-evt", eventId, { timeout: "30s" });
    done = await ctx.run("after", () => res);
  });
  const { workflowRunId: runId } = await client.trigger({ url, body: {} });
  const eventData = { hello: "world", n: 42, k };
  const answer = await notifyWhenWaiting(client, eventId, eventData, { describe: () => host.describe("/wf/wait", runId) });
  assert.equal(answer.length, 1, `one waiter notified: ${short(answer)}`);
  assert.equal(typeof answer[0].messageId, "string", short(answer));
  assert.ok(answer[0].waiter, `notify answer carries the waiter: ${short(answer)}`);

  const run = await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/wf/wait" });
  assert.deepEqual(done, { eventData, timeout: false }, short(done));
  assertDeliveries(host, "/wf/wait", runId);
  const w = loggedSteps(run).find((s) => s.stepName === "wait-evt");
  assert.equal(w?.stepType, "Wait", describeRun(run));

  // A second notify finds nobody waiting any more.
  const again = await client.notify({ eventId, eventData: "late" });
  assert.deepEqual(again, [], "the waiter is removed once notified");
});

test("waitForEvent: a 2 s timeout resumes with timeout: true", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const neverEvent = `never-${tag()}`;
  let done;
  const url = host.workflow("/wf/timeout", async (ctx) => {
    const start = await ctx.run("start", () => Date.now());
    const res = await ctx.waitForEvent("wait-timeout", neverEvent, { timeout: 2 });
    done = await ctx.run("after", () => ({ ...res, waited: Date.now() - start }));
  });
  const { workflowRunId: runId } = await client.trigger({ url, body: {} });
  await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/wf/timeout", timeoutMs: 25000 });
  assert.equal(done?.timeout, true, short(done));
  assert.equal(done?.eventData, undefined, short(done));
  assert.ok(done.waited >= 2000, `resumed after ${done.waited} ms, want >= 2000`);
  assert.ok(done.waited < 12000, `resumed after ${done.waited} ms: far too late`);
  assertDeliveries(host, "/wf/timeout", runId);
});

test("waitForEvent lookback: notify with workflowRunId before the wait is reached", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const k = tag();
  const eventId = `lookback-${k}`;
  let done;
  let reachedWait = false;
  const url = host.workflow("/wf/lookback", async (ctx) => {
    await ctx.run("first", () => 1);
    await ctx.sleep("let-notify-arrive-first", 2);
    reachedWait = true;
    const res = await ctx.waitForEvent("wait-lb", eventId, { timeout: "20s" });
    done = await ctx.run("after", () => res);
  });
  const { workflowRunId: runId } = await client.trigger({ url, body: {} });
  const res = await client.notify({ eventId, eventData: { early: k }, workflowRunId: runId });
  assert.equal(reachedWait, false, "the notify must precede the wait for this test to mean anything");
  assert.ok(res && typeof res === "object" && !Array.isArray(res), `notify with a run id answers one object: ${short(res)}`);
  await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/wf/lookback", timeoutMs: 25000 });
  assert.deepEqual(done, { eventData: { early: k }, timeout: false }, short(done));
  assertDeliveries(host, "/wf/lookback", runId);
});

test("createWebhook + waitForWebhook: calling the webhook URL resumes the run with the request", { timeout: 45000 }, async (t) => {
  const host = await Host.start(t);
  const k = tag();
  let hookUrl;
  let done;
  const url = host.workflow("/wf/hook", async (ctx) => {
    const webhook = await ctx.createWebhook("make-hook");
    hookUrl = webhook.webhookUrl;
    const res = await ctx.waitForWebhook("wait-hook", webhook, "30s");
    if (!res.timeout) {
      const body = await res.request.text();
      done = { method: res.request.method, body, hdr: res.request.headers.get("x-hook-hdr"), url: res.request.url };
    } else {
      done = { timeout: true };
    }
    await ctx.run("after", () => "ok");
  });
  const { workflowRunId: runId } = await client.trigger({ url, body: {} });
  await waitFor("the webhook URL from createWebhook", () => hookUrl, { describe: () => host.describe("/wf/hook", runId) });
  assert.ok(hookUrl.startsWith(`${process.env.QSTASH_URL.replace(/\/$/, "")}/v2/workflows/hooks/`), hookUrl);
  assert.ok(hookUrl.includes(runId), `the hook URL names the run: ${hookUrl}`);
  // The server added a secret to the URL's last segment; without it the call is refused.
  const [eventId, secret] = hookUrl.slice(hookUrl.lastIndexOf("/") + 1).split(".");
  assert.match(eventId, /^evt_/, hookUrl);
  assert.ok(Buffer.from(secret ?? "", "base64url").length >= 16, `the hook URL carries a secret of 128 bits or more: ${hookUrl}`);
  const guessed = await fetch(hookUrl.slice(0, hookUrl.lastIndexOf(".")), { method: "POST", body: "guess" });
  assert.equal(guessed.status, 404, `the URL without its secret is refused: ${await guessed.text()}`);

  const resp = await fetch(`${hookUrl}?q=${k}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-hook-hdr": "hh-" + k },
    body: JSON.stringify({ hooked: k }),
  });
  assert.ok(resp.status >= 200 && resp.status < 300, `webhook call answered ${resp.status}: ${await resp.text()}`);
  await waitForRun(runId, { want: "RUN_SUCCESS", host, path: "/wf/hook" });
  assert.equal(done?.method, "POST", short(done));
  assert.deepEqual(JSON.parse(done.body), { hooked: k }, short(done));
  assert.equal(done.hdr, "hh-" + k, short(done));
  assert.ok(done.url.includes(`q=${k}`), `the request URL keeps its query: ${done.url}`);
  assertDeliveries(host, "/wf/hook", runId);
  const run = await readLogs(runId);
  const w = loggedSteps(run).find((s) => s.stepName === "wait-hook");
  assert.equal(w?.stepType, "WaitForWebhook", describeRun(run));
});
