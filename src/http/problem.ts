/** RFC 9457 problem+json answers, the one error shape of every surface. */
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";

export interface Problem {
  title: string;
  detail?: string;
  /** The request field the problem is about (our extension member). */
  field?: string;
  [extension: string]: unknown;
}

/**
 * A problem+json answer (RFC 9457): `type` about:blank, the status, and the body's fields.
 *
 * @example
 * ```ts
 * return problemResponse(400, { title: "Bad request", detail: "must be a string", field: "key" });
 * ```
 */
export function problemResponse(
  status: ContentfulStatusCode,
  body: Problem,
  headers?: Record<string, string>,
): Response {
  return new Response(JSON.stringify({ type: "about:blank", status, ...body }), {
    status,
    headers: { "Content-Type": "application/problem+json", ...headers },
  });
}

/**
 * 503 for a configuration that does not validate: which requests are limited is unknown, so
 * every one is refused rather than let through unprotected. This is the public answer (the
 * proxy, the middleware): it names the setting, never why, since the reason may quote a secret
 * (the Upstash client's error quotes the store URL). The reason goes to the operator's log.
 */
export function misconfigured(_c: Context | undefined, issue: { field: string }): Response {
  return problemResponse(503, {
    title: "Limiter misconfigured",
    detail: `${issue.field} is invalid: the operator's log says why`,
    field: issue.field,
  });
}
