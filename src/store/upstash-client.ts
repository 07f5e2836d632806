/**
 * The Upstash REST client configured for a decision on the request path (one attempt, a
 * per-request abort, no telemetry), plus clients bounded by a decision's own
 * abort signal or by the time it has left.
 */
import { Redis, type RedisConfigCloudflare } from "@upstash/redis/cloudflare";
import { DEFAULT_STORE_TIMEOUT_MS } from "./with-deadline";

export interface StoreClientOptions {
  /** Upstash REST URL (or the local bridge's). */
  url: string;
  token: string;
  /**
   * Per-request timeout (ms): give it the limiter's `timeoutMs` if you change that. The HTTP
   * request is aborted then. A request aborted before it reaches Redis is never run; one Redis
   * already ran still counted, even if its answer came too late.
   * @default 500 (the limiter's default timeoutMs)
   */
  timeoutMs?: number;
  /**
   * @upstash/redis's auto-pipeline: the commands of one tick share one HTTP request. Off by
   * default, as a Worker needs it: workerd enters the isolate once per incoming request and
   * drains the microtask queue in between, so two requests' decisions never share a tick and the
   * pipeline only adds work (a Pipeline object, a Proxy lookup, the batching promises) to every
   * decision. Off, the client also calls `signal` synchronously inside `evalsha`/`eval`, which
   * `withSignal` needs: only a client without it has `withSignal` (one timer per decision). Turn
   * it on where many decisions start in one tick — a Node server, a batch: 1000 concurrent
   * `limit()` calls after a SCRIPT FLUSH then share a few requests, not 2000.
   * @default false
   */
  autoPipeline?: boolean;
}

/** What `withSignal` hands out: the two script calls, aborted by the signal given. */
type SignalledScripts = Pick<Redis, "evalsha" | "eval">;

/**
 * The Upstash client plus `withTimeout`, and `withSignal` when its auto-pipeline is off (see
 * ScriptClient).
 */
export type StoreClient = Redis & {
  /** The REST URL it calls (never the token): the limiter's log names the store by its host. */
  readonly storeUrl: string;
  withTimeout(timeoutMs: number): Redis;
  withSignal?(signal: AbortSignal): SignalledScripts;
};

/**
 * The Upstash client, configured on purpose for a decision on the request path:
 * - `retry: { retries: 0 }`: one attempt. The default retries a network error 5 times over ~4.3 s
 *   (and `retry: false` still makes 2 attempts); a limiter must answer within its timeout instead.
 * - `signal` as a *function*, called per request: the decision's own signal when the call came
 *   through `withSignal` (withinDeadline passes its deadline's, aborted at the deadline: one
 *   timer per decision, and a NOSCRIPT → EVAL gets only the time left), else a fresh
 *   `AbortSignal.timeout` (and withinDeadline bounds a second call through `withTimeout`).
 *   (Never share one between requests: workerd ties a signal to the request that made it, and
 *   another request's fetch with it fails — test/worker/check-route/check-route.test.ts guards this.)
 *   A static signal is swallowed by the client (it fakes a 200 with the abort reason) and stays
 *   aborted forever. The abort closes the connection: a request held up *before* Redis (a slow
 *   network, a queue in front of it) is never run (test/src/limiter/failure.test.ts proves
 *   it with a server that delays, then forwards). A script Redis already ran has counted, however late its answer.
 *   withinDeadline (script-runner.ts, same timeoutMs) bounds the decision as a whole.
 * - the auto-pipeline as `autoPipeline` says (on unless turned off; see there).
 * - no telemetry headers; results left as Redis returns them (our scripts return integers).
 * - the clients that only run decision scripts (`withSignal`'s, `withTimeout`'s) also ask for
 *   no base64 (`responseEncoding: false`: a script's reply is integers, nothing to encode) and
 *   no read-your-writes token (`readYourWrites: false`: a script runs on the primary, atomically,
 *   and reads only what it writes; the token is for a later plain read from a replica). With
 *   them, every decision's request carried two more headers and read the answer's headers twice
 *   (workerd builds a Headers object each time): workerd CPU per decision 0.92× without them
 *   (`node bench/ab-cpu.mjs --ref=before=c0be821 --ref=after=54ec5b7 --rate=400`).
 *   The client itself (analytics, admin reads) keeps both defaults.
 *
 * @example
 * ```ts
 * const store = createStoreClient({
 *   url: env.UPSTASH_REDIS_REST_URL,
 *   token: env.UPSTASH_REDIS_REST_TOKEN,
 * });
 * const limiter = createLimiter({ store });
 * ```
 */
export function createStoreClient(options: StoreClientOptions): StoreClient {
  // The signal the next request takes, set only for the duration of one synchronous
  // `evalsha`/`eval` call (withSignal below): the client calls `signal` synchronously before its
  // first await, so no other call can see it; it is cleared when taken and after the call.
  let nextSignal: AbortSignal | undefined;
  const pipelined = options.autoPipeline ?? false;
  const defaultTimeoutMs = options.timeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
  const make = (timeoutMs: number, scriptsOnly: boolean) =>
    new Redis({
      url: options.url,
      token: options.token,
      retry: { retries: 0 },
      signal: () => {
        const given = nextSignal;
        nextSignal = undefined;
        return given ?? AbortSignal.timeout(timeoutMs);
      },
      enableTelemetry: false,
      enableAutoPipelining: pipelined,
      automaticDeserialization: false,
      ...(scriptsOnly ? SCRIPTS_ONLY : {}),
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
      client = make(step, true);
      bounded.set(step, client);
    }
    return client;
  };
  const main = make(defaultTimeoutMs, false);
  // A pipelined client calls `signal` a tick later, when the batch goes: it would never see
  // the signal set for it, so only the unpipelined client offers withSignal.
  if (pipelined) return Object.assign(main, { withTimeout, storeUrl: options.url });
  // withSignal's own client: the same signal handling, the scripts-only options.
  const scripts = make(defaultTimeoutMs, true);
  const withSignal = (signal: AbortSignal): SignalledScripts => ({
    evalsha: (sha, keys, args) => {
      nextSignal = signal;
      try {
        return scripts.evalsha(sha, keys, args);
      } finally {
        nextSignal = undefined;
      }
    },
    eval: (script, keys, args) => {
      nextSignal = signal;
      try {
        return scripts.eval(script, keys, args);
      } finally {
        nextSignal = undefined;
      }
    },
  });
  return Object.assign(main, { withTimeout, withSignal, storeUrl: options.url });
}

const TIMEOUT_STEP_MS = 10;

/**
 * The options of a client that only runs our scripts (see createStoreClient). The Cloudflare
 * entry's config type omits `responseEncoding`, but its constructor hands it to the HTTP client
 * (@upstash/redis ≥ 1.28); test/src/store/upstash-client.test.ts checks the request it sends.
 */
const SCRIPTS_ONLY: Partial<RedisConfigCloudflare> & { responseEncoding: false } = {
  responseEncoding: false,
  readYourWrites: false,
};

const MAX_BOUNDED_CLIENTS = 64;
