import { describe, expect, it } from "vitest";
import { DEFAULT_CLIENT_IP } from "../../../src/config/client-ip-config";
import { parseRules } from "../../../src/config/limiter-config";
import type { RuleConfig } from "../../../src/config/rule-schema";
import { type LimitedExchange, runLimited } from "../../../src/http/limit-pipeline";
import { createLimiter } from "../../../src/limiter/create-limiter";
import type { ShadowDenyEvent } from "../../../src/rules/decide";
import type { RulesOutcome } from "../../../src/rules/outcome";
// The rate algorithms: concurrency is tested on its own (concurrency tests).
import { RATE_ALGORITHMS as ALGORITHMS } from "../../../src/store/algorithm";
import { storageKey } from "../../../src/store/keys";
import { logCount } from "../../support/worker/log-state";
import { scopedPrefix, testRedis, testStore } from "../../support/worker/redis";

// The one sequence the proxy and the middleware share, driven directly: a real limiter on the
// test Redis, forward and refuse recording what they were handed.
const redis = testRedis();
const prefix = scopedPrefix("limit-pipeline");
const limiter = createLimiter({ store: testStore(5_000), prefix });

function rulesOf(input: unknown[]): RuleConfig[] {
  const parsed = parseRules(input);
  if (!parsed.ok) throw new Error(`${parsed.field} ${parsed.detail}`);
  return parsed.value;
}

/** An exchange whose forward answers `status` and whose refuse answers 429; both record calls. */
function exchange(rules: RuleConfig[], status = 200, extra: Partial<LimitedExchange> = {}) {
  const forwarded: RulesOutcome[] = [];
  const refused: RulesOutcome[] = [];
  const refusal = new Response("refused", { status: 429 });
  const call: LimitedExchange = {
    rules,
    headers: new Headers(),
    limiter,
    clientIp: DEFAULT_CLIENT_IP,
    legacyHeaders: false,
    forward: async (outcome) => {
      forwarded.push(outcome);
      return new Response("origin", { status });
    },
    refuse: (outcome) => {
      refused.push(outcome);
      return refusal;
    },
    ...extra,
  };
  return { call, forwarded, refused, refusal };
}

