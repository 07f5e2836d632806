// GET /check/stats for usage rules (docs/analytics.md "Usage rules"): a usage rule driven
// through /check (reservations) and /check/settle (what was used) answers its units, per minute
// and in total, and its top spenders, ordered and capped at analytics.topKeys; a rule without
// usage answers neither. A header rule counts a client under its key's SHA-256: with
// analytics.keyLabels each spender comes with the raw value. The worker in workerd, real Redis
// through the bridge.
import { describe, expect, it } from "vitest";
import { scopedPrefix, testRedis } from "../support/worker/redis";
import { TEST_ADMIN_TOKEN, TEST_LIMITER_TOKEN, workerWith } from "../support/worker/worker-harness";

const prefix = scopedPrefix("stats-usage");
const redis = testRedis();
const run = crypto.randomUUID().slice(0, 8);
const worker = workerWith({
  LIMITER_CONFIG: JSON.stringify({
    prefix,
    analytics: { enabled: true, topKeys: 2, keyLabels: true },
    rules: [
      {
        name: "tokens",
        limit: 1_000_000,
        window: "1m",
        key: "header:x-customer",
        cost: 1_000,
        usage: { json: "usage.total_tokens" },
      },
      { name: "plain", limit: 100, window: "1m" },
      {
        name: "idle-usage",
        limit: 1_000,
        window: "1m",
        cost: 10,
        usage: { header: "x-units" },
      },
    ],
  }),
});

const post = (path: string, body: unknown) =>
  worker(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${TEST_LIMITER_TOKEN}` },
    body: JSON.stringify(body),
  });

async function check(rule: string, key: string): Promise<string | undefined> {
  const answer = await post("/check", { rule, key });
  expect(answer.status).toBe(200);
  return ((await answer.json()) as { receipt?: string }).receipt;
}

async function settle(receipt: string | undefined, usage: number): Promise<number> {
  const answer = await post("/check/settle", { receipt, usage });
  if (answer.status !== 200) return answer.status;
  const json = (await answer.json()) as { charged: { units: number }[] };
  return json.charged[0]?.units ?? Number.NaN;
}

async function sha256(text: string): Promise<string> {
  const bytes = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(bytes)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

interface UsageRule {
  rule: string;
  totals: { allowed: number; units?: number };
  minutes: { minute: number; units?: number }[];
  topSpenders?: { key: string; units: number; label?: string }[];
}

async function stats(): Promise<UsageRule[]> {
  const res = await worker("/check/stats?minutes=5", {
    headers: { Authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { rules: UsageRule[] }).rules;
}

describe("GET /check/stats with a usage rule", () => {
  it("answers units reserved then settled, and the top spenders, most first, capped", async () => {
    const [a, b, c, d] = ["a", "b", "c", "d"].map((name) => `cust-${name}-${run}`) as [
      string,
      string,
      string,
      string,
    ];
    const receipts = {
      a1: await check("tokens", a),
      a2: await check("tokens", a),
      b: await check("tokens", b),
      c: await check("tokens", c),
      d: await check("tokens", d),
    };
    await check("plain", a);

    // Reserved: 1 000 units each.
    const reserved = (await stats()).find((rule) => rule.rule === "tokens");
    expect(reserved?.totals).toMatchObject({ allowed: 5, units: 5_000 });
    expect(reserved?.topSpenders).toEqual([
      { key: await sha256(a), units: 2_000, label: a },
      expect.objectContaining({ units: 1_000 }),
    ]);

    // What each used: the difference charged or given back, once.
    expect(await settle(receipts.a1, 300)).toBe(-700);
    expect(await settle(receipts.a2, 2_500)).toBe(1_500);
    expect(await settle(receipts.b, 4_000)).toBe(3_000);
    expect(await settle(receipts.c, 0)).toBe(-1_000);
    expect(await settle(receipts.d, 100)).toBe(-900);
    expect(await settle(receipts.b, 1)).toBe(409);

    const rules = await stats();
    expect(rules.map((rule) => rule.rule)).toEqual(["tokens", "plain", "idle-usage"]);
    const tokens = rules.find((rule) => rule.rule === "tokens");
    expect(tokens?.totals.units).toBe(300 + 2_500 + 4_000 + 0 + 100);
    // Per minute: every minute answers its units (the admissions' minutes hold them all).
    expect(tokens?.minutes).toHaveLength(5);
    expect(tokens?.minutes.reduce((sum, minute) => sum + (minute.units ?? Number.NaN), 0)).toBe(
      6_900,
    );
    // analytics.topKeys is 2: the third spender (d, 100) and c (0) are not listed.
    expect(tokens?.topSpenders).toEqual([
      { key: await sha256(b), units: 4_000, label: b },
      { key: await sha256(a), units: 2_800, label: a },
    ]);
    // A rule without usage: neither units nor top spenders.
    const plain = rules.find((rule) => rule.rule === "plain");
    expect(plain?.totals.allowed).toBe(1);
    expect(plain?.totals).not.toHaveProperty("units");
    expect(plain).not.toHaveProperty("topSpenders");
    expect(plain?.minutes.every((minute) => !("units" in minute))).toBe(true);
    // A usage rule with no traffic in the span: zeros and no spenders, still answered.
    const idle = rules.find((rule) => rule.rule === "idle-usage");
    expect(idle?.totals.units).toBe(0);
    expect(idle?.minutes.every((minute) => minute.units === 0)).toBe(true);
    expect(idle?.topSpenders).toEqual([]);

    // The spenders' sets expire as the top denied keys do: an hour and two minutes at most.
    const spendKeys = await redis.keys(`${prefix}:analytics:*:spend:*`);
    expect(spendKeys.length).toBeGreaterThan(0);
    for (const key of spendKeys) {
      const ttl = await redis.pttl(key);
      expect(ttl, key).toBeGreaterThan(0);
      expect(ttl, key).toBeLessThanOrEqual(63 * 60_000);
    }
  });
});
