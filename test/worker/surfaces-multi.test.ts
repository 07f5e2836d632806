import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/limiter-config";
import { adhocPolicyName } from "../../src/http/check-request";
import { createLimiter, rateLimit } from "../../src/index";
// The rate algorithms: concurrency is tested on its own (concurrency tests).
import { RATE_ALGORITHMS as ALGORITHMS } from "../../src/store/algorithm";
import { storageKey } from "../../src/store/keys";
import { logCount } from "../support/worker/log-state";
import { scopedPrefix, testRedis, testStore } from "../support/worker/redis";
import {
  type CheckPath,
  originCount,
  postCheck,
  workerWith,
} from "../support/worker/worker-harness";

const redis = testRedis();
const prefix = scopedPrefix("surfaces");
const run = crypto.randomUUID().slice(0, 8);

const algorithmRules = ALGORITHMS.map((algorithm) => ({
  name: `alg-${algorithm}`,
  match: { path: `/alg/${algorithm}/*` },
  limit: 2,
  // A day: aligned windows (fixed, counter) must not roll over between a test's requests.
  window: "1d",
  algorithm,
}));

const worker = workerWith({
  LIMITER_CONFIG: JSON.stringify({
    prefix,
    // These tests assert exact counts under bursts (300 concurrent checks), not timeouts: on a
    // busy machine the default 500 ms can pass while Redis still answers, and the fallback then
    // decides (test/src/limiter/slow-store.test.ts covers that path).
    timeoutMs: 10_000,
    requestIdHeaders: ["Idempotency-Key"],
    rules: [
      ...algorithmRules,
      { name: "m20", match: { path: "/multi/*" }, limit: 20, window: "1m" },
      { name: "m50", match: { path: "/multi/*" }, limit: 50, window: "1m" },
      { name: "tb5", match: { path: "/multi/*" }, limit: 5, window: "1m", shadow: true },
      { name: "idem", match: { path: "/idem/*" }, limit: 2, window: "1m" },
      {
        name: "refunded",
        match: { path: "/status/*" },
        limit: 2,
        window: "1m",
        refundOn: "5xx",
        key: "header:x-user",
      },
      {
        name: "counted",
        match: { path: "/status/*" },
        limit: 100,
        window: "1m",
        key: "header:x-user",
      },
      // /check only (their match is never requested through the proxy).
      {
        name: "a20",
        match: { path: "/never/*" },
        limit: 20,
        window: "1d",
        algorithm: "fixed-window",
      },
      { name: "b50", match: { path: "/never/*" }, limit: 50, window: "1m" },
    ],
  }),
});

const ip = (n: number) => ({ "CF-Connecting-IP": `203.0.113.${n}` });

const check = (body: unknown, path?: CheckPath) => postCheck(worker, body, { path });

interface CheckAnswer {
  allowed: boolean;
  remaining: number;
  policy: string;
  algorithm: string;
  deniedBy?: string;
  replayed?: boolean;
  decisions?: { policy: string; allowed: boolean; remaining: number; algorithm: string }[];
}

