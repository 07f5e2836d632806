/**
 * A client that goes away gives its concurrency slot back (docs/concurrency.md, "What each
 * surface does at the end of a request"), end to end: the worker as deployed (`wrangler deploy --dry-run`) served by workerd
 * alone, a private redis-server behind the REST bridge, the bench's origin (its own process,
 * counting what it has in flight per key), and real HTTP clients (node:http) that close their
 * sockets. The rule holds 1 slot per key for up to 30 s: a second request admitted well before
 * that can only have been admitted because the first one's release reached the store.
 */
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  compatibilityDate,
  compatibilityFlags,
  startBridgeProcess,
  startPrivateRedis,
  wranglerBundle,
} from "../../tools/infra.mjs";
import { serveWithWorkerd } from "../../tools/serve-workerd.mjs";
import { startSlowOrigin } from "../../tools/slow-origin.mjs";

/** The rule's timeout, and how long a test waits for the slot: far below it. */
const TIMEOUT_MS = 30_000;
const FREED_WITHIN_MS = 10_000;

const dir = mkdtempSync(join(tmpdir(), "edge-limiter-disconnect-"));
const stops: (() => Promise<void>)[] = [];
let worker = "";
let origin: Awaited<ReturnType<typeof startSlowOrigin>>;
const run = Date.now().toString(36);

beforeAll(async () => {
  const redis = await startPrivateRedis();
  stops.push(redis.stop);
  const bridge = await startBridgeProcess(redis.url);
  stops.push(bridge.stop);
  origin = await startSlowOrigin();
  stops.push(origin.stop);
  const served = await serveWithWorkerd({
    scriptPath: await wranglerBundle(join(dir, "ours")),
    bindings: {
      UPSTASH_REDIS_REST_URL: bridge.url,
      UPSTASH_REDIS_REST_TOKEN: bridge.token,
      ORIGIN_URL: origin.url,
      LIMITER_TOKEN: "disconnect-e2e",
      LIMITER_CONFIG: JSON.stringify({
        prefix: "disconnect-e2e",
        timeoutMs: 5_000,
        rules: [
          {
            name: "one",
            algorithm: "concurrency",
            limit: 1,
            timeout: `${TIMEOUT_MS / 1000}s`,
            key: "header:x-client",
          },
        ],
      }),
    },
    compatibilityDate: compatibilityDate(),
    compatibilityFlags: compatibilityFlags(),
  });
  stops.push(served.dispose);
  worker = served.url;
}, 120_000);

afterAll(async () => {
  for (const stop of stops.reverse()) await stop().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
});

/** A request through the worker, its body read in full; its status. */
async function statusOf(path: string, key: string): Promise<number> {
  const res = await fetch(`${worker}${path}`, { headers: { "x-client": key } });
  await res.arrayBuffer();
  return res.status;
}

/** Sends until admitted or the deadline passes (each attempt a full round trip); the last status. */
async function admittedBefore(deadline: number, key: string): Promise<number> {
  let status = 0;
  while (status !== 200 && Date.now() < deadline) status = await statusOf("/b", key);
  return status;
}

/**
 * A client on its own connection (no keep-alive, as the bench's): resolves with the response
 * once its headers are in, and `leave` closes its socket.
 */
function client(path: string, key: string) {
  const req = http.get(`${worker}${path}`, { headers: { "x-client": key }, agent: false });
  // The error of our own leaving is no failure.
  req.on("error", () => {});
  const response = new Promise<http.IncomingMessage>((resolve) => req.once("response", resolve));
  return { response, leave: () => req.destroy() };
}

describe("a client that goes away", () => {
  it("mid-body: its slot is free again long before the rule's timeout", async () => {
    const key = `mid-${run}`;
    // 30 s of body, a chunk every 50 ms.
    const a = client("/a?chunks=600&every=50", key);
    const res = await a.response;
    expect(res.statusCode).toBe(200);
    await new Promise((resolve) => res.once("data", resolve));
    // While A is connected and reading, the one slot is A's.
    expect(await statusOf("/b", key)).toBe(429);
    a.leave();
    expect(await admittedBefore(Date.now() + FREED_WITHIN_MS, key)).toBe(200);
    // The worker let go of the origin's answer too: it was cut short, not served.
    const stats = await origin.stats(key);
    expect(stats.aborted).toBe(1);
    expect(stats.max).toBe(1);
  });

  it("before the answer's headers: the slot is held while the origin works, then freed", async () => {
    const key = `early-${run}`;
    const a = client("/a?delay=1000&chunks=600&every=50", key);
    // A's request has reached the origin (the slot is taken); A leaves before any answer.
    while ((await origin.stats(key)).inFlight < 1) {
      // Each look is a round trip to the origin: no pause needed.
    }
    a.leave();
    expect(await admittedBefore(Date.now() + FREED_WITHIN_MS, key)).toBe(200);
    const stats = await origin.stats(key);
    // Never two in flight at the origin: B came in after A's answer was let go of.
    expect(stats.max).toBe(1);
    expect(stats.aborted).toBe(1);
  });
});
