/**
 * A concurrency slot given back when the client goes away mid-body (docs/concurrency.md), end to
 * end: the worker as deployed (`wrangler deploy --dry-run`, wrangler.toml's compatibility flags),
 * served by workerd alone, twice (two isolates), over one private redis-server behind the REST
 * bridge, in front of a local origin that streams slowly. A real HTTP client reads the first chunk
 * through one worker and drops its connection; the next request on the key, through the other
 * worker, is admitted long before the slot's timeout could have freed it. workerd never cancels a
 * body stream made in JS whose read waits on the origin: this holds through its own stream and
 * the request's signal (src/http/release-at-end.ts).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { type ClientRequest, createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startBridge } from "../../bridge/server.mjs";
import { compatibilityFlags, serveWorker, wranglerBundle } from "../../tools/infra.mjs";
import { startPrivateRedis } from "../../tools/redis.mjs";

const TOKEN = "disconnect-e2e";
// Far longer than the test waits: a slot freed in time was released, not lapsed.
const SLOT_TIMEOUT_MS = 120_000;
const dir = mkdtempSync(join(tmpdir(), "edge-limiter-disconnect-"));

type Served = Awaited<ReturnType<typeof serveWorker>>;
const stops: (() => Promise<void>)[] = [];
const workers: Served[] = [];
let origin: Server;
/** Per path, the origin's streams still open: closed when the worker drops the origin fetch. */
const streaming = new Map<string, boolean>();

beforeAll(async () => {
  origin = createServer((req, res) => {
    const path = req.url ?? "";
    if (!path.startsWith("/drip/")) {
      res.end("quick");
      return;
    }
    // A body that never ends by itself: a chunk every 50 ms until the worker lets go of it.
    // Chunks of 6 and of 64 bytes: a client's drop reaches workerd as a different event for
    // each (its request signal aborts for the one, a write to the client fails for the other).
    res.writeHead(200, { "content-type": "text/plain" });
    streaming.set(path, true);
    const chunk = path.includes("/wide") ? `${"x".repeat(63)}\n` : "chunk\n";
    const timer = setInterval(() => res.write(chunk), 50);
    res.write("first\n");
    res.on("close", () => {
      clearInterval(timer);
      streaming.set(path, false);
    });
  });
  await new Promise<void>((resolve) => origin.listen(0, "127.0.0.1", resolve));
  const redis = await startPrivateRedis();
  stops.push(redis.stop);
  const bridge = await startBridge({ port: 0, token: TOKEN, redisUrl: redis.url });
  stops.push(bridge.close);
  const bindings = {
    UPSTASH_REDIS_REST_URL: bridge.url,
    UPSTASH_REDIS_REST_TOKEN: TOKEN,
    LIMITER_TOKEN: TOKEN,
    ORIGIN_URL: `http://127.0.0.1:${(origin.address() as AddressInfo).port}`,
    LIMITER_CONFIG: JSON.stringify({
      prefix: "disconnect-e2e",
      timeoutMs: 5_000,
      rules: [
        {
          name: "one-at-a-time",
          match: { path: ["/drip/*", "/after/*"] },
          algorithm: "concurrency",
          limit: 1,
          timeout: `${SLOT_TIMEOUT_MS / 1000}s`,
          key: "header:x-client",
        },
      ],
    }),
  };
  expect(compatibilityFlags()).toContain("enable_request_signal");
  const scriptPath = await wranglerBundle(join(dir, "ours"));
  // Two isolates that share nothing but the stores, each with wrangler.toml's date and flags.
  for (let i = 0; i < 2; i++) workers.push(await serveWorker({ scriptPath, bindings }));
}, 120_000);

afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.dispose()));
  await new Promise((resolve) => origin.close(resolve));
  for (const stop of stops.reverse()) await stop();
  rmSync(dir, { recursive: true, force: true });
});

/** A GET through a worker; resolves with the status once the answer's first chunk arrived. */
function firstChunk(
  worker: Served,
  path: string,
  client: string,
): Promise<{ status: number; req: ClientRequest }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${worker.url}${path}`,
      { headers: { "x-client": client }, agent: false },
      (res) => {
        res.once("data", () => resolve({ status: res.statusCode ?? 0, req }));
        res.once("end", () => resolve({ status: res.statusCode ?? 0, req }));
      },
    );
    req.once("error", reject);
    req.end();
  });
}

async function statusOf(worker: Served, path: string, client: string): Promise<number> {
  const res = await fetch(`${worker.url}${path}`, { headers: { "x-client": client } });
  await res.arrayBuffer();
  return res.status;
}

for (const body of ["narrow", "wide"]) {
  it(`frees the slot of a client that drops its connection mid-body (${body} chunks), for the other worker`, async () => {
    const [one, two] = workers as [Served, Served];
    const client = `c-${body}-${Date.now()}`;
    const path = `/drip/${body}`;
    const held = await firstChunk(one, path, client);
    expect(held.status).toBe(200);
    // Held while the body is being delivered: the key's one slot is taken, through either worker.
    expect(await statusOf(two, "/after/1", client)).toBe(429);
    held.req.destroy();
    // Polled, bounded far below the slot's timeout: only a release can free it in that time.
    const deadline = Date.now() + 20_000;
    let status = 429;
    while (status === 429 && Date.now() < deadline)
      status = await statusOf(two, "/after/2", client);
    expect(status).toBe(200);
    // The worker lets go of the origin's stream too.
    while (streaming.get(path) && Date.now() < deadline) await statusOf(two, "/quick", "other");
    expect(streaming.get(path)).toBe(false);
  }, 60_000);
}

it("keeps the slot while a client that stays is still reading", async () => {
  const [one, two] = workers as [Served, Served];
  const client = `k-${Date.now()}`;
  const held = await firstChunk(one, "/drip/b", client);
  expect(held.status).toBe(200);
  // Several checks while the body keeps flowing: the slot stays taken.
  for (let i = 0; i < 5; i++) expect(await statusOf(two, `/after/k${i}`, client)).toBe(429);
  held.req.destroy();
}, 60_000);
