// flow-control doc, "AI spend controls": tokenThrottle { tokens, perMs, key }. A scope's
// AI usage is debited from its bucket when recorded; while the bucket is not above zero
// the scope's next runs wait to start (nothing fails); another key is not held.

import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { workflow, runFor } from "../dist/index.js";
import { client, host, runEnded, waitFor, tag, short } from "./lib.mjs";

test("tokenThrottle: a team that spent its tokens waits to start its next run; another team does not", { timeout: 60000 }, async (t) => {
  const k = tag();
  const llm = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ id: "c", object: "chat.completion", model: "mock-1", choices: [{ index: 0, message: { role: "assistant", content: "ok" } }], usage: { prompt_tokens: 400, completion_tokens: 100, total_tokens: 500 } }));
    });
  });
  await new Promise((r) => llm.listen(0, "127.0.0.1", r));
  t.after(() => new Promise((r) => llm.close(r)));
  const wf = workflow({
    name: `tt.${k}`,
    triggers: [`tt.${k}`],
    tokenThrottle: { tokens: 100, perMs: 60_000, key: "team" },
    handler: async (ctx) => {
      const r = await ctx.step.ai("ask", { baseURL: `http://127.0.0.1:${llm.address().port}`, token: "sk-test", body: { model: "mock-1", messages: [{ role: "user", content: "hi" }], max_tokens: 100 } });
      return ctx.step.run("done", () => r.status);
    },
  });
  await host(t, { app: `tt-${k}`, workflows: [wf] });
  const send = async (team) => runFor(await client.sendEvent({ name: `tt.${k}`, data: { team } }), wf).runId;

  const first = await send("t1");
  assert.equal((await runEnded(first)).status, "succeeded");
  assert.equal((await client.getRun(first)).usage?.tokens, 500, "the run's AI usage, debited from t1's bucket (100): 400 in debt");
  const held = await send("t1");
  const other = await send("t2");
  assert.equal((await runEnded(other)).status, "succeeded", "t2 has its own bucket");
  const run = await waitFor("t1's next run to wait for its tokens", async () => {
    const r = await client.getRun(held);
    return r.status === "queued" ? r : undefined;
  });
  assert.equal(run.startedAt, undefined, `not started: ${short(run)}`);
  await client.cancelRun(held);
});
