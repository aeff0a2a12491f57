// Helpers shared by the files that check, against duraton, what Upstash's own workflow tests
// check against QStash (wf-upstash-*.test.mjs): Upstash's tests start runs with a plain
// QStash publish to the serve() endpoint and count every request the endpoint gets.

import assert from "node:assert/strict";
import { Client as QStashClient } from "@upstash/qstash";
import { env, waitFor, sleep } from "./wflib.mjs";

/** What @upstash/workflow answers (400) to a request its route no longer authorizes. */
export const AUTH_FAIL =
  "Failed to authenticate Workflow request. If this is unexpected, see the caveat https://upstash.com/docs/workflow/basics/caveats#avoid-non-deterministic-code-outside-context-run";

const qstash = new QStashClient({ baseUrl: env.url, token: env.token });

/**
 * Starts a run the way Upstash's tests do: a plain publishJSON to the workflow URL (the SDK
 * then starts the run itself, which costs one more request than client.trigger).
 */
export const publishStart = (url, body, headers = {}, extra = {}) => qstash.publishJSON({ url, body, headers, ...extra });

/** The run id the SDK minted for a publish-started run, read off its deliveries. */
export const runIdOf = (host, path) => waitFor(`a run id on the deliveries to ${path}`, () => host.deliveries(path).find((d) => d.runId)?.runId);

/** Waits until the deliveries to path have stayed at `count` for a while, and asserts it. */
export async function assertSettledCount(host, path, count, { quietMs = 1500, timeoutMs = 30000 } = {}) {
  await waitFor(`${count} requests to ${path}`, () => host.deliveries(path).length >= count, {
    timeoutMs,
    describe: () => host.describe(path),
  });
  await sleep(quietMs);
  assert.equal(host.deliveries(path).length, count, `requests to ${path}: ${host.describe(path)}`);
}
