/**
 * POST /check/release `{"rule", "key", "slot"}`: a concurrency slot a /check answer handed out,
 * given back when the caller's request ends (docs/check-api.md). The decision token, as /check:
 * whoever may take a slot may give it back. 200 released; 404 not held (nothing changes).
 */

import { problemResponse } from "edge-limiter/server";
import type { Context } from "hono";
import { authorizedJson } from "./authorized-check";
import type { Env } from "./env";

export async function releaseHandler(c: Context<{ Bindings: Env }>): Promise<Response> {
  const read = await authorizedJson(c.req.raw, c.env, "decision");
  if (!read.ok) return read.response;
  const { runtime, json } = read;
  const release = await runtime.rules.parseRelease(json);
  if (!release.ok) {
    return problemResponse(400, {
      title: "Bad Request",
      detail: `${release.field} ${release.detail}`,
      field: release.field,
    });
  }
  const waitUntil = waitUntilOf(c);
  return runtime.rules.answerRelease(runtime.limiter, release.value, waitUntil);
}

/** The execution context's waitUntil, when the runtime gives one (tests may not). */
function waitUntilOf(c: Context<{ Bindings: Env }>) {
  try {
    const ctx = c.executionCtx;
    return (promise: Promise<unknown>) => ctx.waitUntil(promise);
  } catch {
    return undefined;
  }
}