describe("each algorithm through every surface", () => {
  for (const algorithm of ALGORITHMS) {
    it(`${algorithm} through /check (ad-hoc "algorithm") and the proxy (rule "algorithm")`, async () => {
      const key = `adhoc-${algorithm}-${run}`;
      const answers: CheckAnswer[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await check({ key, limit: 2, window: "1d", algorithm });
        expect(res.status).toBe(i < 2 ? 200 : 429);
        answers.push(await res.json<CheckAnswer>());
      }
      expect(answers.map((a) => [a.allowed, a.remaining, a.algorithm])).toEqual([
        [true, 1, algorithm],
        [true, 0, algorithm],
        [false, 0, algorithm],
      ]);
      expect(answers[2]?.deniedBy).toBe(adhocPolicyName(86_400_000, 2));
      // Counted in that algorithm's own key.
      expect(
        await redis.exists(storageKey(prefix, adhocPolicyName(86_400_000, 2), key, algorithm)),
      ).toBe(1);

      const path = `/alg/${algorithm}/${run}`;
      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) statuses.push((await worker(path, { headers: ip(1) })).status);
      expect(statuses).toEqual([200, 200, 429]);
      expect(await originCount(path)).toBe(2);
      expect(
        await redis.exists(storageKey(prefix, `alg-${algorithm}`, "203.0.113.1", algorithm)),
      ).toBe(1);
    });
  }

  it("an unknown ad-hoc algorithm, or one next to a rule, is a 400 naming the field", async () => {
    const key = `bad-alg-${run}`;
    const res = await check({ key, limit: 2, window: "1m", algorithm: "leaky" });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ field: "algorithm" });
    const withRule = await check({ key, rule: "a20", algorithm: "token-bucket" });
    expect(withRule.status).toBe(400);
    expect(await withRule.json()).toMatchObject({ field: "algorithm" });
    expect(await redis.keys(`${prefix}:*${key}*`)).toEqual([]);
  });
});

describe("several rules, all or nothing", () => {
  it("proxy: 300 concurrent requests against 20/min and 50/min admit exactly 20; both logs hold 20", async () => {
    const path = `/multi/${run}`;
    const responses = await Promise.all(
      Array.from({ length: 300 }, () => worker(path, { headers: ip(2) })),
    );
    const admitted = responses.filter((r) => r.status === 200);
    expect(admitted).toHaveLength(20);
    expect(responses.filter((r) => r.status === 429)).toHaveLength(280);
    expect(await logCount(redis, storageKey(prefix, "m20", "203.0.113.2"))).toBe(20);
    expect(await logCount(redis, storageKey(prefix, "m50", "203.0.113.2"))).toBe(20);
    expect(await originCount(path)).toBe(20);
    // The shadow rule is decided apart: its denials never blocked the enforced rules, and
    // the enforced denials did not stop it counting (5 admitted, then shadow-denied).
    expect(await logCount(redis, storageKey(prefix, "tb5", "203.0.113.2"))).toBe(5);
    const denied = responses.find((r) => r.status === 429) as Response;
    expect(denied.headers.get("RateLimit-Policy")).toBe(
      '"m20";q=20;w=60, "m50";q=50;w=60, "tb5";q=5;w=60',
    );
    expect(await denied.json()).toMatchObject({ violated: ["m20"], deniedBy: "m20" });
  });

  it('/check {"rules": [...]}: 300 concurrent checks admit exactly 20, every policy reported', async () => {
    const key = `multi-check-${run}`;
    const responses = await Promise.all(
      Array.from({ length: 300 }, () => check({ key, rules: ["a20", "b50"] })),
    );
    const answers = await Promise.all(responses.map((r) => r.json<CheckAnswer>()));
    expect(answers.filter((a) => a.allowed)).toHaveLength(20);
    expect(responses.filter((r) => r.status === 429)).toHaveLength(280);
    expect(await logCount(redis, storageKey(prefix, "b50", key))).toBe(20);
    // `<last admission>:<window>:<count>` (see fixed-window.lua.ts), on the Redis clock.
    expect(await redis.get(storageKey(prefix, "a20", key, "fixed-window"))).toMatch(
      /^\d+:86400000:20$/,
    );
    const deniedAnswer = answers.find((a) => !a.allowed) as CheckAnswer;
    expect(deniedAnswer).toMatchObject({ deniedBy: "a20", policy: "a20" });
    expect(deniedAnswer.decisions?.map((d) => [d.policy, d.algorithm, d.allowed])).toEqual([
      ["a20", "fixed-window", false],
      ["b50", "sliding-log", true],
    ]);
    const denied = responses.find((r) => r.status === 429) as Response;
    expect(denied.headers.get("RateLimit-Policy")).toBe('"a20";q=20;w=86400, "b50";q=50;w=60');
  });

  it("/check rules: the binding rule is named when it comes second; bad bodies are 400s", async () => {
    const key = `second-${run}`;
    for (let i = 0; i < 20; i++)
      expect((await check({ key, rules: ["b50", "a20"] })).status).toBe(200);
    const res = await check({ key, rules: ["b50", "a20"] });
    expect(res.status).toBe(429);
    expect(await res.json()).toMatchObject({ allowed: false, deniedBy: "a20" });
    expect(await logCount(redis, storageKey(prefix, "b50", key))).toBe(20);

    const bad: [unknown, string][] = [
      [{ key, rules: [] }, "rules"],
      [{ key, rules: "a20" }, "rules"],
      [{ key, rules: ["a20", "a20"] }, "rules"],
      [{ key, rules: ["a20", "nope"] }, "rules"],
      [{ key, rules: ["a20"], rule: "a20" }, "rules"],
      [{ key, rules: ["a20"], limit: 5 }, "limit"],
      [{ key, rules: ["a20"], cost: 21 }, "cost"],
    ];
    for (const [body, field] of bad) {
      const answer = await check(body);
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(await answer.json()).toMatchObject({ field });
    }
    // Peek and reset take one rule.
    const peek = await check({ key, rules: ["a20"] }, "/check/peek");
    expect(peek.status).toBe(400);
    expect(await logCount(redis, storageKey(prefix, "b50", key))).toBe(20);
  });
});

