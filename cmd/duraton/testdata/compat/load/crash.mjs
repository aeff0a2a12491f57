// Crash recovery: serve() workflows mixing sleeps (1–2 s) and Promise.all groups; WF_CRASH_RUNS
// (default 200) runs triggered in staggered batches. The script prints `PROGRESS done=N` as
// runs reach RUN_SUCCESS; cmd/duraton/workflow_crash_test.go SIGKILLs duraton meanwhile and
// restarts it on the same data directory and port. The script tolerates the outage, waits for
// every run to reach RUN_SUCCESS, then checks through the logs API that no run recorded a
// step (stepId, callType step) twice and that each has exactly its expected steps.
// Exit code 0 = pass.

import { Host, newWfClient, tag, sleep, readLogs, listRunIds, allSteps, describeRun, pool } from "../wflib.mjs";

const RUNS = Number(process.env.WF_CRASH_RUNS ?? 200);
const BATCH = 20;
const STAGGER_MS = 300;
const DEADLINE_MS = Number(process.env.WF_CRASH_DEADLINE_MS ?? 180000);

const failures = [];
const fail = (msg) => {
  failures.push(msg);
  console.log("FAIL", msg);
};
const log = (...a) => console.log("crash:", ...a);

const host = await Host.start();
const client = newWfClient();
const execs = new Map(); // `${runId}/${step}` → executions
const count = (ctx, step) => {
  const key = `${ctx.workflowRunId}/${step}`;
  execs.set(key, (execs.get(key) ?? 0) + 1);
};

// A: run, parallel (run, run, sleep 1 s), sleep 1–2 s, run → stepIds 1..6.
const urlA = host.workflow("/crash/a", async (ctx) => {
  const i = await ctx.run("s1", () => {
    count(ctx, "s1");
    return ctx.requestPayload.i;
  });
  const [p1, p2] = await Promise.all([
    ctx.run("p1", () => {
      count(ctx, "p1");
      return i + 1;
    }),
    ctx.run("p2", () => {
      count(ctx, "p2");
      return i + 2;
    }),
    ctx.sleep("p-sleep", 1),
  ]);
  await ctx.sleep("nap", 1 + (i % 2));
  return await ctx.run("final", () => {
    count(ctx, "final");
    return p1 + p2;
  });
});

// B: run, parallel (sleep 1 s, sleep 2 s, run), run → stepIds 1..5.
const urlB = host.workflow("/crash/b", async (ctx) => {
  const i = await ctx.run("s1", () => {
    count(ctx, "s1");
    return ctx.requestPayload.i;
  });
  const [, , z] = await Promise.all([
    ctx.sleep("x", 1),
    ctx.sleep("y", 2),
    ctx.run("z", () => {
      count(ctx, "z");
      return i * 3;
    }),
  ]);
  return await ctx.run("final", () => {
    count(ctx, "final");
    return z + 1;
  });
});

const expected = { a: [1, 2, 3, 4, 5, 6], b: [1, 2, 3, 4, 5] };
const k = tag();
const runs = Array.from({ length: RUNS }, (_, i) => {
  const kind = i % 2 === 0 ? "a" : "b";
  return { i, kind, url: kind === "a" ? urlA : urlB, id: `crash-${k}-${kind}-${i}`, runId: `wfr_crash-${k}-${kind}-${i}` };
});

/** Triggers one batch, retrying through an outage (same run ids: a repeat is deduplicated). */
async function triggerBatch(batch) {
  const deadline = Date.now() + 60000;
  for (;;) {
    try {
      return await client.trigger(batch.map((r) => ({ url: r.url, body: { i: r.i }, workflowRunId: r.id, retries: 5, retryDelay: "1000" })));
    } catch (e) {
      if (Date.now() > deadline) throw e;
      log(`trigger batch retry after: ${e.message}`);
      await sleep(500);
    }
  }
}

const t0 = Date.now();
const pending = [];
for (let i = 0; i < RUNS; i += BATCH) {
  pending.push(triggerBatch(runs.slice(i, i + BATCH)));
  await sleep(STAGGER_MS);
}
const triggered = (await Promise.all(pending)).flat();
if (triggered.length !== RUNS) fail(`trigger returned ${triggered.length} run ids, want ${RUNS}`);
console.log(`TRIGGERED ${triggered.length} in ${Date.now() - t0} ms`);

const want = new Set(runs.map((r) => r.runId));
let done = 0;
let lastErr;
while (Date.now() - t0 < DEADLINE_MS) {
  try {
    const ids = new Set([...(await listRunIds({ state: "RUN_SUCCESS", workflowUrl: urlA })), ...(await listRunIds({ state: "RUN_SUCCESS", workflowUrl: urlB }))]);
    done = [...ids].filter((id) => want.has(id)).length;
    lastErr = undefined;
    console.log(`PROGRESS done=${done}`);
  } catch (e) {
    if (lastErr?.message !== e.message) log(`logs unavailable (${e.cause?.code ?? e.message}); retrying`);
    lastErr = e;
  }
  if (done === RUNS) break;
  await sleep(250);
}
log(`${done}/${RUNS} RUN_SUCCESS after ${Date.now() - t0} ms`);
if (done !== RUNS) fail(`${RUNS - done} of ${RUNS} runs not RUN_SUCCESS within ${DEADLINE_MS} ms`);

const bad = [];
await pool(runs, 16, async (r) => {
  let run;
  try {
    run = await readLogs(r.runId);
  } catch (e) {
    bad.push(`${r.runId}: ${e.message}`);
    return;
  }
  // The Initial entry (stepId 0) may be listed; it too must appear at most once.
  const ids = allSteps(run).map((s) => (s.stepType === "Initial" ? "initial" : s.stepId));
  const seen = new Map();
  for (const id of ids) seen.set(id, (seen.get(id) ?? 0) + 1);
  const twice = [...seen].filter(([, n]) => n > 1).map(([id, n]) => `${id}×${n}`);
  const problems = [];
  if (run?.workflowState !== "RUN_SUCCESS") problems.push(`state ${run?.workflowState}`);
  if (twice.length) problems.push(`steps recorded more than once: ${twice.join(" ")}`);
  const sorted = [...seen.keys()]
    .filter((id) => id !== "initial")
    .sort((a, b) => a - b)
    .join(",");
  if (sorted !== expected[r.kind].join(",")) problems.push(`stepIds {${sorted}}, want {${expected[r.kind]}}`);
  if (problems.length) bad.push(`${r.runId}: ${problems.join("; ")} — ${describeRun(run)}`);
});
if (bad.length) {
  fail(`${bad.length} of ${RUNS} runs fail the per-run check`);
  for (const b of bad.slice(0, 10)) console.log("  " + b);
}

let reExec = 0;
for (const n of execs.values()) if (n > 1) reExec++;
const verifyFailures = host.records.filter((d) => /Failed to verify/i.test(d.respBody ?? "")).length;
if (verifyFailures) fail(`${verifyFailures} deliveries failed the SDK's signature verification`);
log(`${host.records.length} deliveries; ${reExec} step functions executed more than once (allowed across a crash)`);
await host.close();
console.log(`${failures.length === 0 ? "PASS" : "FAIL"} crash: ${failures.length} problem(s)`);
process.exit(failures.length === 0 ? 0 : 1);
