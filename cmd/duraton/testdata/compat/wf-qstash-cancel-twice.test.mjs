// As qstash-js's src/client/workflow.test.ts ("should delete workflow succesfully"):
// DELETE /v2/workflows/runs/{id}?cancel=true on a run that is no longer live is a 404 whose
// body is exactly {"error":"workflowRun <id> not found"} (the SDK test compares the whole
// QstashError message).

import { test } from "node:test";
import assert from "node:assert/strict";
import { Client } from "@upstash/qstash";
import { env, api, tag } from "./wflib.mjs";

const client = new Client({ baseUrl: env.url, token: env.token });

test("client.workflow.cancel twice: the second is a 404 'workflowRun <id> not found'", async () => {
  const runId = `wfr-${tag()}`;
  // A run waiting on a delayed init message (what triggerFirstInvocation publishes).
  const r = await api("POST", `/v2/publish/http://127.0.0.1:9/never`, {
    headers: {
      "Upstash-Delay": "100s",
      "Upstash-Workflow-RunId": runId,
      "Upstash-Workflow-Init": "true",
      "Upstash-Workflow-Url": "http://127.0.0.1:9/never",
      "Upstash-Workflow-Sdk-Version": "1",
      "Content-Type": "application/json",
    },
    body: "{}",
  });
  assert.equal(r.status, 201, r.text);
  assert.equal(await client.workflow.cancel(runId), true);
  await assert.rejects(client.workflow.cancel(runId), (e) => {
    assert.equal(e.status, 404);
    assert.equal(e.message, `{"error":"workflowRun ${runId} not found"}`);
    return true;
  });
});
