/**
 * What a limiter writes to the console by default when its store stops deciding: one JSON line
 * per breaker change and per kind of store error, each naming the store, the cause and what
 * decides meanwhile. Without it an app whose token is wrong answers from the local fallback and
 * says nothing: its operator believes Redis enforces the limit while each process counts alone.
 * The worker logs through the same lines (worker/runtime.ts), so there is one format.
 */
import { StoreTimeoutError } from "../store/with-deadline";
import type { BreakerEvent, BreakerState } from "./circuit-breaker";
import { DEFAULT_BREAKER } from "./defaults";
import { PlacementFenceError } from "./placement-fence-error";
import type { FailMode } from "./types";

/** Why the store did not answer, as far as its error tells. */
export type StoreErrorCause = "unauthorized" | "timeout" | "refused" | "error";

/**
 * What decides while the store does not: `"fallback"` (each isolate counts alone, at the
 * fallback's share of the limit), `"closed"` (every request is denied) or `"open"` (every
 * request is admitted, nothing counted).
 */
export type Meanwhile = "fallback" | "closed" | "open";

/** A store error as the default log writes it. */
export interface StoreErrorLine {
  event: "rate-limit-store-error";
  store: string;
  cause: StoreErrorCause;
  meanwhile: Meanwhile;
  error: string;
  detail: string;
}

/** A breaker change as the default log writes it: the event, with the store and the cause. */
export type BreakerLine = BreakerEvent & {
  store: string;
  cause?: StoreErrorCause;
  meanwhile: Meanwhile;
  detail: string;
};

export interface DegradationLogOptions {
  /** The store the lines name: a name, or a client (named by its URL's host). @default "store" */
  store?: string | object;
  /** The limiter's `failMode`. @default "open" */
  failMode?: FailMode;
  /** Whether the limiter's local fallback is on (`fallback` not `false`). @default true */
  fallback?: boolean;
  /**
   * The fewest ms between two lines of one kind (the breaker's first cool-down: a dead store
   * is then one line a cool-down, however many requests meet it).
   * @default 1000
   */
  everyMs?: number;
  /** The clock (ms). @default Date.now */
  now?: () => number;
  /** Where a line goes. @default console.warn */
  write?: (line: string) => void;
}

/** The two hooks a limiter calls: the same as `onStoreError` and `onBreakerChange`. */
export interface DegradationLog {
  onStoreError(error: unknown): void;
  onBreakerChange(event: BreakerEvent): void;
}

/** The error's cause, read from its type and message (the Upstash client's, fetch's, ours). */
function storeErrorCause(error: unknown): StoreErrorCause {
  if (error instanceof StoreTimeoutError) return "timeout";
  const text = `${(error as { name?: unknown })?.name ?? ""} ${String(error)} ${String(
    (error as { cause?: unknown })?.cause ?? "",
  )}`;
  if (/unauthori[sz]ed|WRONGPASS|invalid or missing auth token|\b401\b/i.test(text)) {
    return "unauthorized";
  }
  if (/timeout|timed out|AbortError/i.test(text)) return "timeout";
  if (/ECONNREFUSED|ECONNRESET|ENOTFOUND|refused|fetch failed|network connection/i.test(text)) {
    return "refused";
  }
  return "error";
}

/**
 * A store error said for a person: its cause and a sentence naming what to check (never the
 * error's own text, which may quote a request). The default log and the worker's 503s say it.
 *
 * @example
 * ```ts
 * const { cause, detail } = describeStoreError(error);
 * return problemResponse(503, { title: "Store unavailable", detail, cause });
 * ```
 */
export function describeStoreError(error: unknown): { cause: StoreErrorCause; detail: string } {
  const cause = storeErrorCause(error);
  return { cause, detail: CAUSE_TEXT[cause] };
}

