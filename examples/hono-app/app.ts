// An edge app that rate-limits its own routes with the edge-limiter middleware.
//   npm run bridge, then: npx wrangler dev examples/hono-app/app.ts --port 8788 \
//     --var UPSTASH_REDIS_REST_URL:http://127.0.0.1:8079 --var UPSTASH_REDIS_REST_TOKEN:dev-bridge-token
//   (docs/middleware.md)

import {
  createLimiter,
  createStoreClient,
  fromEnv,
  type Limiter,
  type RateLimitVariables,
  rateLimit,
} from "edge-limiter";
import { type Context, Hono } from "hono";

export interface Bindings {
  UPSTASH_REDIS_REST_URL: string;
  UPSTASH_REDIS_REST_TOKEN: string;
  /** Redis key prefix. @default "example" */
  LIMITER_PREFIX?: string;
}

type AppEnv = { Bindings: Bindings; Variables: RateLimitVariables };

// The simplest form is `rateLimit({ rules, store: fromEnv })`: the middleware builds its own
// limiter and keeps it per isolate. Here two middleware share one limiter, with a prefix from a
// binding, so it is built once per isolate on the first request (bindings exist only inside a
// request, and its denial cache and breaker should outlive it).
let limiter: Limiter | undefined;
function limiterFor(c: Context<AppEnv>): Limiter {
  limiter ??= createLimiter({
    store: createStoreClient(fromEnv(c)),
    prefix: c.env.LIMITER_PREFIX ?? "example",
  });
  return limiter;
}

const app = new Hono<AppEnv>();

// Everyone: 5 requests a minute per client IP (CF-Connecting-IP, IPv6 by /64) on /api/*,
// plus 2 writes a minute; health checks are not limited.
app.use(
  "/api/*",
  rateLimit<AppEnv>({
    limiter: limiterFor,
    rules: [
      { name: "api", limit: 5, window: "1m" },
      // Writes: a token bucket (bursts of 2, one back every 30 s), given back when the app fails.
      {
        name: "writes",
        limit: 2,
        window: "1m",
        match: { methods: ["POST", "PUT", "DELETE"] },
        algorithm: "token-bucket",
        refundOn: "5xx",
      },
    ],
    skip: (c) => c.req.path === "/api/health",
  }),
);

// Per user (a header set by your auth layer), with a custom answer.
app.use(
  "/reports/*",
  rateLimit<AppEnv>({
    limiter: limiterFor,
    rules: { name: "reports", limit: 1, window: "1h", missingKey: "deny" },
    key: (c) => c.req.header("X-User-Id"),
    handler: (c, result) =>
      c.json({ error: "report quota used up", policies: result.violated }, 429),
  }),
);

app.get("/api/health", (c) => c.text("ok"));
app.get("/api/items", (c) => {
  const { decisions } = c.get("rateLimit");
  return c.json({ items: [1, 2, 3], remaining: decisions.map((d) => [d.policy, d.remaining]) });
});
app.post("/api/items", (c) => c.json({ created: true }, 201));
app.get("/reports/monthly", (c) => c.text("report"));

export default app;
