import { describe, expect, inject, it } from "vitest";
import { parseRules } from "../../../src/config/limiter-config";
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

  it('missingKey "deny" names what is really missing: the header, the address, or the app\'s key', async () => {
    const limiter = createLimiter({ store: storeAt(inject("bridgeUrl"), 5_000), prefix });
    const clientIp = { trustedProxyHops: 1, ipv6PrefixLength: 64, ipv4PrefixLength: 32 };
    const denied = async (
      key: string,
      headers: Record<string, string>,
      extra: {
        trusted?: "x-forwarded-for" | "x-real-ip";
        hops?: number;
        keyOf?: () => Promise<string | undefined>;
      } = {},
    ) => {
      const rules = parseRules([
        { name: "strict", limit: 5, window: "1m", key, missingKey: "deny" },
      ]);
      if (!rules.ok) throw new Error(rules.detail);
      const outcome = await decideRules(rules.value, new Headers(headers), {
        limiter,
        clientIp: {
          ...clientIp,
          trustedProxyHops: extra.hops ?? 1,
          ...(extra.trusted ? { trustedProxyHeader: extra.trusted } : {}),
        },
        keyOf: extra.keyOf,
      });
      expect(outcome.allowed).toBe(false);
      expect(outcome.decisions).toEqual([]);
      return outcome.missingKey?.reason;
    };
    const ip = { "CF-Connecting-IP": "203.0.113.9" };
    // The app's key function found nothing, although the request has an address.
    expect(await denied("ip", ip, { keyOf: async () => undefined })).toBe(
      "the app's key function returned no key",
    );
    expect(await denied("header:X-Api-Key", ip)).toBe("header x-api-key is absent");
    expect(await denied("header:X-Api-Key", { "X-Api-Key": " , ,", ...ip })).toBe(
      "header x-api-key holds only blanks and commas",
    );
    expect(await denied("ip", {})).toBe("no CF-Connecting-IP header");
    expect(await denied("ip", { "CF-Connecting-IP": "not-an-ip" })).toBe(
      "CF-Connecting-IP is not an IP address",
    );
    const xff = "x-forwarded-for";
    expect(await denied("ip", {}, { trusted: xff })).toBe(
      "neither x-forwarded-for (the trusted proxy header) nor CF-Connecting-IP is present",
    );
    expect(
      await denied("ip", { "X-Forwarded-For": "198.51.100.1" }, { trusted: xff, hops: 2 }),
    ).toBe("x-forwarded-for has fewer than 2 entries");
    expect(
      await denied("ip", { "X-Forwarded-For": "junk, 198.51.100.1" }, { trusted: xff, hops: 2 }),
    ).toBe("x-forwarded-for entry 2 from the right is not an IP address");
    expect(await denied("ip", { "X-Real-IP": "junk", ...ip }, { trusted: "x-real-ip" })).toBe(
      "x-real-ip (the trusted proxy header) is not an IP address",
    );
  });
});
