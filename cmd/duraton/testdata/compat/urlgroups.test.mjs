// URL groups through the SDK: client.urlGroups.* and publish/batch to a group name, which
// fan out one message per endpoint, each verified with the official Receiver.

import { test } from "node:test";
import assert from "node:assert/strict";
import { newClient, startEndpoint, waitFor, tag, rejectsWithStatus } from "./lib.mjs";

const client = newClient();

test("urlGroups: add, get, list, remove endpoints, delete", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const name = `grp-${tag()}`;
  t.after(() => client.urlGroups.delete(name).catch(() => {}));

  await client.urlGroups.addEndpoints({ name, endpoints: [{ name: "a", url: `${ep.url}/a` }, { url: `${ep.url}/b` }] });
  const g = await client.urlGroups.get(name);
  assert.equal(g.name, name);
  assert.deepEqual(g.endpoints, [{ name: "a", url: `${ep.url}/a` }, { url: `${ep.url}/b` }]);
  assert.ok(g.createdAt > 0 && g.updatedAt >= g.createdAt);
  assert.ok((await client.urlGroups.list()).some((x) => x.name === name));

  await client.urlGroups.removeEndpoints({ name, endpoints: [{ name: "a" }] });
  assert.deepEqual((await client.urlGroups.get(name)).endpoints, [{ url: `${ep.url}/b` }]);

  await client.urlGroups.delete(name);
  await rejectsWithStatus(client.urlGroups.get(name), 404, "get after delete");
});

test("publishJSON to a url group fans out one signed message per endpoint", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const urlGroup = `fan-${tag()}`;
  t.after(() => client.urlGroups.delete(urlGroup).catch(() => {}));
  await client.urlGroups.addEndpoints({
    name: urlGroup,
    endpoints: [{ name: "one", url: `${ep.url}/one` }, { url: `${ep.url}/two` }, { url: `${ep.url}/three` }],
  });

  const res = await client.publishJSON({ urlGroup, body: { hi: 1 }, headers: { "x-tenant": "t" }, retries: 0 });
  assert.ok(Array.isArray(res), `a url group answers an array: ${JSON.stringify(res)}`);
  assert.equal(res.length, 3);
  assert.equal(new Set(res.map((r) => r.messageId)).size, 3, "own id per endpoint");
  assert.deepEqual(res.map((r) => r.url).sort(), [`${ep.url}/one`, `${ep.url}/three`, `${ep.url}/two`]);

  await waitFor("three deliveries", () => res.every((r) => ep.forMessage(r.messageId).length === 1));
  ep.assertAllVerified();
  for (const d of ep.deliveries) {
    assert.deepEqual(JSON.parse(d.body), { hi: 1 });
    assert.equal(d.header("x-tenant"), "t");
  }
  const { logs } = await waitFor("the delivered logs", async () => {
    const l = await client.logs({ filter: { urlGroup, state: "DELIVERED" } });
    return l.logs.length === 3 && l;
  });
  assert.ok(logs.every((l) => l.urlGroup === urlGroup), "logs name the group (urlGroup)");
  assert.equal(logs.find((l) => l.url === `${ep.url}/one`).endpointName, "one");
});

test("batch with a url group entry answers an array for it", { timeout: 30000 }, async (t) => {
  const ep = await startEndpoint(t);
  const urlGroup = `batch-${tag()}`;
  t.after(() => client.urlGroups.delete(urlGroup).catch(() => {}));
  await client.urlGroups.addEndpoints({ name: urlGroup, endpoints: [{ url: `${ep.url}/g1` }, { url: `${ep.url}/g2` }] });

  const res = await client.batchJSON([
    { urlGroup, body: { g: true } },
    { url: `${ep.url}/single`, body: { g: false } },
  ]);
  assert.equal(res.length, 2);
  assert.ok(Array.isArray(res[0]) && res[0].length === 2, `group entry: ${JSON.stringify(res[0])}`);
  assert.equal(typeof res[1].messageId, "string");
  await waitFor("three deliveries", () => ep.deliveries.length === 3);
  ep.assertAllVerified();
  assert.deepEqual(ep.deliveries.map((d) => d.path).sort(), ["/g1", "/g2", "/single"]);
});

test("publishing to a url group that does not exist is a 404", async () => {
  await rejectsWithStatus(client.publishJSON({ urlGroup: `missing-${tag()}`, body: {} }), 404, "publish to a missing group");
});
