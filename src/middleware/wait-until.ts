/**
 * The request's `waitUntil`, when the runtime gives one: background store calls (a lease, the
 * give-back of a lease's unspent units) then outlive the response (docs/leases.md).
 */
import type { Context } from "hono";

/** `c.executionCtx.waitUntil`, bound; undefined where Hono has no execution context (tests, Node). */
export function waitUntilOf(c: Context): ((promise: Promise<unknown>) => void) | undefined {
  try {
    // Hono's getter throws when the app was called without an execution context.
    const ctx = c.executionCtx;
    return (promise) => ctx.waitUntil(promise);
  } catch {
    return undefined;
  }
}
