/**
 * The worker's entry: its routes (/check and below, everything else through the proxy) and the
 * last-resort error answer. Each route's handler is in src/http/.
 */
import { Hono } from "hono";
import type { Env } from "./env";
import { peekHandler, resetHandler } from "./http/admin-route";
import { checkHandler, checkResponse } from "./http/check-route";
import { dashboardHandler } from "./http/dashboard-route";
import { problem, problemResponse } from "./http/problem";
import { proxyHandler, proxyResponse } from "./http/proxy";
import { statsHandler } from "./http/stats-route";

const app = new Hono<{ Bindings: Env }>();

// The worker's own routes: /check and below is reserved (one prefix, so the proxy shadows as
// little of the origin as possible); everything else goes through the proxy.
const ROUTES = { "/check": checkHandler, "/check/peek": peekHandler, "/check/reset": resetHandler };
for (const [path, handler] of Object.entries(ROUTES)) app.post(path, handler);
// The analytics, read (docs/analytics.md): GET (and HEAD).
const READ_ROUTES = { "/check/stats": statsHandler, "/check/dashboard": dashboardHandler };
for (const [path, handler] of Object.entries(READ_ROUTES)) app.get(path, handler);
// Anything else under /check: a route we have, asked with another method, is a 405 saying which
// method it takes; a path we do not have is a 404 (with Allow: POST it would read as "POST it").
app.all("/check/*", (c) => {
  const detail = `${c.req.method} ${c.req.path}: the limiter answers POST /check, /check/peek, /check/reset and GET /check/stats, /check/dashboard`;
  if (Object.hasOwn(READ_ROUTES, c.req.path)) {
    return problem(c, 405, { title: "Method Not Allowed", detail }, { Allow: "GET, HEAD" });
  }
  return Object.hasOwn(ROUTES, c.req.path)
    ? problem(c, 405, { title: "Method Not Allowed", detail }, { Allow: "POST" })
    : problem(c, 404, { title: "Not Found", detail });
});
app.all("*", proxyHandler);

// The limiter never throws on a store failure; this only catches our own bugs, as problem+json.
app.onError((error, c) => {
  console.error(JSON.stringify({ event: "unhandled-error", error: String(error) }));
  return problem(c, 500, { title: "Internal Server Error" });
});

// The hot paths skip Hono's dispatch and context: an exact `POST /check` goes to
// checkResponse, any path outside /check to proxyResponse, the same code the routes above call,
// with the same last-resort 500. /check/*, /check asked with another method and any path with a
// %-escape (Hono decodes it before routing) go through the app as before. `app.request()`
// (tests) calls `app.fetch`, so it takes these paths too.
const dispatch = app.fetch;
app.fetch = (request, env, executionCtx) => {
  const route = fastRoute(request.url);
  if (route === "app" || (route === "check" && request.method !== "POST")) {
    return dispatch(request, env, executionCtx);
  }
  const waitUntil = executionCtx
    ? (promise: Promise<unknown>) => executionCtx.waitUntil(promise)
    : undefined;
  const answer =
    route === "check"
      ? checkResponse(request, env as Env, waitUntil)
      : proxyResponse(request, env as Env, waitUntil);
  return answer.catch(unhandled);
};

function unhandled(error: unknown): Response {
  console.error(JSON.stringify({ event: "unhandled-error", error: String(error) }));
  return problemResponse(500, { title: "Internal Server Error" });
}

/**
 * Where a URL goes, read from its raw path as Hono's router reads it: exactly /check (a query
 * may follow), outside /check (the proxy), or the app's to route (/check/…, a %-escape).
 */
function fastRoute(url: string): "check" | "proxy" | "app" {
  const start = url.indexOf("/", url.indexOf(":") + 4);
  let end = url.length;
  for (let i = start; i < url.length; i++) {
    const ch = url.charCodeAt(i);
    if (ch === 37) return "app"; // "%"
    if (ch === 63 || ch === 35) {
      end = i; // "?" or "#"
      break;
    }
  }
  if (!url.startsWith("/check", start)) return "proxy";
  if (end === start + 6) return "check";
  // "/check/…" is the app's; "/checks" and the like are the proxy's, as Hono routes them.
  return url.charCodeAt(start + 6) === 47 ? "app" : "proxy";
}

export type { Env };
export default app;
