/**
 * The worker's entry: its routes (/check and below, everything else through the proxy) and the
 * last-resort error answer. Each route's handler is in src/http/.
 */
import { Hono } from "hono";
import type { Env } from "./env";
import { peekHandler, resetHandler } from "./http/admin-route";
import { checkHandler } from "./http/check-route";
import { problem } from "./http/problem";
import { proxyHandler } from "./http/proxy";

const app = new Hono<{ Bindings: Env }>();

// The worker's own routes: /check and below is reserved (one prefix, so the proxy shadows as
// little of the origin as possible); everything else goes through the proxy.
app.post("/check", checkHandler);
app.post("/check/peek", peekHandler);
app.post("/check/reset", resetHandler);
app.all("/check/*", (c) =>
  problem(
    c,
    405,
    {
      title: "Method Not Allowed",
      detail: `${c.req.method} ${c.req.path}: the limiter answers POST /check, /check/peek, /check/reset`,
    },
    { Allow: "POST" },
  ),
);
app.all("*", proxyHandler);

// The limiter never throws on a store failure; this only catches our own bugs, as problem+json.
app.onError((error, c) => {
  console.error(JSON.stringify({ event: "unhandled-error", error: String(error) }));
  return problem(c, 500, { title: "Internal Server Error" });
});

export type { Env };
export default app;
