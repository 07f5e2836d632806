/**
 * The worker's proxy: an incoming request translated to the limit pipeline (limit-pipeline.ts),
 * the origin fetched when it passes.
 */

import type { RefundFailedEvent, ShadowDenyEvent } from "edge-limiter";
import { problemResponse } from "edge-limiter/server";
import type { Env } from "./env";
import { misconfigured } from "./problems";
import { getRuntime } from "./runtime";

/**
 * The worker in front of an origin: decide every rule that matches, then either answer 429
 * (the origin never sees the request) or forward the request untouched and hand back the
 * origin's response untouched but for the rate-limit headers. Bodies are streams both ways:
 * nothing is buffered, and the client gets the first byte as soon as the origin sends it.
 * Requests no rule matches are forwarded without a store call and without headers. worker.ts
 * sends every path outside /check here, without Hono (its dispatch and context were CPU per
 * request for nothing).
 */
export async function proxyResponse(
  incoming: Request,
  env: Env,
  waitUntil: ((promise: Promise<unknown>) => void) | undefined,
): Promise<Response> {
  const runtime = getRuntime(env);
  if (!runtime.ok) {
    // Which requests are limited is unknown without a valid config: refuse them all rather
    // than run unprotected.
    return misconfigured(runtime, "public");
  }
  const url = new URL(incoming.url);
  // Known before any rule is decided: a request with nowhere to go is answered without
  // consuming anything.
  const target = originUrl(env.ORIGIN_URL, url);
  if (!target) return noOrigin();
  return runtime.rules.guard(incoming, {
    limiter: runtime.limiter,
    url,
    waitUntil,
    networkBlocks: runtime.networkBlocks,
    onShadowDeny: logShadowDeny,
    onRefundFailed: logRefundFailed,
    forward: () => fetchOrigin(incoming, target),
    onRefused: async (outcome) => {
      // A network block never reached the limiter (whose hook counts the rest): counted here,
      // under the blocked network as the key.
      const block = outcome.blocked;
      if (block && block.by !== "key" && runtime.analytics) {
        const key = `${block.by} ${block.value ?? ""}`;
        runtime.analytics.record(
          outcome.decisions.map((d) => ({
            policy: d.policy,
            key,
            limit: d.limit,
            windowMs: d.windowMs,
          })),
          { allowed: false, decisions: outcome.decisions, replayed: false },
        );
      }
      // The request body is never read: cancel it so the client's upload stops.
      await incoming.body?.cancel().catch(() => {});
    },
  });
}

// The worker's log lines (the library itself writes nothing): one JSON line per shadow denial,
// what an operator reads before enforcing the rule; one per refund the store did not make.
const logShadowDeny = (event: ShadowDenyEvent) => console.log(JSON.stringify(event));
const logRefundFailed = (event: RefundFailedEvent) => console.error(JSON.stringify(event));

/**
 * Where the request goes. `fetch(request)` reaches the origin behind the worker's route in
 * production: the request's own URL. Locally (and in tests) ORIGIN_URL stands in for it, keeping
 * the path (under ORIGIN_URL's own) and the query. Undefined under `wrangler dev` without
 * ORIGIN_URL: fetch(request) would call this worker again.
 */
function originUrl(origin: string | undefined, url: URL): string | URL | undefined {
  if (origin) {
    const { head, path } = originBase(origin);
    return `${head}${joinPaths(path, url.pathname)}${url.search}`;
  }
  return isLoopback(url.hostname) ? undefined : url;
}

/**
 * ORIGIN_URL read once per isolate, not per request (one entry: a changed binding replaces it):
 * its href up to the path (scheme, credentials, host, port) and its path. Read-only once built.
 */
let origin: { url: string; head: string; path: string } | undefined;

function originBase(url: string): { head: string; path: string } {
  if (origin?.url !== url) {
    const parsed = new URL(url);
    parsed.search = "";
    parsed.hash = "";
    const path = parsed.pathname;
    origin = { url, head: parsed.href.slice(0, parsed.href.length - path.length), path };
  }
  return origin;
}

/**
 * The origin's answer to the request, sent to `target`: same method, headers and body, but for
 * `Expect` (forwardedRequest). `redirect: "manual"` so a 3xx reaches the client as the origin
 * sent it. Resolves to the origin's final answer, never an interim 1xx (interimAnswer).
 */
async function fetchOrigin(incoming: Request, target: string | URL): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(forwardedRequest(target, incoming), { redirect: "manual" });
  } catch (error) {
    console.error(JSON.stringify({ event: "origin-error", error: String(error) }));
    return problemResponse(502, { title: "Bad Gateway", detail: "the origin did not answer" });
  }
  return isInterim(response.status) ? interimAnswer(response) : response;
}

/**
 * The request the origin gets: the incoming one (its body the same stream, unread) at `url`,
 * without `Expect`. A client's `Expect: 100-continue` (curl sends it for any body over 1 MiB)
 * asks the next hop to say 100 Continue before the body is sent; that handshake is the client's
 * with the worker, which already holds the body stream, so nothing is gained by repeating it
 * with the origin (RFC 9110 §10.1.1 lets a proxy answer the expectation itself). And it breaks
 * the request: a Node origin answers 100 Continue, and workerd's fetch() resolves with that
 * interim 100 as if it were the final answer (see interimAnswer) while the body is still being
 * sent. Only `Expect` is dropped; every other header goes on as the client sent it.
 */
function forwardedRequest(url: string | URL, incoming: Request): Request {
  const target = new Request(url, incoming);
  target.headers.delete("Expect");
  return target;
}

/** 1xx but 101 (Switching Protocols ends the HTTP exchange: it is the final answer). */
function isInterim(status: number): boolean {
  return status >= 100 && status < 200 && status !== 101;
}

/**
 * workerd's fetch() takes an interim 1xx (102 Processing, 103 Early Hints, a 100 Continue the
 * request did not ask for) for the final answer: the response it resolves with has the 1xx
 * status, and its body is the raw rest of the connection, the real answer's status line
 * included, that never ends on a kept-alive connection. Passing it on would hang the client (or
 * throw: a Response cannot be built with a 1xx status), and parsing HTTP out of that body is
 * not this worker's job: answer 502 naming the interim status, and let the connection go.
 */
async function interimAnswer(response: Response): Promise<Response> {
  await response.body?.cancel().catch(() => {});
  console.error(JSON.stringify({ event: "origin-interim", status: response.status }));
  return problemResponse(502, {
    title: "Bad Gateway",
    detail: `the origin sent an interim ${response.status} before its answer, which the runtime's fetch() cannot pass on`,
  });
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

/**
 * `wrangler dev` without ORIGIN_URL: there is nothing to forward to. Answered before any rule is
 * decided, so it costs the client nothing.
 */
function noOrigin(): Response {
  return problemResponse(502, {
    title: "No origin",
    detail: "set ORIGIN_URL to the origin this worker fronts (npm start reads it)",
  });
}
