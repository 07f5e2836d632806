import { afterAll, describe, expect, inject, it } from "vitest";
import { RATE_ALGORITHMS as ALGORITHMS, type Algorithm } from "../../../src/store/algorithm";
import { evaluatePolicy } from "../../../src/store/evaluate";
import { storageKey } from "../../../src/store/keys";
import { deleteKeys, testRedis, testStore } from "../../support/worker/redis";

// Redis memory per key (MEMORY USAGE … SAMPLES 0, i.e. every element counted), per algorithm,
// with the key full to its limit. Rerun to print the table:
//   npx vitest run --silent=false --project worker test/src/store/algorithms-memory.test.ts
// Keys are shaped like production's (`edge-limiter:api:{203.0.113.7}`, plus 11 bytes to keep them
// unique on the shared Redis: 41 bytes, the same for every row); log members like the limiter's
// (12-char isolate id + counter).
const redis = testRedis();
const prefix = `edge-limiter-${crypto.randomUUID().slice(0, 8)}`;
const store = testStore(30_000);
// The ring's whole range of limits.
const LIMITS = [10, 100, 1_000, 10_000, 100_000];
const T = 1_700_000_000_000;

afterAll(async () => {
  await deleteKeys(redis, `${prefix}*`);
});

/** MEMORY USAGE is not in the client's API: one raw REST call to the bridge. */
async function memoryUsage(key: string): Promise<number> {
  const response = await fetch(inject("bridgeUrl"), {
    method: "POST",
    headers: { Authorization: `Bearer ${inject("bridgeToken")}` },
    body: JSON.stringify(["MEMORY", "USAGE", key, "SAMPLES", "0"]),
  });
  const { result } = (await response.json()) as { result: unknown };
  if (typeof result !== "number") throw new Error(`MEMORY USAGE ${key}: ${JSON.stringify(result)}`);
  return result;
}

async function fill(algorithm: Algorithm, limit: number): Promise<number> {
  const row = `${ALGORITHMS.indexOf(algorithm)}${LIMITS.indexOf(limit)}`;
  const key = storageKey(`${prefix}${row}`, "api", "203.0.113.7");
  // One admission per unit for limits a loop can afford, so a log holds `limit` distinct requests'
  // members; a single costly admission beyond (same member count, one request id).
  const perCall = limit <= 1_000 ? 1 : limit / 10;
  for (let i = 0; i < limit / perCall; i++) {
    const result = await evaluatePolicy(store, {
      redisKey: key,
      algorithm,
      limit,
      windowMs: 3_600_000,
      cost: perCall,
      memberId: `AbCdEfGhIjKl${i.toString(36)}`,
      now: T + i,
    });
    if (!result.allowed) throw new Error(`${algorithm} ${limit}: denied at ${i}`);
  }
  return memoryUsage(key);
}

describe("memory per key", () => {
  it("is O(1) for fixed-window, sliding-counter and token-bucket; 4 bytes a unit for the ring", async () => {
    const table: Record<string, Record<string, number>> = {};
    for (const algorithm of ALGORITHMS) {
      const row: Record<string, number> = {};
      for (const limit of LIMITS) row[limit] = await fill(algorithm, limit);
      table[algorithm] = row;
    }
    const lines = [`bytes per key, full to its limit (key name ${prefix.length + 20} bytes)`];
    lines.push(["algorithm".padEnd(16), ...LIMITS.map((l) => String(l).padStart(10))].join(""));
    for (const [algorithm, row] of Object.entries(table)) {
      lines.push(
        [algorithm.padEnd(16), ...LIMITS.map((l) => String(row[l]).padStart(10))].join(""),
      );
    }
    console.log(lines.join("\n"));

    for (const algorithm of ["fixed-window", "sliding-counter", "token-bucket"] as const) {
      const row = table[algorithm] ?? {};
      // One string of at most 44 bytes (Redis's embedded strings): 120–136 B with this key.
      for (const limit of LIMITS)
        expect(row[limit], `${algorithm} ${limit}`).toBeLessThanOrEqual(136);
      expect((row[100_000] ?? 0) - (row[10] ?? 0), algorithm).toBeLessThanOrEqual(16);
    }
    const ring = table["sliding-log"] ?? {};
    for (const limit of LIMITS) {
      // The ring's bound: at most 10 bytes per admitted unit plus a constant (4 bytes of data a unit, plus
      // the allocator's rounding of one string); the seeds' sorted set took ~120 (docs/algorithms.md).
      expect(ring[limit] ?? 0, `ring ${limit}`).toBeLessThanOrEqual(10 * limit + 200);
    }
    expect(ring[1_000] ?? 0).toBeLessThanOrEqual(10_500);
    expect(ring[10_000] ?? 0).toBeLessThanOrEqual(100_000);
  }, 300_000);
});