describe("runLimited: decide, forward or refuse, refund on 5xx, headers", () => {
  it("forwards a passed request once and adds the rate-limit headers to its answer", async () => {
    const name = `pass-${crypto.randomUUID().slice(0, 8)}`;
    const { call, forwarded, refused } = exchange(
      rulesOf([{ name, limit: 5, window: "1m", key: "global" }]),
      201,
      { legacyHeaders: true },
    );
    const response = await runLimited(call);
    expect(response.status).toBe(201);
    expect(await response.text()).toBe("origin");
    expect(response.headers.get("RateLimit-Policy")).toBe(`"${name}";q=5;w=60`);
    expect(response.headers.get("X-RateLimit-Remaining")).toBe("4");
    expect(forwarded).toEqual([expect.objectContaining({ allowed: true })]);
    expect(refused).toEqual([]);
  });

  it("answers a refused request with refuse's response as it is, never forwarding it", async () => {
    const name = `refuse-${crypto.randomUUID().slice(0, 8)}`;
    const rules = rulesOf([{ name, limit: 1, window: "1m", key: "global" }]);
    expect((await runLimited(exchange(rules).call)).status).toBe(200);
    const { call, forwarded, refused, refusal } = exchange(rules);
    expect(await runLimited(call)).toBe(refusal);
    expect(forwarded).toEqual([]);
    expect(refused).toEqual([expect.objectContaining({ allowed: false, violated: [name] })]);
  });

  it("gives a 5xx back in the refundOn rules before it resolves; other rules and statuses keep it", async () => {
    const run = crypto.randomUUID().slice(0, 8);
    const rules = rulesOf([
      { name: `refunded-${run}`, limit: 5, window: "1m", key: "global", refundOn: "5xx" },
      { name: `kept-${run}`, limit: 5, window: "1m", key: "global" },
    ]);
    const count = (name: string) => logCount(redis, storageKey(prefix, `${name}-${run}`, "global"));
    expect((await runLimited(exchange(rules, 503).call)).status).toBe(503);
    expect([await count("refunded"), await count("kept")]).toEqual([0, 1]);
    expect((await runLimited(exchange(rules, 404).call)).status).toBe(404);
    expect([await count("refunded"), await count("kept")]).toEqual([1, 2]);
  });

  // The headers say what is true once the answer is sent: a unit given back is in `remaining`.
  for (const algorithm of ALGORITHMS) {
    it(`${algorithm}: a refunded 5xx carries the remaining count after the refund`, async () => {
      const run = crypto.randomUUID().slice(0, 8);
      const [refunded, kept] = [`refunded-${run}`, `kept-${run}`];
      const rules = rulesOf([
        {
          name: refunded,
          limit: 6,
          cost: 2,
          window: "1m",
          key: "global",
          refundOn: "5xx",
          algorithm,
        },
        { name: kept, limit: 5, window: "1m", key: "global", algorithm },
      ]);
      const remaining = (response: Response) =>
        [...(response.headers.get("RateLimit") ?? "").matchAll(/"([^"]+)";r=(\d+)/g)].map(
          ([, policy, r]) => [policy, Number(r)],
        );
      for (const keptRemaining of [4, 3]) {
        const response = await runLimited(exchange(rules, 503, { legacyHeaders: true }).call);
        expect(response.status).toBe(503);
        expect(remaining(response)).toEqual([
          [refunded, 6],
          [kept, keptRemaining],
        ]);
        expect(response.headers.get("X-RateLimit-Remaining")).toBe(String(keptRemaining));
      }
      // A status that is not refunded keeps the count it reported.
      const ok = await runLimited(exchange(rules, 200).call);
      expect(remaining(ok)).toEqual([
        [refunded, 4],
        [kept, 2],
      ]);
    });
  }

  it("refuses a request missing its key under missingKey deny before any store call", async () => {
    const name = `keyed-${crypto.randomUUID().slice(0, 8)}`;
    const { call, forwarded, refused } = exchange(
      rulesOf([{ name, limit: 5, window: "1m", key: "header:X-Key", missingKey: "deny" }]),
    );
    expect((await runLimited(call)).status).toBe(429);
    expect(refused).toEqual([
      expect.objectContaining({
        missingKey: { rule: name, key: "header:x-key", reason: "header x-key is absent" },
      }),
    ]);
    expect(forwarded).toEqual([]);
    expect(await redis.keys(`${prefix}:${name}*`)).toEqual([]);
  });

  it("passes a request only shadow rules deny, and reports each to onShadowDeny", async () => {
    const name = `shadow-${crypto.randomUUID().slice(0, 8)}`;
    const rules = rulesOf([{ name, limit: 1, window: "1m", key: "global", shadow: true }]);
    const events: ShadowDenyEvent[] = [];
    const onShadowDeny = (event: ShadowDenyEvent) => events.push(event);
    expect((await runLimited(exchange(rules, 200, { onShadowDeny }).call)).status).toBe(200);
    const response = await runLimited(exchange(rules, 200, { onShadowDeny }).call);
    expect(response.status).toBe(200);
    expect(response.headers.has("Retry-After")).toBe(false);
    expect(events).toEqual([expect.objectContaining({ event: "shadow-deny", policy: name })]);
  });

  it("gives back a shadow rule's slot taken beside a refusal: a refused request holds none", async () => {
    const run = crypto.randomUUID().slice(0, 8);
    const [enforced, shadow] = [`enforced-${run}`, `shadow-slots-${run}`];
    const rules = rulesOf([
      { name: enforced, limit: 1, window: "1m", key: "global" },
      {
        name: shadow,
        algorithm: "concurrency",
        limit: 5,
        timeout: "30s",
        key: "global",
        shadow: true,
      },
    ]);
    const passed = await runLimited(exchange(rules).call);
    expect(await limiter.inFlight([shadow])).toEqual([expect.objectContaining({ inFlight: 1 })]);
    await passed.text();
    const { call, refused } = exchange(rules);
    expect((await runLimited(call)).status).toBe(429);
    expect(refused).toEqual([expect.objectContaining({ allowed: false, violated: [enforced] })]);
    expect(refused[0]?.slots).toBeUndefined();
    // Both releases run off the request path: poll (bounded) until they have landed.
    const inFlight = async () => (await limiter.inFlight([shadow]))[0]?.inFlight;
    let held = await inFlight();
    for (let tries = 0; tries < 100 && held !== 0; tries++) held = await inFlight();
    expect(held).toBe(0);
  });
});
