// Endpoint child of `duraton bench workflow --endpoint=ts`: an S-step noop workflow served by
// the official serve() of @upstash/workflow (pinned in ../package-lock.json) on a plain
// node:http server bound to 127.0.0.1, every delivery verified with both signing keys.
//
// Same line protocol as the Go children of cmd/duraton/benchproc.go:
//   stdout "ready http://127.0.0.1:PORT"  once, when listening
//   stdout "done <run id>"                when a run's route function completes the first time
//   stdin  "stats"  →  stdout "stats {"cpu_us":…,"overheads_ns":[…],"dups":…}"
//                     cpu_us is process.cpuUsage() (user + system) of this whole process
// It exits when stdin closes.
//
// Usage: node wf-endpoint.mjs STEPS   (QSTASH_URL, QSTASH_TOKEN and both signing keys in env)

import http from "node:http";
import readline from "node:readline";
import { serve } from "@upstash/workflow";

for (const v of ["QSTASH_DEV", "QSTASH_DEV_PORT", "QSTASH_REGION", "UPSTASH_WORKFLOW_URL"]) delete process.env[v];
const need = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (run through duraton bench workflow --endpoint=ts)`);
  return v;
};
const steps = Number(process.argv[2] ?? 3);
if (!Number.isInteger(steps) || steps < 1 || steps > 100) throw new Error(`steps must be 1..100, not ${process.argv[2]}`);

const lastStep = new Map(); // run id → hrtime (ns) when its last step function ran
const finished = new Set();
const overheads = []; // ns from a step function's end to the start of the next delivery
let dups = 0;

const { handler } = serve(
  async (ctx) => {
    const id = ctx.workflowRunId;
    const last = lastStep.get(id);
    if (last !== undefined) {
      overheads.push(Number(process.hrtime.bigint() - last));
      lastStep.delete(id);
    }
    for (let i = 0; i < steps; i++) {
      await ctx.run(`s${i}`, () => {
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
  {
    env: {
      QSTASH_URL: need("QSTASH_URL"),
      QSTASH_TOKEN: need("QSTASH_TOKEN"),
      QSTASH_CURRENT_SIGNING_KEY: need("QSTASH_CURRENT_SIGNING_KEY"),
      QSTASH_NEXT_SIGNING_KEY: need("QSTASH_NEXT_SIGNING_KEY"),
    },
  },
);

// node:http → web Request → serve() handler → node:http, as a plain Node user would mount it.
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", async () => {
    try {
      const headers = new Headers();
      for (const [k, v] of Object.entries(req.headers)) {
        if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(", ") : v);
      }
      const body = req.method === "GET" || req.method === "HEAD" ? undefined : Buffer.concat(chunks);
      const webRes = await handler(new Request(`http://${req.headers.host}${req.url}`, { method: req.method, headers, body }));
      const text = await webRes.text();
      res.writeHead(webRes.status, Object.fromEntries(webRes.headers.entries()));
      res.end(text);
    } catch (e) {
      res.writeHead(500, { "content-type": "text/plain" });
      res.end(String(e?.stack ?? e));
    }
  });
});
server.keepAliveTimeout = 60_000;
await new Promise((resolve, reject) => {
  server.once("error", reject);
  server.listen(0, "127.0.0.1", resolve);
});
process.stdout.write(`ready http://127.0.0.1:${server.address().port}\n`);

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
