/**
 * The store's retry contract, all of it: a script runs as EVALSHA, on NOSCRIPT as EVAL once; a
 * script that reads the Redis clock and meets a store that refuses TIME runs once more on the
 * caller's clock (store-clock.ts clockedCall, at the ARGV slot the script declares:
 * clock-slots.ts); every request of one decision (those, and any retry the caller makes) runs
 * within one deadline (withinDeadline), and a failed call is reported without its script
 * (StoreCommandError). Callers (evaluate, refund, peek, plans, region leases) build KEYS/ARGV and
 * parse replies.
 */
import type { Redis } from "@upstash/redis";
import { digestHex } from "../digest";
import { clockSlotOf } from "./clock-slots";
import { type ClockRun, clockedCall, clockRunOf, type ScriptArg } from "./store-clock";
import { StoreTimeoutError, withDeadline } from "./with-deadline";

/** The narrow slice of the Upstash client the store needs. */
export type ScriptClient = Pick<Redis, "evalsha" | "eval"> & {
  /**
   * The same client, its requests aborted after `timeoutMs` (createStoreClient provides it).
   * withinDeadline gives a second call (NOSCRIPT → EVAL, or a retry on the caller clock) only
   * what is left of the decision's time: with the client's full timeout, an EVAL sent near the
   * deadline could reach Redis after the decision was made without it, and count a request the
   * caller already answered. Optional: without it the EVAL runs under the client's own timeout.
   */
  withTimeout?(timeoutMs: number): Pick<Redis, "eval" | "evalsha">;
  /**
   * The same client, its requests aborted by `signal` (createStoreClient provides it).
   * withinDeadline then passes the decision's own signal, aborted at its deadline, to every
   * request of the decision: one timer for the decision and its requests. Preferred over
   * `withTimeout` when both are there.
   */
  withSignal?(signal: AbortSignal): Pick<Redis, "eval" | "evalsha">;
  /**
   * The clock run its scripts follow (store-clock.ts clockRunOf): set by withClock (a limiter's
   * run) and passed on by withinDeadline. Absent: the client's own, kept by the client object.
   */
  clock?: ClockRun;
};

/** The store's words (or a reply) an error keeps: about 1 KB with the command and SHA. */
const MAX_SAID_CHARS = 900;

/**
 * A reply the store cannot parse means the endpoint is not what we think: said loudly, and
 * bounded (the reply is quoted, and whatever answered may have sent anything).
 */
export class StoreReplyError extends Error {
  override name = "StoreReplyError";
  constructor(message: string) {
    super(message.length > MAX_SAID_CHARS ? `${message.slice(0, MAX_SAID_CHARS)}…` : message);
  }
}

/** Argument values as the REST protocol carries them. */
// SHA-1 of each script text, computed once per isolate. crypto.subtle is async, so it cannot run
// at module scope (workerd forbids I/O-like work there): the promise is cached on first use,
// then replaced by the hex it gave, read synchronously (awaiting the cached promise cost every
// decision a turn of the microtask queue).
const shaCache = new Map<string, string | Promise<string>>();

export function scriptSha(script: string): Promise<string> {
  const cached = shaCache.get(script);
  if (typeof cached === "string") return Promise.resolve(cached);
  if (cached) return cached;
  const sha = digestHex("SHA-1", script);
  shaCache.set(script, sha);
  sha.then(
    (hex) => shaCache.set(script, hex),
    () => shaCache.delete(script),
  );
  return sha;
}

/** The read-only variants (EVALSHA_RO / EVAL_RO): allowed on replicas, refused if it writes. */
export type ReadOnlyScriptClient = Pick<Redis, "evalshaRo" | "evalRo"> & { clock?: ClockRun };

/**
 * A script call the store (or the way to it) failed: the command, the script's SHA-1 and the
 * store's own words, bounded (MAX_SAID_CHARS). Never the script: @upstash/redis puts the whole
 * request in its error message (", command was: [...]": an EVAL carries ~26 KB of script), and
 * that message ends up in log lines (a breaker event, the admin route, a refund's outcome).
 */
export class StoreCommandError extends Error {
  override name = "StoreCommandError";
  constructor(
    readonly command: "EVALSHA" | "EVAL" | "EVALSHA_RO" | "EVAL_RO",
    readonly sha: string,
    /** What the store (or the network) said, without the command the client echoed. */
    readonly said: string,
  ) {
    super(`${command} ${sha}: ${said}`);
  }
}

/**
 * Every failure of a script call as a StoreCommandError, except the deadline's own
 * StoreTimeoutError (the limiter tells a slow store from a failing one by it).
 */
function commandError(
  command: StoreCommandError["command"],
  script: string,
  error: unknown,
): unknown {
  if (error instanceof StoreTimeoutError || error instanceof StoreCommandError) return error;
  const text =
    error instanceof Error
      ? `${error.name === "UpstashError" ? "" : `${error.name}: `}${error.message}`
      : String(error);
  const [said = ""] = text.split(", command was:");
  const sha = shaCache.get(script);
  return new StoreCommandError(
    command,
    typeof sha === "string" ? sha : "(sha pending)",
    said.length > MAX_SAID_CHARS ? `${said.slice(0, MAX_SAID_CHARS)}…` : said,
  );
}

