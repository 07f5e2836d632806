/**
 * The worker's entry: its routes (/check and below, everything else through the proxy) and the
 * last-resort error answer. Each route's handler is in src/http/.
 */

import { problemResponse } from "edge-limiter/server";
import { type Context, Hono } from "hono";
import { peekHandler, resetHandler } from "./admin-route";
import { checkResponse } from "./check-route";
import { dashboardHandler } from "./dashboard-route";
import type { Env } from "./env";
import { blockHandler, overrideHandler, plansListHandler, unblockHandler } from "./plans-route";
import { proxyResponse } from "./proxy";
import { releaseHandler } from "./release-route";
import { settleHandler } from "./settle-route";
import { statsHandler } from "./stats-route";

type Handler = (c: Context<{ Bindings: Env }>) => Promise<Response> | Response;

/**
 * Every path the worker keeps for itself, the methods it answers there and, but for /check, its
 * handler: one prefix, /check, so the proxy shadows as little of the origin as possible. POST
 * /check itself, the hot path, is answered by checkResponse without Hono (its dispatch, context
 * and header merging were a tenth of a decision's CPU); the admin routes go through Hono.
 */
const ROUTES: Record<string, { allow: "POST" | "GET, HEAD"; handler?: Handler }> = {
  "/check": { allow: "POST" },
  "/check/peek": { allow: "POST", handler: peekHandler },
  "/check/reset": { allow: "POST", handler: resetHandler },
  "/check/release": { allow: "POST", handler: releaseHandler },
  "/check/settle": { allow: "POST", handler: settleHandler },
  "/check/stats": { allow: "GET, HEAD", handler: statsHandler },
  "/check/dashboard": { allow: "GET, HEAD", handler: dashboardHandler },
  "/check/override": { allow: "POST", handler: overrideHandler },
  "/check/block": { allow: "POST", handler: blockHandler },
  "/check/unblock": { allow: "POST", handler: unblockHandler },
  "/check/plans": { allow: "GET, HEAD", handler: plansListHandler },
};

const admin = new Hono<{ Bindings: Env }>();
for (const [path, { allow, handler }] of Object.entries(ROUTES)) {
  if (!handler) continue;
  // GET also answers HEAD in Hono.
  if (allow === "POST") admin.post(path, handler);
  else admin.get(path, handler);
}
// Anything else under /check: a route we have, asked with another method, is a 405 saying which
// method it takes; a path we do not have is a 404 (with Allow: POST it would read as "POST it").
admin.all("*", (c) => {
  const detail = `${c.req.method} ${c.req.path}: the limiter answers POST /check, /check/peek, /check/reset, /check/release, /check/settle, /check/override, /check/block, /check/unblock and GET /check/stats, /check/dashboard, /check/plans`;
  const route = Object.hasOwn(ROUTES, c.req.path) ? ROUTES[c.req.path] : undefined;
  return route
    ? problemResponse(405, { title: "Method Not Allowed", detail }, { Allow: route.allow })
    : problemResponse(404, { title: "Not Found", detail });
});
admin.onError((error) => unhandled(error));

export default {
  fetch(request: Request, env: Env, ctx?: ExecutionContext): Promise<Response> {
    const path = routedPath(request.url);
    const waitUntil = ctx ? (promise: Promise<unknown>) => ctx.waitUntil(promise) : undefined;
    let answer: Promise<Response>;
    if (path === "/check" && request.method === "POST") {
      answer = checkResponse(request, env, waitUntil);
    } else if (path === "/check" || path.startsWith("/check/")) {
      answer = Promise.resolve(admin.fetch(request, env, ctx));
    } else {
      answer = proxyResponse(request, env, waitUntil);
    }
    return answer.catch(unhandled);
  },
} satisfies ExportedHandler<Env>;

/** The limiter never throws on a store failure: this only catches our own bugs, as problem+json. */
function unhandled(error: unknown): Response {
  console.error(JSON.stringify({ event: "unhandled-error", error: String(error) }));
  return problemResponse(500, { title: "Internal Server Error" });
}

/**
 * The path a URL is routed by, read as Hono's router reads it: its raw path without the query,
 * %-escapes decoded as Hono decodes them (decodeURI: an escaped "/" stays escaped; past a
 * malformed escape, each run of well-formed ones). "/%63heck" is /check, as Hono routes it.
 */
function routedPath(url: string): string {
  const start = url.indexOf("/", url.indexOf(":") + 3);
  if (start < 0) return "/";
  let end = url.length;
  let escaped = false;
  for (let i = start; i < url.length; i++) {
    const ch = url.charCodeAt(i);
    if (ch === 37) escaped = true; // "%"
    if (ch === 63 || ch === 35) {
      end = i; // "?" or "#"
      break;
    }
  }
  const raw = url.slice(start, end);
  if (!escaped) return raw;
  try {
    return decodeURI(raw);
  } catch {
    return raw.replace(/(?:%[0-9A-Fa-f]{2})+/g, (run) => {
      try {
        return decodeURI(run);
      } catch {
        return run;
      }
    });
  }
}

export type { Env };
