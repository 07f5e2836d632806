import { describe, expect, it } from "vitest";
import { MAX_KEY_LENGTH } from "../../../src/bounded-key";
import type { ClientIpConfig } from "../../../src/config/client-ip-config";
import { digestHex } from "../../../src/digest";
import { groupAddress } from "../../../src/net/ip-address";
import {
  clientKey,
  HEADER_KEY_CACHE_BYTES,
  HEADER_KEY_CACHE_SIZE,
  headerKeyCacheBytes,
  headerKeyCacheSize,
} from "../../../src/rules/client-key";

const defaults: ClientIpConfig = {
  trustedProxyHops: 1,
  ipv6PrefixLength: 64,
  ipv4PrefixLength: 32,
};
const headers = (init: Record<string, string>) => new Headers(init);

describe("client keys", () => {
  it('"ip" reads CF-Connecting-IP and ignores forwarding headers a client can forge', async () => {
    const forged = headers({
      "CF-Connecting-IP": "203.0.113.7",
      "X-Forwarded-For": "1.1.1.1",
      "X-Real-IP": "2.2.2.2",
      "True-Client-IP": "3.3.3.3",
    });
    expect(await clientKey("ip", forged, defaults)).toBe("203.0.113.7");
    expect(
      await clientKey("ip", headers({ "X-Forwarded-For": "1.1.1.1" }), defaults),
    ).toBeUndefined();
  });

  it("trusts a forwarding header only when configured, taking the entry the trusted proxy wrote", async () => {
    const chain = headers({
      "CF-Connecting-IP": "10.0.0.1",
      "X-Forwarded-For": "6.6.6.6, 198.51.100.9, 10.0.0.2",
    });
    const oneHop = { ...defaults, trustedProxyHeader: "x-forwarded-for" as const };
    expect(await clientKey("ip", chain, oneHop)).toBe("10.0.0.2");
    expect(await clientKey("ip", chain, { ...oneHop, trustedProxyHops: 2 })).toBe("198.51.100.9");
    const realIp = { ...defaults, trustedProxyHeader: "x-real-ip" as const };
    expect(await clientKey("ip", headers({ "X-Real-IP": "192.0.2.4" }), realIp)).toBe("192.0.2.4");
    // Without the header the request did not come through the proxy: the connecting IP counts.
    expect(await clientKey("ip", headers({ "CF-Connecting-IP": "192.0.2.5" }), realIp)).toBe(
      "192.0.2.5",
    );
    // Present but short of the hops, or not an address: no key (missingKey decides), never the
    // connecting IP, which behind your proxy is the proxy's own address.
    const short = headers({ "CF-Connecting-IP": "192.0.2.5", "X-Forwarded-For": "198.51.100.9" });
    expect(await clientKey("ip", short, { ...oneHop, trustedProxyHops: 2 })).toBeUndefined();
    const junk = headers({ "CF-Connecting-IP": "192.0.2.5", "X-Real-IP": "junk" });
    expect(await clientKey("ip", junk, realIp)).toBeUndefined();
  });

  it("groups IPv6 by /64 (configurable) and IPv4 by /32 (configurable)", () => {
    expect(groupAddress("2001:db8:1:2:3:4:5:6", defaults)).toBe("2001:db8:1:2::/64");
    expect(groupAddress("2001:DB8:1:2:ffff::1", defaults)).toBe("2001:db8:1:2::/64");
    expect(groupAddress("2001:db8:1:2::", defaults)).toBe("2001:db8:1:2::/64");
    expect(groupAddress("2001:db8:1:2:3:4:5:6", { ...defaults, ipv6PrefixLength: 48 })).toBe(
      "2001:db8:1::/48",
    );
    expect(groupAddress("2001:db8:1:2:3:4:5:6", { ...defaults, ipv6PrefixLength: 56 })).toBe(
      "2001:db8:1::/56",
    );
    expect(groupAddress("2001:db8:1:2:3:4:5:6", { ...defaults, ipv6PrefixLength: 128 })).toBe(
      "2001:db8:1:2:3:4:5:6",
    );
    expect(groupAddress("::1", { ...defaults, ipv6PrefixLength: 128 })).toBe("::1");
    expect(groupAddress("::ffff:192.0.2.1", defaults)).toBe("192.0.2.1");
    expect(groupAddress("192.0.2.200", { ...defaults, ipv4PrefixLength: 24 })).toBe("192.0.2.0/24");
    for (const bad of [
      "",
      "1.2.3",
      "1.2.3.256",
      "01.2.3.4",
      "2001:db8::1::2",
      "1:2:3:4:5:6:7:8:9",
      "x::1",
      "::g",
    ]) {
      expect(groupAddress(bad, defaults), bad).toBeUndefined();
    }
  });

  it('hashes "header:<name>" values with SHA-256 so API keys never reach Redis in the clear', async () => {
    const key = await clientKey(
      "header:x-api-key",
      headers({ "X-API-Key": "secret-123" }),
      defaults,
    );
    const expected = Array.from(
      new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode("secret-123"))),
      (b) => b.toString(16).padStart(2, "0"),
    ).join("");
    expect(key).toBe(expected);
    expect(key).not.toContain("secret");
    expect(await clientKey("header:x-api-key", headers({}), defaults)).toBeUndefined();
    expect(
      await clientKey("header:x-api-key", headers({ "X-API-Key": "  " }), defaults),
    ).toBeUndefined();
  });

  it("keys a repeated or comma-joined header by its first non-empty value, as origins read it", async () => {
    const k = (init: HeadersInit) => clientKey("header:x-api-key", new Headers(init), defaults);
    const real = await k({ "X-API-Key": "valid" });
    expect(real).toMatch(/^[0-9a-f]{64}$/);
    const repeated = new Headers();
    repeated.append("X-API-Key", "valid");
    repeated.append("X-API-Key", `junk-${crypto.randomUUID()}`);
    expect(await clientKey("header:x-api-key", repeated, defaults)).toBe(real);
    // Every spelling an origin reads as "valid" (RFC 9110 §5.6.1: empty list elements and the
    // whitespace around them are ignored) lands in the same bucket: none is a fresh one.
    for (const spelling of [
      "valid, junk",
      "valid,junk",
      "valid,",
      "valid ,",
      ",valid",
      " , valid",
      ",,valid,,junk",
      "valid\t,\tjunk",
      "  valid  ",
    ]) {
      expect(await k({ "X-API-Key": spelling }), JSON.stringify(spelling)).toBe(real);
    }
    // Another first value is another client (what the origin authenticates), and a value of
    // nothing but commas and blanks is no key at all.
    expect(await k({ "X-API-Key": "other, valid" })).toBe(await k({ "X-API-Key": "other" }));
    expect(await k({ "X-API-Key": "Valid" })).not.toBe(real);
    for (const empty of [",", " , ", ",,", "\t,"]) {
      expect(await k({ "X-API-Key": empty }), JSON.stringify(empty)).toBeUndefined();
    }
  });

  it('"global" is one key for everyone', async () => {
    expect(await clientKey("global", headers({}), defaults)).toBe("global");
  });
});

