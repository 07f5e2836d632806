import { describe, expect, it } from "vitest";
import { prng } from "../../support/worker/prng";
import { scopedPrefix, testRedis } from "../../support/worker/redis";
import { workerWith } from "../../support/worker/worker-harness";

const redis = testRedis();
const prefix = scopedPrefix("fuzz");
const TOKEN = "test-limiter-token";
const worker = workerWith({
  LIMITER_CONFIG: JSON.stringify({
    prefix,
    // Valid cases are asserted decided by Redis: a busy machine's slow call must not make
    // them the fallback's.
    timeoutMs: 10_000,
    rules: [
      { name: "api", limit: 5, window: "1m" },
      { name: "other", limit: 5, window: "1m" },
    ],
  }),
});

const SEED = 20_261_129;
const CASES = 1200;

interface Case {
  headers: Record<string, string>;
  body: string;
  method: string;
}

function malformed(random: () => number, i: number): Case {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;
  const junkString = (max: number) =>
    Array.from({ length: Math.floor(random() * max) }, () =>
      String.fromCharCode(Math.floor(random() * 0x2fff)),
    ).join("");
  const value = (): unknown =>
    pick([
      null,
      true,
      -1,
      0,
      1.5,
      1e308,
      -0,
      "",
      "1m",
      "10",
      "NaN",
      junkString(20),
      [],
      [1, 2],
      {},
      { nested: { deeper: [] } },
      "k".repeat(600),
      Number.MAX_SAFE_INTEGER + 2,
    ]);
  const invalidNumbers = [null, true, -1, 0, 1.5, 1e308, "10", "NaN", [], {}, junkString(5)];
  // A string with one lone surrogate (high or low) somewhere in otherwise valid text.
  const loneSurrogate = () => {
    const text = junkString(6);
    const at = Math.floor(random() * (text.length + 1));
    const lone = String.fromCharCode(0xd800 + Math.floor(random() * 0x800));
    return text.slice(0, at) + lone + text.slice(at);
  };
  const valid = { key: `fuzz-${i}`, limit: 5, window: "1m" };
  const good = { "Content-Type": "application/json", Authorization: `Bearer ${TOKEN}` };
  const kind = i % 12;
  switch (kind) {
    case 0: // wrong or missing credentials, otherwise valid
      return {
        method: "POST",
        body: JSON.stringify(valid),
        headers: {
          "Content-Type": "application/json",
          ...pick<Record<string, string>>([
            {},
            { Authorization: "" },
            { Authorization: TOKEN },
            // ("bearer <token>" is valid: auth schemes are case-insensitive, see check.test.ts)
            { Authorization: `Bearer:${TOKEN}` },
            { Authorization: `Basic ${btoa(`u:${TOKEN}`)}` },
            { Authorization: `Bearer  ${TOKEN}` },
            { Authorization: `Bearer ${junkString(40).replace(/[^\x20-\x7e]/g, "x")}` },
          ]),
        },
      };
    case 1: // wrong content types
      return {
        method: "POST",
        body: JSON.stringify(valid),
        headers: {
          Authorization: `Bearer ${TOKEN}`,
          ...pick<Record<string, string>>([
            {},
            { "Content-Type": "text/plain" },
            { "Content-Type": "application/jsonx" },
            { "Content-Type": "application/x-www-form-urlencoded" },
            { "Content-Type": "multipart/form-data; boundary=x" },
            { "Content-Type": "json" },
          ]),
        },
      };
    case 2: // not JSON at all
      return {
        method: "POST",
        headers: good,
        body: pick(["", "{", "}", "[", "nul", "{key:1}", "'x'", junkString(200)]),
      };
    case 3: // JSON, but not an object
      return {
        method: "POST",
        headers: good,
        body: JSON.stringify(pick([null, 1, "s", [], [valid], true])),
      };
    case 4: // each field with a wrong value
      return {
        method: "POST",
        headers: good,
        // Every value here is wrong for the field it lands in (strings are valid keys: not here).
        body: JSON.stringify(
          pick([
            { ...valid, key: pick([null, 7, true, [], {}, "", "k".repeat(600)]) },
            { ...valid, limit: pick(invalidNumbers) },
            {
              ...valid,
              window: pick([...invalidNumbers.filter((n) => n !== 1e308), "1y", "", {}]),
            },
            { ...valid, cost: pick([...invalidNumbers, 6]) },
            { ...valid, key: loneSurrogate() },
            { ...valid, requestId: loneSurrogate() },
            { ...valid, window: loneSurrogate() },
            { key: "k", rules: [loneSurrogate()] },
          ]),
        ),
      };
    case 5: // unknown fields
      return {
        method: "POST",
        headers: good,
        body: JSON.stringify({ ...valid, [junkString(8) || "x"]: value() }),
      };
    case 6: // missing required fields
      return {
        method: "POST",
        headers: good,
        body: JSON.stringify(
          pick([
            { limit: 5, window: "1m" },
            { key: "k", window: "1m" },
            { key: "k", limit: 5 },
            {},
          ]),
        ),
      };
    case 7: // rule misuse
      return {
        method: "POST",
        headers: good,
        body: JSON.stringify(
          pick([
            { key: "k", rule: "nope" },
            { key: "k", rule: value() },
            { key: "k", rule: "api", limit: 5 },
            { key: "k", rule: "api", window: "1m" },
            { key: "k", rule: "api", cost: 6 },
            { key: "k", rule: "api", cost: value() },
          ]),
        ),
      };
    case 8: // oversized bodies
      return {
        method: "POST",
        headers: good,
        body: JSON.stringify({ ...valid, key: "k".repeat(8200 + Math.floor(random() * 5000)) }),
      };
    case 9: // deeply nested or duplicated keys
      return {
        method: "POST",
        headers: good,
        body: pick([
          `${"[".repeat(2000)}${"]".repeat(2000)}`,
          `{"key":"a","key":{"x":1},"limit":5,"window":"1m"}`,
          `{"key":"k","limit":5,"window":"1m","__proto__":{"cost":0}}`,
          `{"key":"k","limit":5,"window":"1m","constructor":1}`,
        ]),
      };
    case 10: // wrong methods on /check
      return {
        method: pick(["GET", "PUT", "DELETE", "PATCH"]),
        headers: good,
        body: JSON.stringify(valid),
      };
    default: // bad windows and costs
      return {
        method: "POST",
        headers: good,
        body: JSON.stringify({
          key: "k",
          limit: pick([5, 0, -5, 100_001, 2.5]),
          window: pick(["0s", "1y", "-1m", "8d", "1.5m", "m", " ", 0, -1, 1e20, "1 m m"]),
          cost: pick([undefined, 0, 6, -1, 1.1]),
        }),
      };
  }
}