const CAUSE_TEXT: Record<StoreErrorCause, string> = {
  unauthorized: "unauthorized: the store refused the token (check UPSTASH_REDIS_REST_TOKEN)",
  timeout: "the store did not answer within timeoutMs",
  refused: "the store could not be reached (check UPSTASH_REDIS_REST_URL)",
  error: "the store answered with an error",
};

const MEANWHILE_TEXT: Record<Meanwhile, string> = {
  fallback: "meanwhile the local fallback decides: each process counts alone",
  closed: "meanwhile every request is denied (failMode closed)",
  open: "meanwhile every request is admitted, uncounted (fallback off)",
};

const FENCE_TEXT =
  "a shard refused this isolate's placement of the key (a stale deployment: the error names the setting to fix); meanwhile every request it places there is denied, nothing counted";

/**
 * The default log (createLimiter builds one per store unless `log: false`). Lines of one kind
 * (a cause, a breaker change with its cause) are written at most once per `everyMs`; a store
 * error is not written while the breaker is open or probing: the breaker's line carries it.
 */
export function createDegradationLog(options: DegradationLogOptions = {}): DegradationLog {
  const store = typeof options.store === "string" ? options.store : storeLabel(options.store);
  const meanwhile: Meanwhile =
    options.failMode === "closed" ? "closed" : options.fallback === false ? "open" : "fallback";
  const everyMs = options.everyMs ?? DEFAULT_BREAKER.cooldownMs;
  const now = options.now ?? Date.now;
  const write = options.write ?? ((line: string) => console.warn(line));
  // One entry per kind: a handful of causes and breaker states, so bounded.
  const lastWritten = new Map<string, number>();
  let breaker: BreakerState = "closed";

  const due = (kind: string): boolean => {
    const at = now();
    const last = lastWritten.get(kind);
    if (last !== undefined && at - last < everyMs) return false;
    lastWritten.set(kind, at);
    return true;
  };

  return {
    onStoreError(error) {
      // A shard refusing this isolate's placement answered: the request is denied whatever the
      // failure policy (placement-refusal.ts), so the line says "closed", and it is written
      // even while the breaker is open (a refusal is told once per kind, never again).
      if (error instanceof PlacementFenceError) {
        if (!due(`fence:${error.kind}`)) return;
        const line: StoreErrorLine = {
          event: "rate-limit-store-error",
          store,
          cause: "error",
          meanwhile: "closed",
          error: String(error),
          detail: FENCE_TEXT,
        };
        write(JSON.stringify(line));
        return;
      }
      if (breaker !== "closed") return;
      const cause = storeErrorCause(error);
      if (!due(`error:${cause}`)) return;
      const line: StoreErrorLine = {
        event: "rate-limit-store-error",
        store,
        cause,
        meanwhile,
        error: String(error),
        detail: `${CAUSE_TEXT[cause]}; ${MEANWHILE_TEXT[meanwhile]}`,
      };
      write(JSON.stringify(line));
    },
    onBreakerChange(event) {
      breaker = event.to;
      // A probe going out says nothing yet: its outcome (open again, or closed) is the line.
      if (event.to === "half-open") return;
      const cause = event.error === undefined ? undefined : storeErrorCause(event.error);
      if (!due(`breaker:${event.to}:${cause ?? ""}`)) return;
      const line: BreakerLine = {
        ...event,
        store,
        ...(cause ? { cause } : {}),
        meanwhile,
        detail:
          event.to === "open"
            ? `${cause ? CAUSE_TEXT[cause] : "the store failed"}; the store is left alone ${
                event.cooldownMs ?? 0
              } ms, ${MEANWHILE_TEXT[meanwhile]}`
            : "the store answers again: it decides again",
      };
      write(JSON.stringify(line));
    },
  };
}

/** A store's name for the log: its URL's host (never the token), else "store". */
function storeLabel(store: unknown): string {
  const url = (store as { storeUrl?: unknown })?.storeUrl;
  if (typeof url !== "string") return "store";
  try {
    return new URL(url).host || "store";
  } catch {
    return "store";
  }
}
