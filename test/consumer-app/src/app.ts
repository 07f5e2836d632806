// The scratch app: the entry points as a user's code calls them.
import {
  createLimiter,
  createStoreClient,
  type Decision,
  type RateLimitVariables,
  rateLimit,
} from "edge-limiter";
import { problemResponse } from "edge-limiter/server";
import { Hono } from "hono";

export interface StoreSettings {
  url: string;
  token: string;
  prefix: string;
}

export function createApp(store: StoreSettings) {
  const limiter = createLimiter({
    store: createStoreClient({ url: store.url, token: store.token, timeoutMs: 5_000 }),
    prefix: store.prefix,
    timeoutMs: 5_000,
    failMode: "closed",
  });
  const app = new Hono<{ Variables: RateLimitVariables }>();
  app.use(
    "/api/*",
    rateLimit({
      limiter,
      rules: { name: "api", limit: 3, window: "1m" },
      key: (c) => c.req.header("X-User-Id"),
    }),
  );
  app.get("/api/hello", (c) => {
    const remaining = c.get("rateLimit").decisions.map((d: Decision) => d.remaining);
    return c.json({ hello: "world", remaining });
  });
  // One call: the middleware builds its own limiter from the store, and keys by the client's
  // address, which outside Cloudflare is the connection's (Node, Bun, Deno).
  app.use(
    "/ip/*",
    rateLimit({
      rules: { name: "ip", limit: 3, window: "1 minute" },
      store: { url: store.url, token: store.token },
      limiterOptions: { prefix: store.prefix, timeoutMs: 5_000, failMode: "closed" },
    }),
  );
  app.get("/ip/hello", (c) => c.json({ hello: "ip" }));
  // createLimiter on its own, decided in the app's code.
  app.get("/direct", async (c) => {
    const decision = await limiter.limit({
      policy: "direct",
      key: c.req.query("key") ?? "anonymous",
      limit: 1,
      windowMs: 60_000,
    });
    return c.json({ allowed: decision.allowed }, decision.allowed ? 200 : 429);
  });
  // What is done to a key besides deciding: methods of the same limiter (its prefix and store).
  app.post("/direct/override", async (c) => {
    const key = c.req.query("key") ?? "anonymous";
    const changed = await limiter.overrides.set("direct", key, { limit: 5 });
    const peek = await limiter.peek({
      policy: "direct",
      key,
      limit: 1,
      windowMs: 60_000,
      overrides: true,
    });
    return c.json({ changed: changed.ok, remaining: peek.peeked ? peek.remaining : null });
  });
  // The server entry, as a deployment of its own answers: an unknown route is a problem+json.
  app.notFound(() => problemResponse(404, { title: "Not found" }));
  return app;
}