describe("/check fuzz", () => {
  it(`answers ${CASES} malformed requests with 4xx only, counting nothing`, async () => {
    const random = prng(SEED);
    const cases = Array.from({ length: CASES }, (_, i) => malformed(random, i));
    const statuses = new Map<number, number>();
    const unexpected: { i: number; status: number; body: string }[] = [];
    for (let start = 0; start < cases.length; start += 50) {
      await Promise.all(
        cases.slice(start, start + 50).map(async (c, offset) => {
          const res = await worker("/check", {
            method: c.method,
            headers: c.headers,
            ...(c.method === "GET" ? {} : { body: c.body }),
          });
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          const text = await res.text();
          if (res.status < 400 || res.status > 499) {
            unexpected.push({ i: start + offset, status: res.status, body: text.slice(0, 200) });
          }
        }),
      );
    }
    console.log(
      `check fuzz (seed ${SEED}, ${CASES} cases): ${JSON.stringify(Object.fromEntries([...statuses].sort()))}`,
    );
    expect(unexpected).toEqual([]);
    // Never a counted request: nothing was written under this file's prefix.
    expect(await redis.keys(`${prefix}*`)).toEqual([]);
  });
});

// Strings that are not well-formed UTF-16: a lone high or low surrogate, alone, at either end,
// doubled or in the middle. JSON can carry them ("\ud800"), a Redis key cannot be encoded from
// them: every string a body carries must be refused up front, naming the field.
const LONE_SURROGATES = [
  "\ud800",
  "\udbff",
  "\udc00",
  "\udfff",
  "\ud800k",
  "k\ud800",
  "\udc00k",
  "k\udfff",
  "k\udfffk",
  "\udc00\ud800",
  "\ud800\ud800",
];

