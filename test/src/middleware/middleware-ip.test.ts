import { Hono } from "hono";
import { describe, expect, it, vi } from "vitest";
import { rateLimit } from "../../../src/index";
import { scopedPrefix, testStore } from "../../support/worker/redis";

// "ip" rules outside Cloudflare: the runtime's connection address, as Hono's getConnInfo reads it
// on Node, Bun and Deno, and never a CF-Connecting-IP a client sent itself.
const prefix = scopedPrefix("mw-ip");
const store = testStore(2_000);

function app(name: string, ipOf?: (c: unknown) => string | undefined) {
  const a = new Hono();
  a.use(
    rateLimit({
      rules: { name, limit: 1, window: "1m" },
      store,
      limiterOptions: { prefix },
      ...(ipOf ? { ipOf } : {}),
    }),
  );
  a.get("/", (c) => c.text("ok"));
  return a;
}

const run = crypto.randomUUID().slice(0, 8);
const node = (address: string) => ({ incoming: { socket: { remoteAddress: address } } });
const bun = (address: string) => ({ requestIP: () => ({ address, family: "IPv4", port: 1 }) });
const deno = (address: string) => ({ remoteAddr: { hostname: address, port: 1 } });

describe("the middleware's client address outside Cloudflare", () => {
  for (const [runtime, env] of [
    ["node", node],
    ["bun", bun],
    ["deno", deno],
  ] as const) {
    it(`${runtime}: one counter per connection address, a forged CF-Connecting-IP ignored`, async () => {
      const a = app(`ip-${runtime}-${run}`);
      const forged = { headers: { "CF-Connecting-IP": "198.51.100.7" } };
      expect((await a.request("/", forged, env("203.0.113.1"))).status).toBe(200);
      // The same connection with another forged header: still the same client.
      const again = { headers: { "CF-Connecting-IP": "198.51.100.8" } };
      expect((await a.request("/", again, env("203.0.113.1"))).status).toBe(429);
      expect((await a.request("/", forged, env("203.0.113.2"))).status).toBe(200);
    });
  }

  it("ipOf, when given, is the address", async () => {
    const a = app(`ip-of-${run}`, () => "192.0.2.44");
    expect((await a.request("/", {}, node("203.0.113.1"))).status).toBe(200);
    expect((await a.request("/", {}, node("203.0.113.2"))).status).toBe(429);
  });

  it("no address at all: warns once, naming the rule, that every client shares one counter", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      const a = app(`ip-none-${run}`);
      await a.request("/");
      await a.request("/");
      expect(warn).toHaveBeenCalledTimes(1);
      expect(String(warn.mock.calls[0]?.[0])).toContain('"event":"rate-limit-no-client-ip"');
    } finally {
      warn.mockRestore();
    }
  });
});
