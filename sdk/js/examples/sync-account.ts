// The flow-control documentation's first example: sync.account, at most 5 runs at once
// per account. Run it against `duraton dev` (with its exports in the shell):
//
//   npm run build && npx tsc -p tsconfig.examples.json
//   node .build/examples/sync-account.js          # serve on :3000 and register the app
//   node .build/examples/sync-account.js --demo   # ... and send events, print the runs
//
// PORT (default 3000; 0 picks one) and PUBLIC_URL (the URL Duraton reaches this process
// at, default http://127.0.0.1:PORT) configure where the routes are served.

import http from "node:http";
import type { AddressInfo } from "node:net";
import { workflow, serve, Client, outcome } from "@duraton/sdk";

/** Stands in for the real work: a call to the account's system. */
async function syncAccount(accountId: string): Promise<{ accountId: string; syncedAt: string }> {
  await new Promise((r) => setTimeout(r, 200));
  return { accountId, syncedAt: new Date().toISOString() };
}

export const syncAccountWorkflow = workflow({
  name: "sync.account",
  concurrency: { limit: 5, key: "accountId" },
  handler: async (ctx) => {
    await ctx.step.run("sync", () => syncAccount(ctx.event.data.accountId));
  },
});

async function main() {
  const server = http.createServer();
  await new Promise<void>((r) => server.listen(Number(process.env.PORT ?? 3000), "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  const app = serve({
    app: "accounts",
    workflows: [syncAccountWorkflow],
    baseUrl: `${process.env.PUBLIC_URL ?? `http://127.0.0.1:${port}`}/api/workflows`,
  });
  server.on("request", app.node);
  await app.ready; // registered on start (PUT /apps/accounts)
  console.log(`serving ${app.urlOf(syncAccountWorkflow)}`);
  if (!process.argv.includes("--demo")) return;

  const client = new Client();
  const results = await client.sendEvents(
    ["a1", "a1", "a1", "a2"].map((accountId, i) => ({ name: "sync.account", data: { accountId, i } })),
  );
  for (const r of results) {
    for (const run of r.runs) {
      if (!("runId" in run)) throw new Error(`event ${r.id}: ${run.workflow} ${outcome(run)}`);
      let got = await client.getRun(run.runId);
      while (!["succeeded", "failed", "cancelled"].includes(got.status)) {
        await new Promise((res) => setTimeout(res, 100));
        got = await client.getRun(run.runId);
      }
      console.log(`${run.runId} ${got.status} ${JSON.stringify(got.steps.map((s) => s.out))}`);
    }
  }
  server.close();
  server.closeAllConnections();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
