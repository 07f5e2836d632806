import { type Context, Hono } from "hono";
import { beforeAll, describe, expect, it } from "vitest";
import { createLimiter, rateLimit } from "../../../src/index";
import { plansAdmin } from "../../support/worker/plans-admin";
import { scopedPrefix, testStore } from "../../support/worker/redis";

// Network blocks through the middleware outside Cloudflare: they match the client's own address
// (the runtime's connection, or `ipOf`), whatever the rules are keyed by, and never a
// CF-Connecting-IP or X-Forwarded-For the client wrote itself. The connection is given as Hono's
// adapters give it (c.env), as in middleware-ip.test.ts.
const prefix = scopedPrefix("mw-network-ip");
const store = testStore(2_000);
const BLOCKED = "203.0.113.0/24";

beforeAll(async () => {
  const set = await plansAdmin(store, prefix).networks.add({ by: "ip", value: BLOCKED });
  expect(set.ok).toBe(true);
});

const node = (address: string) => ({ incoming: { socket: { remoteAddress: address } } });
const bun = (address: string) => ({ requestIP: () => ({ address, family: "IPv4", port: 1 }) });
const deno = (address: string) => ({ remoteAddr: { hostname: address, port: 1 } });

type Keyed = "key function" | "header:";
const named: Record<Keyed, string> = {
  "key function": "the app's key function",
  "header:": '"header:x-api-key"',
};

function app(keyed: Keyed, ipOf?: (c: Context) => string | undefined) {
  const a = new Hono();
  const limiter = createLimiter({ store, prefix });
  a.use(
    rateLimit({
      rules:
        keyed === "header:"
          ? { name: "api", limit: 100, window: "1m", key: "header:x-api-key" }
          : { name: "api", limit: 100, window: "1m" },
      ...(keyed === "key function" ? { key: (c: Context) => c.req.header("x-api-key") } : {}),
      limiter,
      networkBlocks: limiter.networkBlocks(),
      ...(ipOf ? { ipOf } : {}),
    }),
  );
  a.get("/", (c) => c.text("ok"));
  return a;
}

const as = (headers: Record<string, string>) => ({
  headers: { "x-api-key": `customer-${crypto.randomUUID()}`, ...headers },
});

describe("network blocks in the middleware off Cloudflare", () => {
  for (const keyed of ["key function", "header:"] as const) {
    it(`keyed by ${named[keyed]}: a connection in the range is refused, however it is headed`, async () => {
      const a = app(keyed);
      const inside = node("203.0.113.5");
      for (const headers of [
        {},
        { "CF-Connecting-IP": "198.51.100.7" },
        { "X-Forwarded-For": "198.51.100.7" },
        { "CF-Connecting-IP": "198.51.100.7", "X-Forwarded-For": "198.51.100.8, 198.51.100.9" },
      ]) {
        const res = await a.request("/", as(headers), inside);
        expect(res.status, JSON.stringify(headers)).toBe(403);
        expect(await res.json()).toMatchObject({ blocked: { by: "ip", value: BLOCKED } });
      }
    });

    it(`keyed by ${named[keyed]}: a client outside the range naming one inside it passes`, async () => {
      const a = app(keyed);
      const forged = as({ "CF-Connecting-IP": "203.0.113.9", "X-Forwarded-For": "203.0.113.9" });
      expect((await a.request("/", forged, node("198.51.100.20"))).status).toBe(200);
    });
  }

  it("Bun's and Deno's connections alike", async () => {
    const a = app("header:");
    const forged = as({ "CF-Connecting-IP": "198.51.100.7" });
    expect((await a.request("/", forged, bun("203.0.113.5"))).status).toBe(403);
    expect((await a.request("/", forged, deno("203.0.113.5"))).status).toBe(403);
    const naming = as({ "CF-Connecting-IP": "203.0.113.9" });
    expect((await a.request("/", naming, bun("198.51.100.20"))).status).toBe(200);
    expect((await a.request("/", naming, deno("198.51.100.20"))).status).toBe(200);
  });

  it("ipOf, when given, is the address matched, over the connection and any header", async () => {
    const behindProxy = app("key function", (c) => c.req.header("x-my-proxy-client"));
    const inside = as({ "x-my-proxy-client": "203.0.113.5", "CF-Connecting-IP": "198.51.100.7" });
    expect((await behindProxy.request("/", inside, node("198.51.100.20"))).status).toBe(403);
    const outside = as({ "x-my-proxy-client": "198.51.100.20", "CF-Connecting-IP": "203.0.113.9" });
    expect((await behindProxy.request("/", outside, node("203.0.113.5"))).status).toBe(200);
  });

  it("on Cloudflare (no connection info: the edge wrote CF-Connecting-IP) that header is the address", async () => {
    const a = app("header:");
    expect((await a.request("/", as({ "CF-Connecting-IP": "203.0.113.9" }))).status).toBe(403);
    expect((await a.request("/", as({ "CF-Connecting-IP": "198.51.100.7" }))).status).toBe(200);
  });
});
