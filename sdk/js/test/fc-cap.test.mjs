// flow-control doc, "AI spend controls": cap { maxCost, maxTokens }. The step.ai call that
// would cross the run's cap does not start; the run fails with a BudgetError, which the
// failure handler receives. A replay under a raised cap resumes the run from that step.

import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { workflow, runFor, BudgetError, isBudgetError } from "../dist/index.js";
import { client, host, runEnded, waitFor, tag, short } from "./lib.mjs";

/** An OpenAI-compatible chat completions endpoint: answers with usage = (10 prompt, max_tokens completion) tokens. */
async function mockOpenAI(t) {
  const calls = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      const b = JSON.parse(body || "{}");
      calls.push({ path: req.url, auth: req.headers.authorization, body: b });
      const completion = b.max_tokens ?? 16;
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({
        id: `chatcmpl-${calls.length}`,
        object: "chat.completion",
        model: b.model,
        choices: [{ index: 0, message: { role: "assistant", content: `answer ${calls.length}` }, finish_reason: "stop" }],
        usage: { prompt_tokens: 10, completion_tokens: completion, total_tokens: 10 + completion },
      }));
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise((r) => server.close(r)));
  return { url: `http://127.0.0.1:${server.address().port}`, calls };
}

test("cap: the AI step that would cross maxTokens halts the run with a BudgetError; a replay under a raised cap resumes it", { timeout: 60000 }, async (t) => {
  const k = tag();
  const ai = await mockOpenAI(t);
  const failures = [];
  const summarize = workflow({
    name: `summarize.${k}`,
    triggers: [`summarize.${k}`],
    retries: 0,
    cap: { maxTokens: 100 },
    handler: async (ctx) => {
      const ask = (name, max_tokens) =>
        ctx.step.ai(name, { baseURL: ai.url, token: "sk-test", body: { model: "mock-1", messages: [{ role: "user", content: name }], max_tokens } });
      const first = await ask("first", 40); // 10 + 40 = 50 tokens: within the cap
      const second = await ask("second", 60); // 50 recorded + 60 possible > 100: refused before it starts
      return ctx.step.run("done", () => [first.body.choices[0].message.content, second.body.choices[0].message.content]);
    },
    onFailure: async (f) => {
      failures.push(f);
    },
  });
  await host(t, { app: `cap-${k}`, workflows: [summarize] });

  const r = runFor(await client.sendEvent({ name: `summarize.${k}`, data: {} }), summarize);
  const run = await runEnded(r.runId, { timeoutMs: 30000 });
  assert.equal(run.status, "failed", short(run));
  assert.equal(ai.calls.length, 1, `the second call never reached the provider: ${short(ai.calls)}`);
  assert.equal(ai.calls[0].path, "/v1/chat/completions");
  assert.equal(ai.calls[0].auth, "Bearer sk-test");
  assert.equal(run.usage?.tokens, 50, `the run's recorded spend: ${short(run.usage)}`);

  await waitFor("the failure handler", () => failures.length === 1);
  const err = failures[0].error;
  assert.ok(err instanceof BudgetError, `the failure handler receives a BudgetError: ${short(err)} ${err?.message}`);
  assert.ok(isBudgetError(err));
  assert.equal(err.status, 402);
  assert.equal(err.code, "budget_exceeded");
  assert.deepEqual(err.cap, { maxTokens: 100 }, "the whole answer reached the failure handler, not only its message");
  assert.equal(err.spent?.tokens, 50, short(err.details));
  assert.equal(failures[0].runId, r.runId);

  await client.replayRun(r.runId, { cap: { maxTokens: 1000 } });
  const replayed = await waitFor("the replayed run to succeed", async () => {
    const x = await client.getRun(r.runId);
    return x.status === "succeeded" ? x : undefined;
  }, { timeoutMs: 30000 });
  assert.equal(ai.calls.length, 2, "the replay made the refused call, not the first one again");
  const done = replayed.steps.find((s) => s.name === "done");
  assert.deepEqual(done.out, ["answer 1", "answer 2"]);
});
