import { describe, expect, inject, it } from "vitest";
import { parseRules } from "../../../src/config/worker-config";
import { createLimiter } from "../../../src/limiter/create-limiter";
import { decideRules } from "../../../src/rules/decide";
import { storeAt } from "../../support/worker/fault-control";
import { scopedPrefix } from "../../support/worker/redis";

const prefix = scopedPrefix("rule-decisions");

/** Headers that count how often each name is read. */
class CountingHeaders extends Headers {
  reads = new Map<string, number>();
  override get(name: string): string | null {
    const key = name.toLowerCase();
    this.reads.set(key, (this.reads.get(key) ?? 0) + 1);
    return super.get(name);
  }
}

describe("decideRules", () => {
  it("derives each client key once per request, however many rules share its spec", async () => {
    const rules = parseRules([
      { name: "minute", limit: 10, window: "1m", key: "header:X-API-Key" },
      { name: "hour", limit: 100, window: "1h", key: "header:X-API-Key" },
      { name: "day", limit: 1000, window: "1d", key: "header:X-API-Key", shadow: true },
    ]);
    if (!rules.ok) throw new Error(rules.detail);
    const headers = new CountingHeaders({ "X-API-Key": `key-${crypto.randomUUID()}` });
    const limiter = createLimiter({ store: storeAt(inject("bridgeUrl"), 5_000), prefix });
    const outcome = await decideRules(rules.value, headers, {
      limiter,
      clientIp: { trustedProxyHops: 1, ipv6PrefixLength: 64, ipv4PrefixLength: 32 },
    });
    expect(outcome.allowed).toBe(true);
    expect(outcome.decisions.map((d) => d.remaining)).toEqual([9, 99, 999]);
    expect(headers.reads.get("x-api-key")).toBe(1);
  });

  it("a repeated or comma-joined key header counts in its first value's bucket, under skip and shared", async () => {
    const rules = parseRules([
      { name: "optional", limit: 2, window: "1m", key: "header:X-API-Key", missingKey: "skip" },
      { name: "pooled", limit: 2, window: "1m", key: "header:X-API-Key", missingKey: "shared" },
    ]);
    if (!rules.ok) throw new Error(rules.detail);
    const limiter = createLimiter({ store: storeAt(inject("bridgeUrl"), 5_000), prefix });
    const options = {
      limiter,
      clientIp: { trustedProxyHops: 1, ipv6PrefixLength: 64, ipv4PrefixLength: 32 },
    };
    const key = `key-${crypto.randomUUID()}`;
    const twice = new Headers({ "X-API-Key": key });
    twice.append("X-API-Key", "junk");
    const spellings = [twice, new Headers({ "X-API-Key": `${key},junk` })];
    for (const headers of spellings) {
      expect((await decideRules(rules.value, headers, options)).allowed).toBe(true);
    }
    const third = await decideRules(rules.value, new Headers({ "X-API-Key": `${key},` }), options);
    expect(third.allowed).toBe(false);
    expect(third.violated).toEqual(["optional", "pooled"]);
    // The keyless clients' shared log was not drained by those spellings.
    const keyless = await decideRules(rules.value, new Headers(), options);
    expect(keyless.allowed).toBe(true);
    expect(keyless.decisions.map((d) => d.remaining)).toEqual([1]);
  });
});