describe("request ids", () => {
  it("proxy: a retried Idempotency-Key is counted once and gets the original answer", async () => {
    const path = `/idem/${run}`;
    const headers = { ...ip(3), "Idempotency-Key": `order-${run}` };
    const retries = await Promise.all(Array.from({ length: 5 }, () => worker(path, { headers })));
    expect(retries.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(await logCount(redis, storageKey(prefix, "idem", "203.0.113.3"))).toBe(1);
    // One unit left: a new request passes, the next is denied; the retry still replays.
    expect((await worker(path, { headers: ip(3) })).status).toBe(200);
    expect((await worker(path, { headers: ip(3) })).status).toBe(429);
    expect((await worker(path, { headers })).status).toBe(200);
    expect(await logCount(redis, storageKey(prefix, "idem", "203.0.113.3"))).toBe(2);
  });

  it("proxy: without requestIdHeaders (the default) the header counts nothing special", async () => {
    const plain = workerWith({
      LIMITER_CONFIG: JSON.stringify({
        prefix,
        rules: [{ name: "plain", match: { path: "/plain-idem/*" }, limit: 2, window: "1m" }],
      }),
    });
    const headers = { ...ip(4), "Idempotency-Key": "same" };
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) {
      statuses.push((await plain(`/plain-idem/${run}`, { headers })).status);
    }
    expect(statuses).toEqual([200, 200, 429]);
  });

  it('/check "requestId": counted once, the retry says replayed; bad ids are 400s', async () => {
    const key = `rid-${run}`;
    const first = await check({ key, limit: 3, window: "1m", requestId: "job-1" });
    expect(await first.json()).toMatchObject({ allowed: true, remaining: 2 });
    const retry = await check({ key, limit: 3, window: "1m", requestId: "job-1" });
    expect(await retry.json()).toMatchObject({ allowed: true, remaining: 2, replayed: true });
    expect(await logCount(redis, storageKey(prefix, "check.60000ms.3", key))).toBe(1);
    const multi = await check({ key, rules: ["a20", "b50"], requestId: "job-2" });
    const multiRetry = await check({ key, rules: ["a20", "b50"], requestId: "job-2" });
    expect(await multi.json()).toMatchObject({ allowed: true });
    expect(await multiRetry.json()).toMatchObject({ allowed: true, replayed: true });
    expect(await logCount(redis, storageKey(prefix, "b50", key))).toBe(1);
    for (const requestId of ["", 42, "x".repeat(257)]) {
      const res = await check({ key, limit: 3, window: "1m", requestId });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ field: "requestId" });
    }
    expect(await logCount(redis, storageKey(prefix, "check.60000ms.3", key))).toBe(1);
  });
});

