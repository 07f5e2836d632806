// Each marked line must be a type error. Were the package's types `any` (or missing), the
// directive itself would be the error: "Unused '@ts-expect-error' directive".
import { createLimiter, type RateLimitResult, rateLimit } from "edge-limiter";
import { problemResponse } from "edge-limiter/server";
import { Hono } from "hono";

const limiter = createLimiter({ store: undefined as never });

// @ts-expect-error a rule's limit is a number
rateLimit({ limiter, rules: { name: "x", limit: "3", window: "1m" } });

// @ts-expect-error no such option
createLimiter({ store: undefined as never, notAnOption: true });

// @ts-expect-error an override's limit is a number
limiter.overrides.set("x", "k", { limit: "3" });

export function allowedOf(result: RateLimitResult): boolean {
  // @ts-expect-error decisions is an array of Decision
  return result.decisions.allowed;
}

// @ts-expect-error a problem has a title
problemResponse(404, { detail: "no title" });

// An app that declares no Variables still reads the middleware's result typed: the package adds
// "rateLimit" to Hono's ContextVariableMap. Without that, `c.get("rateLimit")` is no overload.
export const undeclared = new Hono().get("/", (c) => {
  const result: RateLimitResult = c.get("rateLimit");
  return c.json({ allowed: result.allowed });
});
