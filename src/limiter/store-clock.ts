/**
 * Whose clock the limiter's store calls use, and the one switch that policy makes: a store that
 * refuses the Redis clock (TIME in a script) moves the limiter to the caller clock, once, for good.
 */
import type { ScriptClient } from "../store/script-runner";
import type { ClockChangeEvent, ClockSource } from "./types";

/**
 * Recognises a store that refuses the Redis clock in scripts. Upstash asks scripts to stay
 * deterministic (no clock inside); a store that enforces it answers a script calling `TIME` with
 * an error, not a timeout. Known wordings: Redis before 5 ("Write commands not allowed after non
 * deterministic commands"), "This Redis command is not allowed from scripts", and any error
 * that names TIME. Our scripts call TIME first (and only with the Redis clock), so such an error
 * means nothing was changed and the call can be made again on the caller's clock.
 */
const REFUSES_CLOCK = /\bTIME\b|non[- ]?deterministic|not allowed (?:from|in) scripts?/i;

export function refusesStoreClock(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  // @upstash/redis appends ", command was: [...]" (the script text, which itself calls TIME):
  // only the store's own words count.
  const [said = ""] = error.message.split(", command was:");
  if (said.includes("NOSCRIPT")) return false;
  return REFUSES_CLOCK.test(said);
}

/** A store call given the clock to pass: the caller's ms, or undefined for the Redis clock. */
export type ClockedCall<T> = (client: ScriptClient, now: number | undefined) => Promise<T>;

export interface StoreClock {
  /**
   * Calls the store on the limiter's clock. If the store refuses the Redis clock, switches to
   * the caller clock for good, says so once, and calls again on `client` (within the same
   * deadline). Safe to retry: TIME is the script's first command, so the refused call changed
   * nothing.
   */
  run<T>(client: ScriptClient, call: ClockedCall<T>): Promise<T>;
  readonly source: ClockSource;
}

export interface StoreClockOptions {
  clock: ClockSource;
  /** The isolate's clock (ms), passed to the store on the caller clock. */
  now: () => number;
  /** @default one JSON line on console.warn */
  onClockChange?: ((event: ClockChangeEvent) => void) | undefined;
}

/** One per limiter: the switch is the limiter's state, not a request's. */
export function createStoreClock(options: StoreClockOptions): StoreClock {
  const { now } = options;
  let source = options.clock;

  // Once per limiter (concurrent calls may all see the refusal): switch, and say so once.
  function switchToCallerClock(error: unknown) {
    if (source === "caller") return;
    source = "caller";
    const event: ClockChangeEvent = {
      event: "store-clock",
      from: "redis",
      to: "caller",
      error: String(error).split(", command was:")[0]?.slice(0, 300) ?? "",
    };
    if (options.onClockChange) options.onClockChange(event);
    else console.warn(JSON.stringify(event));
  }

  return {
    // Not an async function: the Redis clock's call is returned as it is, with a handler for
    // the refusal, rather than awaited in one more promise layer per decision (issue 12).
    run(client, call) {
      const caller = source === "caller";
      let first: ReturnType<typeof call>;
      try {
        first = call(client, caller ? now() : undefined);
      } catch (error) {
        // A call that throws rejects, as it did when this was an async function.
        first = Promise.reject(error);
      }
      if (caller) return first;
      return first.catch((error: unknown) => {
        if (!refusesStoreClock(error)) throw error;
        switchToCallerClock(error);
        return call(client, now());
      });
    },
    get source() {
      return source;
    },
  };
}