describe("refunds", () => {
  it("proxy: an origin 5xx is given back in rules that say so, and only those", async () => {
    const user = { "X-User": `u-${run}` };
    const keyHash = async (value: string) => {
      const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(value));
      return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
    };
    const clientKey = await keyHash(`u-${run}`);
    for (let i = 0; i < 4; i++) {
      expect((await worker(`/status/500`, { headers: user })).status).toBe(500);
    }
    expect(await logCount(redis, storageKey(prefix, "refunded", clientKey))).toBe(0);
    expect(await logCount(redis, storageKey(prefix, "counted", clientKey))).toBe(4);
    // Successes are kept: two pass, the third is denied.
    expect((await worker(`/status/200`, { headers: user })).status).toBe(200);
    expect((await worker(`/status/200`, { headers: user })).status).toBe(200);
    const denied = await worker(`/status/200`, { headers: user });
    expect(denied.status).toBe(429);
    expect(await denied.json()).toMatchObject({ violated: ["refunded"] });
  });

  it("proxy: the refund drops this isolate's cached denial of the key", async () => {
    const refunding = workerWith({
      LIMITER_CONFIG: JSON.stringify({
        prefix,
        rules: [
          { name: "one", match: { path: "/status/*" }, limit: 1, window: "1m", refundOn: "5xx" },
        ],
      }),
    });
    // Admitted with nothing left: the limiter caches the key as exhausted. The origin fails,
    // the unit comes back, and the cache must not deny the next request from memory.
    expect((await refunding(`/status/503`, { headers: ip(5) })).status).toBe(503);
    expect((await refunding(`/status/200`, { headers: ip(5) })).status).toBe(200);
    expect((await refunding(`/status/200`, { headers: ip(5) })).status).toBe(429);
  });

  it("proxy: each request's 5xx is given back once, by its own gate, a retried id's too", async () => {
    const once = workerWith({
      LIMITER_CONFIG: JSON.stringify({
        prefix,
        requestIdHeaders: ["Idempotency-Key"],
        rules: [
          {
            name: "once-5xx",
            match: { path: "/status/*" },
            limit: 1,
            window: "1m",
            refundOn: "5xx",
          },
        ],
      }),
    });
    const headers = { ...ip(6), "Idempotency-Key": `once-${run}` };
    // Refunded, its record deleted: the retry is decided afresh, and its 5xx given back too
    // (another decision, another gate: not "already refunded").
    expect((await once(`/status/503`, { headers })).status).toBe(503);
    expect((await once(`/status/503`, { headers })).status).toBe(503);
    const key = storageKey(prefix, "once-5xx", "203.0.113.6");
    expect(await logCount(redis, key)).toBe(0);
    expect(await redis.keys(`${key}:settled:*`)).toHaveLength(2);
    expect((await once(`/status/200`, { headers: ip(6) })).status).toBe(200);
    expect((await once(`/status/200`, { headers: ip(6) })).status).toBe(429);
  });

  it("middleware: refunds after next() when the app answers 5xx", async () => {
    const limiter = createLimiter({
      store: testStore(2_000),
      prefix,
    });
    const app = new Hono();
    app.use(
      rateLimit({
        limiter,
        rules: [
          { name: "mw-refund", limit: 1, window: "1m", refundOn: "5xx", algorithm: "token-bucket" },
          { name: "mw-keep", limit: 10, window: "1m" },
        ],
        key: () => `mw-${run}`,
      }),
    );
    app.get("/fail", (c) => c.text("boom", 500));
    app.get("/ok", (c) => c.text("ok"));
    for (let i = 0; i < 3; i++) expect((await app.request("/fail")).status).toBe(500);
    expect((await app.request("/ok")).status).toBe(200);
    const denied = await app.request("/ok");
    expect(denied.status).toBe(429);
    expect(await denied.json()).toMatchObject({ violated: ["mw-refund"], deniedBy: "mw-refund" });
    expect(await logCount(redis, storageKey(prefix, "mw-keep", `mw-${run}`))).toBe(4);
  });
});

