// Schedules through the SDK: client.schedules.create/get/list/pause/resume/delete, and a
// real tick delivered to a local endpoint, verified with the official Receiver.

import { test } from "node:test";
import assert from "node:assert/strict";
import { newClient, startEndpoint, waitFor, tag, rejectsWithStatus } from "./lib.mjs";

const client = newClient();

test("a schedule delivers its message on the next minute, signed and marked", { timeout: 90000 }, async (t) => {
  const ep = await startEndpoint(t);
  const scheduleId = `sched-${tag()}`;
  t.after(() => client.schedules.delete(scheduleId).catch(() => {}));

  const created = await client.schedules.create({
    destination: `${ep.url}/tick`,
    cron: "* * * * *",
    scheduleId,
    body: JSON.stringify({ hello: "schedule" }),
    headers: { "Content-Type": "application/json", "x-tenant": "a" },
    retries: 1,
    label: "nightly",
  });
  assert.equal(created.scheduleId, scheduleId);

  const s = await client.schedules.get(scheduleId);
  assert.equal(s.scheduleId, scheduleId);
  assert.equal(s.cron, "* * * * *");
  assert.equal(s.destination, `${ep.url}/tick`);
  assert.equal(s.retries, 1);
  assert.equal(s.isPaused, false);
  assert.equal(s.body, JSON.stringify({ hello: "schedule" }));
  assert.deepEqual(s.labels, ["nightly"]);
  assert.ok(s.nextScheduleTime > Date.now() - 1000 && s.nextScheduleTime <= Date.now() + 61000, `nextScheduleTime ${s.nextScheduleTime}`);

  // The first tick is at most a minute away.
  const d = await waitFor("the first tick", () => ep.at("/tick")[0], { timeoutMs: 75000 });
  ep.assertAllVerified();
  assert.equal(d.header("upstash-schedule-id"), scheduleId);
  assert.equal(d.header("x-tenant"), "a");
  assert.deepEqual(JSON.parse(d.body), { hello: "schedule" });

  const msg = await waitFor("the tick's log", async () => {
    const { logs } = await client.logs({ filter: { messageId: d.messageId, state: "DELIVERED" } });
    return logs[0];
  });
  assert.equal(msg.messageId, d.messageId);
  const after = await client.schedules.get(scheduleId);
  assert.ok(after.lastScheduleTime > 0, "lastScheduleTime is set after a tick");
  assert.ok(after.nextScheduleTime > after.lastScheduleTime);
});

test("schedules list, pause, resume and delete", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const { scheduleId } = await client.schedules.create({ destination: `${ep.url}/daily`, cron: "CRON_TZ=Europe/Berlin 0 9 * * *" });
  t.after(() => client.schedules.delete(scheduleId).catch(() => {}));
  assert.match(scheduleId, /^scd_/);

  const all = await client.schedules.list();
  assert.ok(all.some((s) => s.scheduleId === scheduleId), `list() must contain ${scheduleId}`);

  await client.schedules.pause({ schedule: scheduleId });
  assert.equal((await client.schedules.get(scheduleId)).isPaused, true);
  await client.schedules.resume({ schedule: scheduleId });
  const resumed = await client.schedules.get(scheduleId);
  assert.equal(resumed.isPaused, false);
  const next = new Date(resumed.nextScheduleTime);
  const berlin = new Intl.DateTimeFormat("en-GB", { timeZone: "Europe/Berlin", hour: "2-digit", minute: "2-digit" }).format(next);
  assert.equal(berlin, "09:00", "the next tick is 09:00 in Berlin");

  await client.schedules.delete(scheduleId);
  await rejectsWithStatus(client.schedules.get(scheduleId), 404, "get after delete");
  assert.ok(!(await client.schedules.list()).some((s) => s.scheduleId === scheduleId));
});

test("a bad cron expression is a 400 naming Upstash-Cron", async () => {
  await assert.rejects(
    client.schedules.create({ destination: "http://127.0.0.1:9/x", cron: "every day" }),
    (e) => e.status === 400 && /Upstash-Cron/.test(e.message),
  );
});