/**
 * EVALSHA, and on NOSCRIPT (a fresh Redis, a failover, `SCRIPT FLUSH`) EVAL once: EVAL also
 * loads the script, so the next EVALSHA hits again. A script that reads TIME runs on the client's
 * clock run (clockedCall): the caller's clock in its slot once the store has refused TIME, and
 * a refusal met here retried once on it. Any other error is the caller's to handle, as a
 * StoreCommandError (or the deadline's StoreTimeoutError).
 */
export function runScript<T>(
  client: ScriptClient,
  script: string,
  keys: string[],
  args: ScriptArg[],
): Promise<T> {
  const send = (given: ScriptArg[]) =>
    withFallback(
      script,
      ["EVALSHA", "EVAL"],
      (sha) => client.evalsha<ScriptArg[], T>(sha, keys, given),
      () => client.eval<ScriptArg[], T>(script, keys, given),
    );
  return onClock(client, script, args, send);
}

/** runScript for a script that only reads: EVALSHA_RO, on NOSCRIPT EVAL_RO once. */
export function runReadOnlyScript<T>(
  client: ReadOnlyScriptClient,
  script: string,
  keys: string[],
  args: ScriptArg[],
): Promise<T> {
  const send = (given: ScriptArg[]) =>
    withFallback(
      script,
      ["EVALSHA_RO", "EVAL_RO"],
      (sha) => client.evalshaRo<ScriptArg[], T>(sha, keys, given),
      () => client.evalRo<ScriptArg[], T>(script, keys, given),
    );
  return onClock(client, script, args, send);
}

/** `send(args)` as the script's clock slot and the client's clock run say (clockedCall). */
function onClock<T>(
  client: object,
  script: string,
  args: ScriptArg[],
  send: (given: ScriptArg[]) => Promise<T>,
): Promise<T> {
  let slot: number | undefined;
  try {
    slot = clockSlotOf(script, args.length);
  } catch (error) {
    return Promise.reject(error);
  }
  if (slot === undefined || args[slot] !== "") return send(args);
  return clockedCall(clockRunOf(client), args, slot, send);
}

function withFallback<T>(
  script: string,
  [bySha, byText]: ["EVALSHA" | "EVALSHA_RO", "EVAL" | "EVAL_RO"],
  callBySha: (sha: string) => Promise<T>,
  callByText: () => Promise<T>,
): Promise<T> {
  const known = shaCache.get(script);
  let call: Promise<T>;
  try {
    call = typeof known === "string" ? callBySha(known) : scriptSha(script).then(callBySha);
  } catch (error) {
    call = Promise.reject(error);
  }
  return call.catch((error: unknown) => {
    if (!isNoScript(error)) throw commandError(bySha, script, error);
    let second: Promise<T>;
    try {
      second = callByText();
    } catch (thrown) {
      second = Promise.reject(thrown);
    }
    return second.catch((thrown: unknown) => {
      throw commandError(byText, script, thrown);
    });
  });
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.includes("NOSCRIPT");
}

/**
 * Runs `work`'s store requests within one deadline of `timeoutMs`, and rejects with
 * StoreTimeoutError at the deadline whatever `work` does. With a client that has `withSignal`
 * (createStoreClient's), every request carries the deadline's own signal: each is aborted at
 * the deadline. Otherwise the first request gets the client's own timeout (the same as the
 * deadline) and any later one (the EVAL after a NOSCRIPT, a retry on the caller clock) only the
 * time left, through `withTimeout`. Either way no request can count after the decision was made
 * without it, and none starts once the deadline has passed.
 */
export function withinDeadline<T>(
  store: ScriptClient,
  timeoutMs: number,
  work: (client: ScriptClient) => Promise<T>,
): Promise<T> {
  return withDeadline(timeoutMs, (deadline) => {
    // A client that takes the decision's signal: every request aborted at the deadline itself.
    const signalled = store.withSignal?.(deadline.signal);
    let calls = 0;
    const client = () => {
      const remaining = Math.floor(deadline.remainingMs());
      if (deadline.expired() || remaining <= 0) throw new StoreTimeoutError(timeoutMs);
      if (signalled) return signalled;
      return calls++ === 0 || !store.withTimeout ? store : store.withTimeout(remaining);
    };
    return work({
      // The store's clock run goes with it: a refusal met through this client is the store's.
      clock: clockRunOf(store),
      evalsha: (sha, keys, args) => {
        try {
          return client().evalsha(sha, keys, args);
        } catch (error) {
          return Promise.reject(error);
        }
      },
      eval: (script, keys, args) => {
        try {
          return client().eval(script, keys, args);
        } catch (error) {
          return Promise.reject(error);
        }
      },
    });
  });
}
