/**
 * The limiter a test changes plans through (`overrides`, `blocks`, `networks`, `plans`): one per
 * store client and prefix, apart from the limiters that decide (their caches stay their own).
 */
import { createLimiter } from "../../../src/limiter/create-limiter";
import type { Limiter } from "../../../src/limiter/limiter-api";
import type { ScriptClient } from "../../../src/store/script-runner";

const admins = new WeakMap<ScriptClient, Map<string, Limiter>>();

export function plansAdmin(store: ScriptClient, prefix: string): Limiter {
  let byPrefix = admins.get(store);
  if (!byPrefix) {
    byPrefix = new Map();
    admins.set(store, byPrefix);
  }
  let limiter = byPrefix.get(prefix);
  if (!limiter) {
    // Never decides: no denial cache, no leases to keep.
    limiter = createLimiter({ store, prefix, denialCache: false, leases: false });
    byPrefix.set(prefix, limiter);
  }
  return limiter;
}
