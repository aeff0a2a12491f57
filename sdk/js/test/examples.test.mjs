// The examples in examples/ (compiled to .build/examples by tsconfig.examples.json) run
// as programs: they serve, register on start, send events and print their runs. They run
// against the second duraton process, so that their apps ("accounts", "docs") do not
// meet the flow-control tests' workflows of the same names.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { ceilingEnv } from "./lib.mjs";

const run = promisify(execFile);
const js = (name) => fileURLToPath(new URL(`../.build/examples/${name}.js`, import.meta.url));

async function demo(name) {
  const { stdout } = await run(process.execPath, [js(name), "--demo"], {
    env: { PATH: process.env.PATH, ...ceilingEnv(), PORT: "0" },
    timeout: 40000,
  });
  return stdout;
}

test("examples/sync-account.ts runs: four events, four succeeded runs", { timeout: 60000 }, async () => {
  const out = await demo("sync-account");
  assert.match(out, /^serving http:\/\/127\.0\.0\.1:\d+\/api\/workflows\/sync\.account$/m, out);
  const runs = out.split("\n").filter((l) => l.startsWith("wfr_"));
  assert.equal(runs.length, 4, out);
  for (const l of runs) assert.match(l, /^wfr_\S+ succeeded .*"accountId":"a[12]"/, l);
});

test("examples/index-documents.ts runs: five events batched into one run of five steps", { timeout: 60000 }, async () => {
  const out = await demo("index-documents");
  assert.match(out, /"batched":true/, out);
  assert.match(out, /^wfr_\S+ succeeded events=5 steps=doc-0,doc-1,doc-2,doc-3,doc-4$/m, out);
});
