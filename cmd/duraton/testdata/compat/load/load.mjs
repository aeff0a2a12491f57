// Load: one 3-step serve() workflow, WF_LOAD_RUNS (default 500) runs triggered concurrently
// with the official workflow Client (batches of triggers in parallel), waited for until all are
// RUN_SUCCESS, then each run's recorded steps are checked through the logs API: stepIds 1..3,
// each exactly once. Exit code 0 = pass. Driven by cmd/duraton/workflow_load_test.go.

import { Host, newWfClient, tag, short, sleep, readLogs, listRunIds, allSteps, describeRun, pool, parseOut } from "../wflib.mjs";

const RUNS = Number(process.env.WF_LOAD_RUNS ?? 500);
const BATCH = Number(process.env.WF_LOAD_BATCH ?? 25);
const DEADLINE_MS = Number(process.env.WF_LOAD_DEADLINE_MS ?? 180000);

const log = (...a) => console.log("load:", ...a);
const failures = [];
const fail = (msg) => {
  failures.push(msg);
  console.log("FAIL", msg);
};

const host = await Host.start();
const client = newWfClient();
const execs = new Map(); // runId → [count s1, s2, s3]
const count = (runId, i) => {
  const c = execs.get(runId) ?? [0, 0, 0];
  c[i]++;
  execs.set(runId, c);
};

const url = host.workflow("/load/three-steps", async (ctx) => {
  const a = await ctx.run("s1", () => {
    count(ctx.workflowRunId, 0);
    return ctx.requestPayload.i;
  });
  const b = await ctx.run("s2", () => {
    count(ctx.workflowRunId, 1);
    return a + 1;
  });
  const c = await ctx.run("s3", () => {
    count(ctx.workflowRunId, 2);
    return b * 2;
  });
  return { i: ctx.requestPayload.i, c };
});

const k = tag();
const ids = Array.from({ length: RUNS }, (_, i) => `load-${k}-${i}`);
const batches = [];
for (let i = 0; i < RUNS; i += BATCH) batches.push(ids.slice(i, i + BATCH).map((id) => ({ id, i: Number(id.split("-").at(-1)) })));

const t0 = Date.now();
const triggered = await Promise.all(
  batches.map(async (b) => client.trigger(b.map(({ id, i }) => ({ url, body: { i }, workflowRunId: id, retries: 3, retryDelay: "500" })))),
);
const runIds = triggered.flat().map((r) => r.workflowRunId);
const tTriggered = Date.now();
log(`triggered ${runIds.length} runs in ${batches.length} parallel batches in ${tTriggered - t0} ms`);
if (runIds.length !== RUNS || new Set(runIds).size !== RUNS) fail(`trigger returned ${runIds.length} run ids (${new Set(runIds).size} distinct), want ${RUNS}`);

// Wait until every run is RUN_SUCCESS (or the deadline passes).
const want = new Set(runIds);
let succeeded = new Set();
let lastPrint = 0;
let lastErr;
while (Date.now() - t0 < DEADLINE_MS) {
  try {
    const listed = await listRunIds({ state: "RUN_SUCCESS", workflowUrl: url });
    succeeded = new Set([...listed].filter((id) => want.has(id)));
    lastErr = undefined;
  } catch (e) {
    lastErr = e;
  }
  if (succeeded.size === RUNS) break;
  if (Date.now() - lastPrint > 5000) {
    lastPrint = Date.now();
    log(`${succeeded.size}/${RUNS} RUN_SUCCESS after ${Date.now() - t0} ms${lastErr ? ` (last logs error: ${lastErr.message})` : ""}`);
  }
  await sleep(250);
}
const tDone = Date.now();
if (succeeded.size !== RUNS) {
  const missing = runIds.filter((id) => !succeeded.has(id));
  fail(`${missing.length} of ${RUNS} runs not RUN_SUCCESS within ${DEADLINE_MS} ms${lastErr ? ` (last logs error: ${lastErr.message})` : ""}`);
  for (const id of missing.slice(0, 5)) {
    let run;
    try {
      run = await readLogs(id);
    } catch (e) {
      run = undefined;
      console.log(`  ${id}: logs error ${e.message}`);
    }
    console.log(`  ${id}: ${describeRun(run)} | ${host.describe("/load/three-steps", id)}`);
  }
}

// Every run: RUN_SUCCESS, stepIds 1..3 each exactly once, the right response.
let checked = 0;
const bad = [];
await pool(runIds, 16, async (id) => {
  let run;
  try {
    run = await readLogs(id);
  } catch (e) {
    bad.push(`${id}: ${e.message}`);
    return;
  }
  checked++;
  const stepIds = allSteps(run)
    .map((s) => (s.stepType === "Initial" ? "initial" : s.stepId))
    .filter((id) => id !== "initial")
    .sort((a, b) => a - b);
  const i = Number(id.split("-").at(-1));
  const problems = [];
  if (run?.workflowState !== "RUN_SUCCESS") problems.push(`state ${run?.workflowState}`);
  if (stepIds.join(",") !== "1,2,3") problems.push(`stepIds [${stepIds}]`);
  const initials = allSteps(run).filter((s) => s.stepType === "Initial").length;
  if (initials > 1) problems.push(`${initials} Initial entries`);
  const resp = parseOut(run?.workflowRunResponse);
  if (run?.workflowState === "RUN_SUCCESS" && (resp?.i !== i || resp?.c !== (i + 1) * 2)) problems.push(`response ${short(run?.workflowRunResponse, 80)}`);
  if (problems.length) bad.push(`${id}: ${problems.join(", ")} — ${describeRun(run)}`);
});
if (bad.length) {
  fail(`${bad.length} of ${RUNS} runs fail the per-run check (stepIds 1..3 exactly once, RUN_SUCCESS)`);
  for (const b of bad.slice(0, 10)) console.log("  " + b);
}

// Step functions executed more than once are allowed (at-least-once) but reported.
let dupExec = 0;
for (const c of execs.values()) dupExec += c.filter((n) => n > 1).length;
const verifyFailures = host.records.filter((d) => /Failed to verify/i.test(d.respBody ?? "")).length;
if (verifyFailures) fail(`${verifyFailures} deliveries failed the SDK's signature verification`);

const secs = (tDone - t0) / 1000;
log(
  `${RUNS} runs (3 steps each): triggered in ${tTriggered - t0} ms, ${succeeded.size} RUN_SUCCESS after ${tDone - t0} ms ` +
    `→ ${(succeeded.size / secs).toFixed(1)} runs/s, ${((succeeded.size * 4) / secs).toFixed(0)} deliveries/s; ` +
    `${host.records.length} deliveries in total, ${checked} runs checked, ${dupExec} step re-executions`,
);
await host.close();
console.log(`${failures.length === 0 ? "PASS" : "FAIL"} load: ${failures.length} problem(s)`);
process.exit(failures.length === 0 ? 0 : 1);
