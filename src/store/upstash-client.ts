/**
 * The Upstash REST client configured for a decision on the request path (one attempt, a
 * per-request abort, no telemetry), plus clients bounded by the time a decision has left.
 */
import { Redis } from "@upstash/redis/cloudflare";

export interface StoreClientOptions {
  /** Upstash REST URL (or the local bridge's). */
  url: string;
  token: string;
  /**
   * Per-request timeout, required (no default here: give it the limiter's `timeoutMs`, 500 ms
   * unless configured). The HTTP request is aborted then. A request aborted before it reaches
   * Redis is never run; one Redis already ran still counted, even if its answer came too late.
   */
  timeoutMs: number;
}

/** The Upstash client plus `withTimeout` (see ScriptClient). */
export type StoreClient = Redis & { withTimeout(timeoutMs: number): Redis };

/**
 * The Upstash client, configured on purpose for a decision on the request path:
 * - `retry: { retries: 0 }`: one attempt. The default retries a network error 5 times over ~4.3 s
 *   (and `retry: false` still makes 2 attempts); a limiter must answer within its timeout instead.
 * - `signal` as a *function*: a fresh `AbortSignal.timeout` per request. (Never share one between
 *   requests: workerd ties a signal to the request that made it, and another request's fetch
 *   with it fails — test/worker/http/check-route.test.ts guards this.) A static signal is
 *   swallowed by the client (it fakes a 200 with the abort reason) and stays aborted forever.
 *   The abort closes the connection: a request held up *before* Redis (a slow network, a
 *   queue in front of it) is never run (test/worker/limiter/failure.test.ts proves it with a server that
 *   delays, then forwards). A script Redis already ran has counted, however late its answer.
 *   withinDeadline (script-runner.ts, same timeoutMs) bounds the decision as a whole; a
 *   NOSCRIPT → EVAL gets only the time left, through `withTimeout`.
 * - no telemetry headers; results left as Redis returns them (our scripts return integers).
 */
export function createStoreClient(options: StoreClientOptions): StoreClient {
  const make = (timeoutMs: number) =>
    new Redis({
      url: options.url,
      token: options.token,
      retry: { retries: 0 },
      signal: () => AbortSignal.timeout(timeoutMs),
      enableTelemetry: false,
      automaticDeserialization: false,
    });
  // Shared per 10 ms step (rounded down: never later than asked), not one per call: after a
  // SCRIPT FLUSH every concurrent decision gets NOSCRIPT at once, and their EVALs must still
  // share a client to share its auto-pipeline (one HTTP request, not one each).
  const bounded = new Map<number, Redis>();
  const withTimeout = (timeoutMs: number): Redis => {
    const step = Math.max(1, Math.floor(timeoutMs / TIMEOUT_STEP_MS) * TIMEOUT_STEP_MS);
    let client = bounded.get(step);
    if (!client) {
      if (bounded.size >= MAX_BOUNDED_CLIENTS) bounded.clear();
      client = make(step);
      bounded.set(step, client);
    }
    return client;
  };
  return Object.assign(make(options.timeoutMs), { withTimeout });
}

const TIMEOUT_STEP_MS = 10;

const MAX_BOUNDED_CLIENTS = 64;
