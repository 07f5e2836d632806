import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundleSource } from "../../tools/measure-env.mjs";
import { startRegions } from "../../tools/regions-topology.mjs";

// A key's limit changes while leases of it are live (a plan downgrade or upgrade, a per-request
// `limit: (c) => …`, a deploy): every lease, at every level, is bound to the policy it was
// granted under (docs/leases.md, docs/regions.md). Three private redis-servers behind the REST
// bridge, every link a delay proxy (tools/regions-topology.mjs), one sender in "us".
type Topology = Awaited<ReturnType<typeof startRegions>>;
let topology: Topology;
// biome-ignore lint/suspicious/noExplicitAny: src/index.ts bundled, typed by its own tests
let lib: any;
const dir = mkdtempSync(join(tmpdir(), "edge-limiter-regions-policy-"));
const tag = `policy-${process.pid}-${Date.now()}`;

interface Decided {
  allowed: boolean;
  decisions: { source: string }[];
}
interface Limiter {
  limitAll(requests: object[], options: object): Promise<Decided>;
}
interface Worker {
  limiter: Limiter;
  pending: Promise<unknown>[];
}

beforeAll(async () => {
  lib = await bundleSource(`export * from "./src/index";`, dir);
  topology = await startRegions({ farMs: 40, nearMs: 2, token: "regions-policy-test" });
}, 60_000);
afterAll(async () => {
  await topology?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A worker (one isolate) in us: home 40 ms away, the region's own store 2 ms. */
function worker(isolateLeases: boolean): Worker {
  const env = topology.bindings("us");
  const client = (url: string): unknown =>
    lib.createStoreClient({ url, token: topology.token, timeoutMs: 10_000, autoPipeline: false });
  const limiter: Limiter = lib.createLimiter({
    store: client(env.UPSTASH_REDIS_REST_URL as string),
    // Long deadlines: a loaded machine must not turn a store's answer into the fallback's,
    // which this test asserts never admits.
    timeoutMs: 10_000,
    regions: { stores: { us: client(env.UPSTASH_REDIS_REST_URL_US as string) } },
    ...(isolateLeases ? {} : { leases: false }),
  });
  return { limiter, pending: [] };
}

function decide(w: Worker, key: string, limit: number, windowMs: number): Promise<Decided> {
  const request = { policy: "plan", key: `${tag}:${key}`, limit, windowMs, lease: true };
  return w.limiter.limitAll([request], {
    region: "us",
    waitUntil: (p: Promise<unknown>) => w.pending.push(p),
  });
}

async function settle(w: Worker) {
  while (w.pending.length > 0) await Promise.allSettled(w.pending.splice(0));
}

/** The old limit's policy as a region's lease names it (lease.ts policyFingerprint). */
const OLD = "sliding-log/10000/8000";

/** A key's hash in us's store: its fields, and the policies of its live leases. */
async function regionHash(key: string) {
  const redis = new Redis(topology.databases.us?.redisUrl as string);
  try {
    const [hashKey] = await redis.keys(`*${key}*:region`);
    const fields = await redis.hgetall(hashKey as string);
    const [seconds, micros] = await redis.time();
    const now = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    const live = Object.keys(fields)
      .filter((field) => field.startsWith("e") && Number(fields[field]) > now)
      .map((field) => fields[`p${field.slice(1)}`]);
    return { fields, live };
  } finally {
    redis.disconnect();
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `perSecond` decisions a second for `ms`; their answers, by source, and how many admitted. */
async function steady(send: () => Promise<Decided>, perSecond: number, ms: number) {
  const started = Date.now();
  const calls: Promise<Decided>[] = [];
  for (let i = 0; i < (perSecond * ms) / 1000; i++) {
    await sleep(Math.max(0, started + (i * 1000) / perSecond - Date.now()));
    calls.push(send());
  }
  const answers = await Promise.all(calls);
  const sources: Record<string, number> = {};
  for (const answer of answers) {
    const source = `${answer.allowed ? "admitted" : "denied"}:${answer.decisions[0]?.source}`;
    sources[source] = (sources[source] ?? 0) + 1;
  }
  return { admitted: answers.filter((answer) => answer.allowed).length, sources };
}

describe("leases bound to the policy they were granted under", () => {
  for (const isolateLeases of [true, false]) {
    it(`admits nothing past a lowered limit (isolate leases ${isolateLeases ? "on" : "off"})`, async () => {
      const w = worker(isolateLeases);
      const key = `down-${isolateLeases}`;
      // Window 8 s: what the first 2 s admit is still in it when the drop's 2 s end.
      const warm = await steady(() => decide(w, key, 10_000, 8_000), 100, 2_000);
      // The warm load's lease work done (a renewal still on its way on a busy machine would land
      // after the first request of the new limit, under the old one it was asked with).
      await settle(w);
      // The key leased in the region (and, with isolate leases, in the isolate), the window
      // already over the new limit: an exact limiter admits nothing more in it.
      const leased = (warm.sources["admitted:region"] ?? 0) + (warm.sources["admitted:lease"] ?? 0);
      expect(leased).toBeGreaterThan(0);
      expect(warm.admitted).toBeGreaterThan(150);
      expect((await regionHash(key)).live).toContain(OLD);
      // The first request of the new limit ends the old leases in the region at once.
      const first = await decide(w, key, 100, 8_000);
      await settle(w);
      expect(first.allowed).toBe(false);
      const hash = await regionHash(key);
      expect(hash.live).not.toContain(OLD);
      // Home's denial under the new limit is held there, bound to it.
      expect(hash.fields.xp).toBe("sliding-log/100/8000");
      const after = await steady(() => decide(w, key, 100, 8_000), 100, 2_000);
      await settle(w);
      expect(after.sources).not.toHaveProperty("admitted:fallback");
      expect(after.admitted).toBe(0);
    }, 30_000);

    it(`decides a raised limit at home at once (isolate leases ${isolateLeases ? "on" : "off"})`, async () => {
      const w = worker(isolateLeases);
      const key = `up-${isolateLeases}`;
      // Exhaust limit 20 in 8 s, leased in the region, until home's denial is held there.
      await steady(() => decide(w, key, 20, 8_000), 40, 1_000);
      await settle(w);
      // The region holds a denial of the old limit: another isolate is denied there.
      const other = worker(isolateLeases);
      const held = await decide(other, key, 20, 8_000);
      expect([held.allowed, held.decisions[0]?.source]).toEqual([false, "region"]);
      // Raised to 1 000: the next request is decided by home with the new limit, not denied by
      // the old one's held denial; the other isolate is admitted too (by home, or already from
      // a lease granted under the new limit), and the key is leased again.
      const raised = await decide(w, key, 1_000, 8_000);
      expect([raised.allowed, raised.decisions[0]?.source]).toEqual([true, "redis"]);
      const raisedThere = await decide(other, key, 1_000, 8_000);
      expect(raisedThere.allowed).toBe(true);
      const more = await steady(() => decide(w, key, 1_000, 8_000), 40, 1_000);
      await settle(w);
      await settle(other);
      expect(more.admitted).toBe(40);
    }, 30_000);
  }
});