describe("peek and reset per algorithm", () => {
  it("reset forgets the algorithm's own key; peek of a non-log algorithm is a 400", async () => {
    const key = `admin-${run}`;
    await check({ key, rule: "a20" });
    const stored = storageKey(prefix, "a20", key, "fixed-window");
    expect(await redis.exists(stored)).toBe(1);
    const peek = await check({ key, rule: "a20" }, "/check/peek");
    expect(peek.status).toBe(400);
    expect(await peek.json()).toMatchObject({ field: "rule" });
    const reset = await check({ key, rule: "a20" }, "/check/reset");
    expect(await reset.json()).toMatchObject({ reset: true, existed: true });
    // A count's place holds the reset's tombstone (no count: lua/count-stamp.lua.ts).
    expect(await redis.get(stored)).toBe("reset");
    const adhocPeek = await check(
      { key, limit: 2, window: "1m", algorithm: "token-bucket" },
      "/check/peek",
    );
    expect(adhocPeek.status).toBe(400);
    expect(await adhocPeek.json()).toMatchObject({ field: "algorithm" });
  });

  it("reset forgets this isolate's cached denial for a non-log algorithm", async () => {
    const key = `admin-cache-${run}`;
    const body = { key, limit: 1, window: "1m", algorithm: "sliding-counter" };
    expect((await check(body)).status).toBe(200);
    expect(await (await check(body)).json()).toMatchObject({ allowed: false, source: "cache" });
    await check(body, "/check/reset");
    expect(await (await check(body)).json()).toMatchObject({ allowed: true, source: "redis" });
  });
});

describe("config: algorithm, refundOn, requestIdHeaders", () => {
  it("fills the defaults", () => {
    const parsed = parseConfig({ rules: [{ name: "a", limit: 1, window: "1m" }] });
    expect(parsed).toMatchObject({
      ok: true,
      value: { requestIdHeaders: [], rules: [{ algorithm: "sliding-log" }] },
    });
    expect(parsed.ok && "refundOn" in (parsed.value.rules[0] ?? {})).toBe(false);
    const full = parseConfig({
      requestIdHeaders: ["Idempotency-Key", "cf-ray"],
      rules: [{ name: "a", limit: 1, window: "1m", algorithm: "token-bucket", refundOn: "5xx" }],
    });
    expect(full).toMatchObject({
      ok: true,
      value: {
        requestIdHeaders: ["idempotency-key", "cf-ray"],
        rules: [{ algorithm: "token-bucket", refundOn: "5xx" }],
      },
    });
  });

  const bad: [string, unknown, string][] = [
    [
      "unknown algorithm",
      { rules: [{ name: "a", limit: 1, window: "1m", algorithm: "gcra" }] },
      "rules[0].algorithm",
    ],
    [
      "bad refundOn",
      { rules: [{ name: "a", limit: 1, window: "1m", refundOn: "4xx" }] },
      "rules[0].refundOn",
    ],
    ["requestIdHeaders not an array", { requestIdHeaders: "cf-ray" }, "requestIdHeaders"],
    ["bad header name", { requestIdHeaders: ["Idem Key"] }, "requestIdHeaders[0]"],
    [
      "too many headers",
      { requestIdHeaders: Array.from({ length: 9 }, (_, i) => `h${i}`) },
      "requestIdHeaders",
    ],
  ];
  for (const [label, input, field] of bad) {
    it(`names "${field}" for ${label}`, () => {
      const parsed = parseConfig(input);
      expect(parsed.ok).toBe(false);
      expect(!parsed.ok && parsed.field).toBe(field);
    });
  }
});