/** Valid bodies with one string replaced by `bad`, and the field a 400 must name. */
function surrogateCases(bad: string): { body: Record<string, unknown>; field: string }[] {
  const adhoc = { key: "k", limit: 5, window: "1m", requestId: "r" };
  return [
    { body: { ...adhoc, key: bad }, field: "key" },
    { body: { ...adhoc, requestId: bad }, field: "requestId" },
    { body: { ...adhoc, window: bad }, field: "window" },
    { body: { ...adhoc, algorithm: bad }, field: "algorithm" },
    { body: { key: bad, rule: "api" }, field: "key" },
    { body: { key: "k", rule: bad }, field: "rule" },
    { body: { key: "k", rules: [bad, "api"] }, field: "rules[0]" },
    { body: { key: "k", rules: ["api", bad] }, field: "rules[1]" },
    { body: { key: "k", rules: ["api", "other"], requestId: bad }, field: "requestId" },
  ];
}

describe("/check with strings that are not well-formed UTF-16", () => {
  for (const path of ["/check", "/check/peek", "/check/reset"]) {
    it(`${path}: a lone surrogate in any string field is a 400 naming it, nothing written`, async () => {
      const wrong: unknown[] = [];
      for (const bad of LONE_SURROGATES) {
        for (const { body, field } of surrogateCases(bad)) {
          const res = await worker(path, {
            method: "POST",
            headers: {
              "Content-Type": "application/json",
              // reset is an admin route: vitest.config.ts's LIMITER_ADMIN_TOKEN.
              Authorization: `Bearer ${path === "/check/reset" ? "test-admin-token" : TOKEN}`,
            },
            // JSON.stringify writes a lone surrogate as a \u escape: the body is valid JSON.
            body: JSON.stringify(body),
          });
          const text = await res.text();
          let problem: { field?: string; detail?: string } = {};
          try {
            problem = JSON.parse(text);
          } catch {}
          const named = problem.field === field && /well-formed/.test(problem.detail ?? "");
          if (
            res.status !== 400 ||
            !named ||
            !res.headers.get("Content-Type")?.includes("application/problem+json")
          ) {
            wrong.push({ body: JSON.stringify(body), field, status: res.status, text });
          }
        }
      }
      expect(wrong).toEqual([]);
      expect(await redis.keys(`${prefix}*`)).toEqual([]);
    });
  }

  it("a field name with a lone surrogate is a 400 naming the body", async () => {
    for (const bad of LONE_SURROGATES) {
      const res = await worker("/check", {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${TOKEN}` },
        body: JSON.stringify({ key: "k", limit: 5, window: "1m", [bad]: 1 }),
      });
      // (Messages carry the escaped string: a lone surrogate cannot cross the test runner's socket.)
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(await res.json(), JSON.stringify(bad)).toMatchObject({ field: "body" });
    }
    expect(await redis.keys(`${prefix}*`)).toEqual([]);
  });
});

describe("/check's shortcut past the walk over every string", () => {
  // The walk is skipped only for JSON text with no surrogate and no \u escape of one: escapes in
  // any case, in a value or a field name, still reach it.
  const send = (text: string) =>
    worker("/check", {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${TOKEN}` },
      body: text,
    });

  it("still refuses a lone surrogate written as an escape in upper or lower case", async () => {
    for (const [text, field] of [
      ['{"key":"\\uD800","limit":5,"window":"1m"}', "key"],
      ['{"key":"k\\udFfF","limit":5,"window":"1m"}', "key"],
      ['{"key":"k","limit":5,"window":"1m","\\uDC00x":1}', "body"],
    ] as const) {
      const res = await send(text);
      expect(res.status, text).toBe(400);
      const problem = await res.json<{ field: string; detail: string }>();
      expect(problem.field, text).toBe(field);
      expect(problem.detail, text).toMatch(/well-formed/);
    }
    expect(await redis.keys(`${prefix}*`)).toEqual([]);
  });

  it("admits a well-formed pair written as escapes (the walk runs and passes)", async () => {
    const res = await send(
      `{"key":"\\ud83d\\ude00-${Date.now()}","limit":5,"window":"1m","algorithm":"fixed-window"}`,
    );
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ allowed: true, source: "redis" });
    const keys = await redis.keys(`${prefix}*`);
    expect(keys.length).toBe(1);
    await redis.del(...keys);
  });
});
