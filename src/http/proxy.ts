import type { Context } from "hono";
import type { Env } from "../env";
import { decideRules, requestIdFrom } from "../rules/decide";
import { applyingRules } from "../rules/match";
import { refundOnServerError } from "../rules/refund-on-error";
import { getRuntime } from "../runtime";
import { outcomeHeaders, refusal, withRateLimitHeaders } from "./limited-response";
import { misconfigured, problem } from "./problem";

/**
 * The worker in front of an origin: decide every rule that matches, then either answer 429
 * (the origin never sees the request) or forward the request untouched and hand back the
 * origin's response untouched but for the rate-limit headers. Bodies are streams both ways:
 * nothing is buffered, and the client gets the first byte as soon as the origin sends it.
 * Requests no rule matches are forwarded without a store call and without headers.
 */
export async function proxyHandler(c: Context<{ Bindings: Env }>): Promise<Response> {
  const runtime = getRuntime(c.env);
  if (!runtime.ok) {
    // Which requests are limited is unknown without a valid config: refuse them all rather
    // than run unprotected.
    return misconfigured(c, runtime);
  }
  const request = c.req.raw;
  const url = new URL(request.url);
  const rules = applyingRules(runtime.rules, request.method, url.pathname);
  if (rules.length === 0) return forward(c, request, url);

  const requestId = requestIdFrom(request.headers, runtime.config.requestIdHeaders);
  const outcome = await decideRules(rules, request.headers, {
    limiter: runtime.limiter,
    clientIp: runtime.config.clientIp,
    ...(requestId !== undefined ? { requestId } : {}),
    // One JSON line per shadow denial: what an operator reads before enforcing the rule.
    onShadowDeny: (event) => console.log(JSON.stringify(event)),
  });
  if (!outcome.allowed) {
    // The request body is never read: cancel it so the client's upload stops.
    await request.body?.cancel().catch(() => {});
    return refusal(c, outcome, runtime.config.legacyHeaders);
  }
  const response = await forward(c, request, url);
  // The origin failed (or never answered): rules with `refundOn: "5xx"` give the request back.
  // Awaited, so the next request of this client already sees it (bounded by the store timeout).
  await refundOnServerError(outcome, rules, response.status, runtime.limiter, (event) =>
    console.error(JSON.stringify(event)),
  );
  return withRateLimitHeaders(response, outcomeHeaders(outcome, runtime.config.legacyHeaders));
}

/**
 * `fetch(request)` reaches the origin behind the worker's route in production; locally (and in
 * tests) ORIGIN_URL stands in for it: same path and query, same method, headers and body.
 * `redirect: "manual"` so a 3xx reaches the client as the origin sent it.
 */
async function forward(
  c: Context<{ Bindings: Env }>,
  request: Request,
  incoming: URL,
): Promise<Response> {
  const origin = c.env.ORIGIN_URL;
  let target: Request;
  if (origin) {
    const url = new URL(origin);
    url.pathname = joinPaths(url.pathname, incoming.pathname);
    url.search = incoming.search;
    target = new Request(url, request);
  } else if (isLoopback(incoming.hostname)) {
    // `wrangler dev` without ORIGIN_URL: fetch(request) would call this worker again.
    return problem(c, 502, {
      title: "No origin",
      detail: "set ORIGIN_URL to the origin this worker fronts (npm start reads it)",
    });
  } else {
    target = request;
  }
  try {
    return await fetch(target, { redirect: "manual" });
  } catch (error) {
    console.error(JSON.stringify({ event: "origin-error", error: String(error) }));
    return problem(c, 502, { title: "Bad Gateway", detail: "the origin did not answer" });
  }
}

function joinPaths(base: string, path: string): string {
  return base === "/" || base === "" ? path : `${base.replace(/\/$/, "")}${path}`;
}

function isLoopback(hostname: string): boolean {
  return (
    hostname === "localhost" ||
    hostname === "[::1]" ||
    hostname.startsWith("127.") ||
    hostname.endsWith(".localhost")
  );
}
