/**
 * A client that drops an event stream mid-body is charged the usage its origin already reported,
 * once (docs/usage.md, "Where usage is read"), end to end: the worker as deployed (`wrangler
 * deploy --dry-run`, wrangler.toml's flags) served by workerd alone, twice, over one private
 * redis-server behind the REST bridge, in front of an origin whose stream reports its usage in
 * its first event and then never ends. A real HTTP client reads the first chunk through one worker
 * and destroys its socket; the other worker then sees the charge, and the origin's stream is let
 * go. The rule holds no concurrency slot: nothing but the usage reading waits on the body.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { type ClientRequest, createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startBridge } from "../../bridge/server.mjs";
import { serveWorker, wranglerBundle } from "../../tools/infra.mjs";
import { startPrivateRedis } from "../../tools/redis.mjs";

const TOKEN = "usage-disconnect-e2e";
const LIMIT = 1_000;
const RESERVATION = 100;
const USED = 7;
const dir = mkdtempSync(join(tmpdir(), "edge-limiter-usage-disconnect-"));

type Served = Awaited<ReturnType<typeof serveWorker>>;
const stops: (() => Promise<void>)[] = [];
const workers: Served[] = [];
let origin: Server;
/** Per path, the origin's streams still open: closed when the worker drops the origin fetch. */
const streaming = new Map<string, boolean>();

beforeAll(async () => {
  origin = createServer((req, res) => {
    const path = req.url ?? "";
    res.writeHead(200, { "content-type": "text/event-stream" });
    streaming.set(path, true);
    // Chunks of two sizes: a client's drop reaches workerd as a different event for each (its
    // request signal aborts for the one, a write to the client fails for the other).
    const filler = path.includes("/wide") ? `: ${"x".repeat(60)}\n\n` : ": x\n\n";
    res.write(`data: {"usage":{"total_tokens":${USED}}}\n\n`);
    const timer = setInterval(() => res.write(filler), 50);
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
      prefix: "usage-disconnect-e2e",
      timeoutMs: 5_000,
      rules: [
        {
          name: "tokens",
          match: { path: "/v1/*" },
          limit: LIMIT,
          window: "1m",
          cost: RESERVATION,
          key: "header:x-client",
          usage: { json: "usage.total_tokens" },
        },
      ],
    }),
  };
  const scriptPath = await wranglerBundle(join(dir, "ours"));
  for (let i = 0; i < 2; i++) workers.push(await serveWorker({ scriptPath, bindings }));
}, 120_000);

afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.dispose()));
  await new Promise((resolve) => origin.close(resolve));
  for (const stop of stops.reverse()) await stop();
  rmSync(dir, { recursive: true, force: true });
});

/** A GET through a worker; resolves once the answer's first chunk arrived. */
function firstChunk(worker: Served, path: string, client: string) {
  return new Promise<{ status: number; rateLimit: string; req: ClientRequest }>(
    (resolve, reject) => {
      const req = request(
        `${worker.url}${path}`,
        { headers: { "x-client": client }, agent: false },
        (res) => {
          const answer = () =>
            resolve({ status: res.statusCode ?? 0, rateLimit: `${res.headers.ratelimit}`, req });
          res.once("data", answer);
          res.once("end", answer);
        },
      );
      req.once("error", reject);
      req.end();
    },
  );
}

/** What the client has left, through /check: 1 unit checked, then settled at 0 (nothing kept). */
async function remaining(worker: Served, client: string): Promise<number> {
  const post = (path: string, body: unknown) =>
    fetch(`${worker.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
      body: JSON.stringify(body),
    }).then((res) => res.json() as Promise<{ remaining: number; receipt: string }>);
  const check = await post("/check", { rule: "tokens", key: client, cost: 1 });
  await post("/check/settle", { receipt: check.receipt, usage: 0 });
  return check.remaining + 1;
}

for (const body of ["narrow", "wide"]) {
  it(`charges a client that drops mid-stream the usage already reported, once (${body} chunks)`, async () => {
    const [one, two] = workers as [Served, Served];
    const client = `c-${body}-${Date.now()}`;
    const path = `/v1/${body}`;
    const held = await firstChunk(one, path, client);
    expect(held.status).toBe(200);
    // The headers went out before the usage: they count the reservation.
    expect(held.rateLimit).toContain(`r=${LIMIT - RESERVATION}`);
    expect(await remaining(two, client)).toBe(LIMIT - RESERVATION);
    held.req.destroy();
    // Polled, bounded: the settle runs once the worker has seen the drop.
    const deadline = Date.now() + 20_000;
    let left = LIMIT - RESERVATION;
    while (left !== LIMIT - USED && Date.now() < deadline) left = await remaining(two, client);
    expect(left).toBe(LIMIT - USED);
    // The worker lets go of the origin's stream too, and the charge stays as it is.
    while (streaming.get(path) && Date.now() < deadline) await remaining(two, "other");
    expect(streaming.get(path)).toBe(false);
    expect(await remaining(one, client)).toBe(LIMIT - USED);
  }, 60_000);
}
