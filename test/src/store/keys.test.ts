import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { rateLimit } from "../../../src/index";
import type { BreakerEvent } from "../../../src/limiter/circuit-breaker";
import { createLimiter } from "../../../src/limiter/create-limiter";
import { encodeKeyPart, requestRecordKey, storageKey } from "../../../src/store/keys";
import { logCount } from "../../support/worker/log-state";
import { scopedPrefix, TEST_DEADLINE_MS, testRedis, testStore } from "../../support/worker/redis";

const redis = testRedis();
const prefix = scopedPrefix("store-keys");

// Strings a client can send that are not well-formed UTF-16, and their near neighbours.
const TRICKY = [
  "\ud800",
  "\udc00",
  "\udbff",
  "\udfff",
  "a\ud800",
  "\ud800a",
  "\udc00\ud800",
  "\ud800\ud800\udc00",
  "\ud83d\ude00",
  "\ud83d\ude00\ud800",
  "%uD800",
  "%ud800",
  "%25uD800",
  "\ufffd",
  "",
  "a",
  "{}:%",
];

describe("encodeKeyPart", () => {
  it("never throws, for any string a client can send", () => {
    for (const value of TRICKY) expect(() => encodeKeyPart(value)).not.toThrow();
    // Every lone surrogate, alone and between characters.
    for (let code = 0xd800; code <= 0xdfff; code += 0x7f) {
      const lone = String.fromCharCode(code);
      expect(() => encodeKeyPart(`x${lone}y`)).not.toThrow();
    }
  });

  it("is injective: distinct strings are distinct keys (a lone surrogate is not U+FFFD or %uD800)", () => {
    const encoded = TRICKY.map(encodeKeyPart);
    expect(new Set(encoded).size).toBe(TRICKY.length);
  });

  it("leaves no separator or hash-tag character in a key", () => {
    for (const value of TRICKY) expect(encodeKeyPart(value)).not.toMatch(/[:{}]/);
  });

  it("equals encodeURIComponent on well-formed strings (existing keys keep their names)", () => {
    for (const value of ["user 1", "ü", "\ud83d\ude00", "a/b?c"]) {
      expect(encodeKeyPart(value)).toBe(encodeURIComponent(value));
    }
  });

  it("builds storage and request-record keys from lone surrogates", () => {
    expect(storageKey("p", "r", "\ud800")).toBe("p:r:{%uD800}");
    expect(requestRecordKey(["p:r:{k}"], "\udc00x")).toBe("p:r:{k}:rid:%uDC00x");
  });
});

describe("a client's malformed string never switches the store off", () => {
  function limiter() {
    const events: BreakerEvent[] = [];
    const errors: unknown[] = [];
    const instance = createLimiter({
      store: testStore(),
      prefix,
      timeoutMs: TEST_DEADLINE_MS,
      onBreakerChange: (event) => events.push(event),
      onStoreError: (error) => errors.push(error),
    });
    return { limiter: instance, events, errors };
  }
  const request = (key: string) => ({ policy: "lone", key, limit: 3, windowMs: 60_000 });

  it("a lone surrogate in the key is its own bucket, decided and counted by Redis", async () => {
    const { limiter: l, events, errors } = limiter();
    const sources = [];
    for (let i = 0; i < 5; i++) sources.push(await l.limit(request("\ud800")));
    // (The third admission left nothing: the denial cache answers from then on.)
    expect(sources.map((d) => [d.allowed, d.source])).toEqual([
      [true, "redis"],
      [true, "redis"],
      [true, "redis"],
      [false, "cache"],
      [false, "cache"],
    ]);
    expect(await logCount(redis, storageKey(prefix, "lone", "\ud800"))).toBe(3);
    // Not the bucket of its replacement character, nor of its escaped spelling.
    expect((await l.limit(request("\ufffd"))).remaining).toBe(2);
    expect((await l.limit(request("%uD800"))).remaining).toBe(2);
    expect(events).toEqual([]);
    expect(errors).toEqual([]);
  });

  it("a lone surrogate in the request id is decided by Redis and replayed, and never counts as a store failure", async () => {
    const { limiter: l, events, errors } = limiter();
    for (let i = 0; i < 6; i++) {
      const outcome = await l.limitAll([request(`rid-${i}`)], { requestId: `\udc00-${i}` });
      expect(outcome.decisions[0]?.source).toBe("redis");
    }
    const replay = await l.limitAll([request("rid-0")], { requestId: "\udc00-0" });
    expect(replay).toMatchObject({ allowed: true, replayed: true });
    // Six such requests are well past the breaker's threshold (3): it never moved.
    expect(events).toEqual([]);
    expect(errors).toEqual([]);
    expect((await l.limit(request("after"))).source).toBe("redis");
  });
});

describe("the middleware's key", () => {
  it("a key() returning a lone surrogate is limited in its own bucket (no exception, no fallback)", async () => {
    const app = new Hono();
    app.use(
      rateLimit({
        limiter: createLimiter({ store: testStore(), prefix, timeoutMs: TEST_DEADLINE_MS }),
        rules: { name: "mw-lone", limit: 2, window: "1m" },
        key: (c) => c.req.header("x-user") ?? "",
      }),
    );
    app.get("/", (c) => c.text("ok"));
    const send = (user: string) => app.request("/", { headers: { "x-user": user } });
    // Header values cannot carry a lone surrogate; a key() computed from anything else can.
    const lone = new Hono();
    lone.use(
      rateLimit({
        limiter: createLimiter({ store: testStore(), prefix, timeoutMs: TEST_DEADLINE_MS }),
        rules: { name: "mw-lone", limit: 2, window: "1m" },
        key: () => "\udbff",
      }),
    );
    lone.get("/", (c) => c.text("ok"));
    const statuses = [];
    for (let i = 0; i < 3; i++) statuses.push((await lone.request("/")).status);
    expect(statuses).toEqual([200, 200, 429]);
    expect(await logCount(redis, storageKey(prefix, "mw-lone", "\udbff"))).toBe(2);
    // Another client is untouched.
    expect((await send("someone")).status).toBe(200);
  });
});