describe("header keys' digests, remembered per isolate", () => {
  it("answers a repeated value from the cache with the same SHA-256, and stays bounded", async () => {
    const spec = "header:x-api-key";
    const first = await clientKey(spec, headers({ "X-API-Key": "cached-key" }), defaults);
    const again = await clientKey(spec, headers({ "X-API-Key": " cached-key ," }), defaults);
    expect(again).toBe(first);
    expect(first).toBe(await digestHex("SHA-256", "cached-key"));
    // More one-off values than the cache holds: it never grows past its bound, and a value
    // that left it is hashed again, to the same digest.
    for (let i = 0; i < HEADER_KEY_CACHE_SIZE + 50; i++) {
      const key = await clientKey(spec, headers({ "X-API-Key": `one-off-${i}` }), defaults);
      expect(key).toMatch(/^[0-9a-f]{64}$/);
    }
    expect(headerKeyCacheSize()).toBe(HEADER_KEY_CACHE_SIZE);
    expect(await clientKey(spec, headers({ "X-API-Key": "cached-key" }), defaults)).toBe(first);
  });

  it("1 100 distinct 32 kB and 128 kB keys: hashed right, the cache stays within its bytes", async () => {
    const spec = "header:x-api-key";
    for (const size of [32 * 1024, 128 * 1024]) {
      for (let i = 0; i < 1_100; i++) {
        const value = `${String(i).padStart(6, "0")}${"k".repeat(size - 6)}`;
        const key = await clientKey(spec, headers({ "X-API-Key": value }), defaults);
        if (i === 0) expect(key).toBe(await digestHex("SHA-256", value));
        expect(headerKeyCacheBytes()).toBeLessThanOrEqual(HEADER_KEY_CACHE_BYTES);
      }
    }
    // Such values are hashed on every request, never held (a real heap: test/src/limiter/isolate-memory.node.test.ts).
    expect(headerKeyCacheBytes()).toBeLessThanOrEqual(HEADER_KEY_CACHE_BYTES);
  });

  it("keeps values up to MAX_KEY_LENGTH, within its bytes, however many", async () => {
    const spec = "header:x-api-key";
    for (let i = 0; i < HEADER_KEY_CACHE_SIZE; i++) {
      const value = `${String(i).padStart(6, "0")}${"t".repeat(MAX_KEY_LENGTH - 6)}`;
      await clientKey(spec, headers({ "X-API-Key": value }), defaults);
    }
    expect(headerKeyCacheBytes()).toBeLessThanOrEqual(HEADER_KEY_CACHE_BYTES);
    expect(headerKeyCacheSize()).toBeGreaterThan(HEADER_KEY_CACHE_SIZE / 2);
  });
});
