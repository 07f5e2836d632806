import { Redis } from "@upstash/redis/cloudflare";

export interface StoreClientOptions {
  /** Upstash REST URL (or the local bridge's). */
  url: string;
  token: string;
  /** Per-request timeout; the HTTP request is aborted, so a late answer cannot consume quota. */
  timeoutMs: number;
}

/**
 * The Upstash client, configured on purpose for a decision on the request path:
 * - `retry: { retries: 0 }`: one attempt. The default retries a network error 5 times over ~4.3 s
 *   (and `retry: false` still makes 2 attempts); a limiter must answer within its timeout instead.
 * - `signal` as a *function*: a fresh `AbortSignal.timeout` per request. A static signal is
 *   swallowed by the client (it fakes a 200 with the abort reason) and stays aborted forever.
 *   The abort closes the connection, so a store that answers late never sees the request
 *   (test/worker/failure.test.ts proves it with a server that delays, then forwards). The
 *   limiter's own deadline (same timeoutMs) bounds the decision as a whole, EVALSHA → EVAL too.
 * - no telemetry headers; results left as Redis returns them (our scripts return integers).
 */
export function createStoreClient(options: StoreClientOptions): Redis {
  return new Redis({
    url: options.url,
    token: options.token,
    retry: { retries: 0 },
    signal: () => AbortSignal.timeout(options.timeoutMs),
    enableTelemetry: false,
    automaticDeserialization: false,
  });
}
