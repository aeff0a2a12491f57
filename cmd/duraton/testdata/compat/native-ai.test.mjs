// AI steps (docs/protocol.md, "AI steps and spend controls"): an unmodified @upstash/workflow
// serve() workflow whose context.api.openai.call points (baseURL) at a mock OpenAI-compatible
// API is metered (tokens on GET /runs/{id} and /v2/workflows/logs) and capped by its native
// workflow's cap: the call that would cross maxTokens does not leave, the run fails with
// budget_exceeded and the failure function gets status 402.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Host, tag, short, api, waitFor } from "./wflib.mjs";

const json = (v) => ({ headers: { "content-type": "application/json" }, body: JSON.stringify(v) });
const KEY = "sk-compat-secret-4242";

test("native AI: context.api.openai.call is metered and capped (maxTokens 1000, 400 per call)", { timeout: 60000 }, async (t) => {
  const host = await Host.start(t);
  const llm = await Host.start(t);
  const k = tag();
  const calls = [];
  llm.plain("/v1/chat/completions", ({ req, body }) => {
    calls.push({ auth: req.headers.authorization, body: JSON.parse(body) });
    return {
      status: 200,
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        id: `chatcmpl-${calls.length}`, object: "chat.completion", model: "mock-1",
        choices: [{ index: 0, message: { role: "assistant", content: `answer ${calls.length}` }, finish_reason: "stop" }],
        usage: { prompt_tokens: 300, completion_tokens: 100, total_tokens: 400 },
      }),
    };
  });
  const answers = [];
  const failures = [];
  const url = host.workflow(
    "/native/ai",
    async (ctx) => {
      for (let i = 1; i <= 5; i++) {
        const { status, body } = await ctx.api.openai.call(`ask-${i}`, {
          baseURL: llm.url(""),
          token: KEY,
          operation: "chat.completions.create",
          body: { model: "mock-1", max_tokens: 100, messages: [{ role: "user", content: `question ${i}` }] },
        });
        answers.push({ status, text: body?.choices?.[0]?.message?.content });
      }
    },
    { failureFunction: async ({ failStatus, failResponse }) => { failures.push({ failStatus, failResponse }); } },
  );
  const app = `compat-ai-${k}`;
  const r = await api("PUT", `/apps/${app}`, json({ workflows: [{ name: `ai.${k}`, url, triggers: [{ event: `ask.${k}` }], retries: 2, cap: { maxTokens: 1000 } }] }));
  assert.equal(r.status, 200, short(r.text));
  const ev = await api("POST", "/events", json({ name: `ask.${k}`, data: {} }));
  assert.equal(ev.status, 200, short(ev.text));
  const runId = ev.json.events[0].runs[0].runId;

  let last;
  const run = await waitFor(`run ${runId} failed`, async () => {
    last = (await api("GET", `/runs/${runId}`)).json;
    return last?.status === "failed" ? last : undefined;
  }, { timeoutMs: 30000, intervalMs: 100, describe: () => short(last) });
  await waitFor("the failure function", async () => failures.length > 0 || undefined, { timeoutMs: 15000 });

  assert.equal(calls.length, 3, "exactly three calls reached the provider");
  for (const c of calls) assert.equal(c.auth, `Bearer ${KEY}`, "the provider gets the key");
  assert.deepEqual(run.usage, { inputTokens: 900, outputTokens: 300, tokens: 1200, cost: 0 }, short(run));
  const metered = run.steps.filter((s) => s.usage).map((s) => [s.name, s.usage.tokens, s.usage.model]);
  assert.deepEqual(metered, [["ask-1", 400, "mock-1"], ["ask-2", 400, "mock-1"], ["ask-3", 400, "mock-1"]], short(run.steps));
  assert.ok(run.dlqId, "a dead letter");
  assert.equal(failures.length, 1, "the failure function ran once (no retry of the budget stop)");
  assert.equal(failures[0].failStatus, 402, short(failures));
  assert.match(failures[0].failResponse, /^budget_exceeded: /, short(failures));

  const logs = await api("GET", `/v2/workflows/logs?workflowRunId=${runId}`);
  assert.equal(logs.status, 200);
  assert.deepEqual(logs.json.runs[0].usage, { inputTokens: 900, outputTokens: 300, tokens: 1200, cost: 0 }, short(logs.text));
  for (const path of [`/runs/${runId}`, `/v2/workflows/logs?workflowRunId=${runId}`, "/v2/workflows/dlq", "/v2/dlq"]) {
    const v = await api("GET", path);
    assert.ok(!v.text.includes(KEY), `GET ${path} shows the provider key`);
  }

  // Replay with a raised cap: steps 4 and 5 run, nothing earlier is called again.
  const rep = await api("POST", `/runs/${runId}/replay`, json({ cap: { maxTokens: 5000 } }));
  assert.equal(rep.status, 200, short(rep.text));
  await waitFor(`run ${runId} succeeded`, async () => {
    last = (await api("GET", `/runs/${runId}`)).json;
    return last?.status === "succeeded" ? last : undefined;
  }, { timeoutMs: 30000, intervalMs: 100, describe: () => short(last) });
  assert.deepEqual(calls.map((c) => c.body.messages[0].content), [1, 2, 3, 4, 5].map((i) => `question ${i}`));
  assert.equal(last.usage.tokens, 2000, short(last));
  assert.deepEqual(last.cap, { maxTokens: 5000 });
});
