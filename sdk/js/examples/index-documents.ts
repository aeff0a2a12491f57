// The flow-control documentation's batch example: index.documents folds up to 100
// events into one run (or whatever arrived within 5 s of the first), per index, and
// the run sees them as ctx.events. Run it like sync-account.ts:
//
//   node .build/examples/index-documents.js --demo

import http from "node:http";
import type { AddressInfo } from "node:net";
import { workflow, serve, Client, runFor } from "@duraton/sdk";

/** Stands in for the real indexer. */
async function index(doc: { id: string; index: string; text?: string }): Promise<{ indexed: string }> {
  return { indexed: `${doc.index}/${doc.id}` };
}

export const indexDocuments = workflow({
  name: "index.documents",
  batch: { maxSize: 100, timeoutMs: 5_000, key: "index" },
  handler: async (ctx) => {
    for (const e of ctx.events ?? []) {
      await ctx.step.run(e.data.id, () => index(e.data));
    }
  },
});

async function main() {
  const server = http.createServer();
  await new Promise<void>((r) => server.listen(Number(process.env.PORT ?? 3000), "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  const app = serve({
    app: "docs",
    workflows: [indexDocuments],
    baseUrl: `${process.env.PUBLIC_URL ?? `http://127.0.0.1:${port}`}/api/workflows`,
  });
  server.on("request", app.node);
  await app.ready;
  console.log(`serving ${app.urlOf(indexDocuments)}`);
  if (!process.argv.includes("--demo")) return;

  const client = new Client();
  const sent = await client.sendEvents(
    Array.from({ length: 5 }, (_, i) => ({ name: "index.documents", data: { id: `doc-${i}`, index: "main", text: `text ${i}` } })),
  );
  console.log(`sent ${sent.length} events: ${sent.map((r) => JSON.stringify(runFor(r, indexDocuments))).join(" ")}`);
  // Five events stay under maxSize: the batch flushes 5 s after the first.
  for (;;) {
    const { runs } = await client.listRuns({ workflow: "index.documents", app: "docs" });
    const run = runs.find((r) => r.eventIds.includes(sent[0].id));
    if (run && ["succeeded", "failed", "cancelled"].includes(run.status)) {
      const full = await client.getRun(run.runId);
      console.log(`${run.runId} ${full.status} events=${full.eventIds.length} steps=${full.steps.map((s) => s.name).join(",")}`);
      break;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  server.close();
  server.closeAllConnections();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
