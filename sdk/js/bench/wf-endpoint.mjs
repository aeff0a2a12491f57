// Endpoint child of `duraton bench workflow --endpoint=ts-native`: an S-step noop workflow
// served by this package's serve() (the built dist/, so `npm run build` first) with its
// Node adapter on a node:http server bound to 127.0.0.1, every delivery verified with
// both signing keys. Deliveries that offer inline answers are answered inline.
//
// The line protocol of cmd/duraton/testdata/compat/bench/wf-endpoint.mjs (--endpoint=ts):
//   stdout "ready http://127.0.0.1:PORT"  once, when listening (the workflow is at /wf)
//   stdout "done <run id>"                when a run's handler completes the first time
//   stdin  "stats"  →  stdout "stats {"cpu_us":…,"overheads_ns":[…],"dups":…}"
//                     cpu_us is process.cpuUsage() (user + system) of this whole process
// It exits when stdin closes.
//
// Usage: node bench/wf-endpoint.mjs STEPS   (QSTASH_URL, QSTASH_TOKEN and both signing keys in env)

import http from "node:http";
import readline from "node:readline";
import { serve, workflow } from "../dist/index.js";

for (const v of ["QSTASH_DEV", "QSTASH_DEV_PORT", "QSTASH_REGION", "UPSTASH_WORKFLOW_URL", "DURATON_URL", "DURATON_TOKEN"]) delete process.env[v];
const need = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (run through duraton bench workflow --endpoint=ts-native)`);
  return v;
};
const steps = Number(process.argv[2] ?? 3);
if (!Number.isInteger(steps) || steps < 1 || steps > 100) throw new Error(`steps must be 1..100, not ${process.argv[2]}`);

const lastStep = new Map(); // run id → hrtime (ns) when its last step function ran
const finished = new Set();
const overheads = []; // ns from a step function's end to the start of the next delivery
let dups = 0;

const wf = workflow({
  name: "wf",
  handler: async (ctx) => {
    const id = ctx.runId;
    const last = lastStep.get(id);
    if (last !== undefined) {
      overheads.push(Number(process.hrtime.bigint() - last));
      lastStep.delete(id);
    }
    for (let i = 0; i < steps; i++) {
      await ctx.step.run(`s${i}`, () => {
        lastStep.set(id, process.hrtime.bigint());
        return i;
      });
    }
    if (finished.has(id)) {
      dups++;
      return;
    }
    finished.add(id);
    process.stdout.write(`done ${id}\n`);
  },
});

let listener = (_req, res) => res.writeHead(503).end();
const server = http.createServer((req, res) => listener(req, res));
server.keepAliveTimeout = 60_000;
await new Promise((resolve, reject) => {
  server.once("error", reject);
  server.listen(0, "127.0.0.1", resolve);
});
const base = `http://127.0.0.1:${server.address().port}`;
const served = serve({
  app: "bench",
  workflows: [wf],
  baseUrl: base,
  registerOnStart: false,
  env: {
    QSTASH_URL: need("QSTASH_URL"),
    QSTASH_TOKEN: need("QSTASH_TOKEN"),
    QSTASH_CURRENT_SIGNING_KEY: need("QSTASH_CURRENT_SIGNING_KEY"),
    QSTASH_NEXT_SIGNING_KEY: need("QSTASH_NEXT_SIGNING_KEY"),
  },
});
listener = served.node;
process.stdout.write(`ready ${base}\n`);

const rl = readline.createInterface({ input: process.stdin });
rl.on("line", (line) => {
  if (line !== "stats") {
    process.stderr.write(`unknown command ${JSON.stringify(line)}\n`);
    process.exit(2);
  }
  const cpu = process.cpuUsage();
  process.stdout.write(`stats ${JSON.stringify({ cpu_us: cpu.user + cpu.system, overheads_ns: overheads, dups })}\n`);
});
rl.on("close", () => {
  server.closeAllConnections?.();
  server.close(() => process.exit(0));
});
