// Compile-time checks of the run view and search types (tsc -p tsconfig.test.json).
import { Client, type Run, type RunErrorCode, type BulkResult } from "@duraton/sdk";

declare const client: Client;

export async function views(): Promise<void> {
  const r: Run = await client.getRun("wfr_1");
  // steps is always present: mapping it needs no guard.
  const names: string[] = r.steps.map((s) => s.name + s.startedAt + s.endedAt);
  const code: RunErrorCode | undefined = r.error?.code;
  const status: number | undefined = r.steps[0]?.error?.status;
  if (r.cancelledBy && "singleton" in r.cancelledBy) {
    const holder: string = r.cancelledBy.singleton;
    void holder;
  }
  // @ts-expect-error an error is an object, not a string
  const wrong: string = r.error;
  void [names, code, status, wrong];
}

export async function search(): Promise<void> {
  const page = await client.listRuns({ workflow: "sync", from: "2026-07-01T10:00:00Z", to: Date.now(), q: 'event.data.accountId == "a1"' });
  const n: number = page.runs.length;
  const res: BulkResult = await client.replayRuns({ workflow: "sync", status: "failed", dryRun: true, cap: { maxTokens: 5000 } });
  const all: BulkResult = await client.cancelRuns({ all: true });
  // @ts-expect-error status is a run status
  await client.cancelRuns({ status: "broken" });
  void [n, res.matched, all.cursor];
}
