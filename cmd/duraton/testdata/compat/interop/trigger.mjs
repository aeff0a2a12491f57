// Triggers one workflow run with the official @upstash/workflow Client (driven by
// cmd/duraton/interop_test.go, not a node:test file).
//
// Input (env): INTEROP_URL (workflow URL), INTEROP_BODY (JSON, sent as an object so the SDK
// stringifies it), INTEROP_HEADERS (JSON object of user headers, optional), INTEROP_RUN_ID
// (optional run id without the wfr_ prefix).
// Output: one stdout line {"event":"triggered","workflowRunId":"wfr_…"}; exit status 0.

import { newWfClient } from "../wflib.mjs";

const url = process.env.INTEROP_URL;
if (!url) throw new Error("INTEROP_URL is not set");
const body = JSON.parse(process.env.INTEROP_BODY ?? "{}");
const headers = JSON.parse(process.env.INTEROP_HEADERS ?? "{}");
const workflowRunId = process.env.INTEROP_RUN_ID || undefined;

const { workflowRunId: runId } = await newWfClient().trigger({ url, body, headers, workflowRunId });
process.stdout.write(JSON.stringify({ event: "triggered", workflowRunId: runId }) + "\n");
