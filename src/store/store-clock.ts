/**
 * Whose clock a store's scripts run on: one policy per store client, shared by every script run
 * through it (the limiter's decisions, refunds and leases, the admin peek). A store that refuses
 * the Redis clock (TIME in a script) is refused once, by whichever script meets it first; from
 * then on every script on that client passes the caller's clock.
 */
import { type ScriptClient, StoreCommandError } from "./script-runner";

/** Whose clock orders the log: the store's (TIME in the script) or the calling isolate's. */
export type ClockSource = "redis" | "caller";

/** The store refused `TIME` in a script; from now on its scripts get the caller's clock. */
export interface ClockChangeEvent {
  event: "store-clock";
  from: "redis";
  to: "caller";
  /** The store's error that showed it (its own words, bounded). */
  error: string;
}

/** What a store client has shown about its clock. One per client (storeClockOf). */
export interface StoreClockState {
  /** The store refused TIME in a script: every script on this client passes the caller's clock. */
  refused: boolean;
  /** The refusal, once there was one. */
  event: ClockChangeEvent | undefined;
  /** The default report of the switch (one console.warn line) was made for this client. */
  reported: boolean;
}

// By the client object itself (createStoreClient's, or any ScriptClient a caller passes): a
// refusal is a fact about the store behind it, so every runner given that client shares it.
// Weak: a client dropped by its owner takes its state with it.
const states = new WeakMap<object, StoreClockState>();

export function storeClockOf(store: object): StoreClockState {
  let state = states.get(store);
  if (!state) {
    state = { refused: false, event: undefined, reported: false };
    states.set(store, state);
  }
  return state;
}

/**
 * Recognises a store that refuses the Redis clock in scripts, from the store's own words (never
 * the script text or the command a client echoes). The known wordings, and nothing looser:
 * - Redis before 5 (whole-script replication): "Write commands not allowed after non
 *   deterministic commands";
 * - a store that flags TIME as not for scripts (ElastiCache Serverless, Redis 7): "This Redis
 *   command is not allowed from script(s)";
 * - a store that names the command: `TIME` in capitals (a command name, not the word "time" of
 *   "invalid expire time") with a refusal ("not allowed", "disabled", "unknown command"…).
 * Our scripts call TIME first (and only on the Redis clock), so such an error means nothing was
 * changed and the call can be made again on the caller's clock.
 */
const REFUSALS = [
  /\bnot allowed after non[- ]?deterministic commands\b/i,
  /\bcommand is not allowed from scripts?\b/i,
  /\bTIME\b(?:.*\b(?:not allowed|disabled|forbidden|not permitted|not supported|unsupported)\b)|\bunknown command\b.*\bTIME\b/,
];

export function refusesStoreClock(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const said = storeWords(error);
  if (said.includes("NOSCRIPT")) return false;
  return REFUSALS.some((pattern) => pattern.test(said));
}

/** What the store itself said in `error`: not the command @upstash/redis appends. */
function storeWords(error: Error): string {
  if (error instanceof StoreCommandError) return error.said;
  // @upstash/redis appends ", command was: [...]" (the script text, which itself calls TIME).
  return error.message.split(", command was:")[0] ?? "";
}

/** A store call given the clock to pass: the caller's ms, or undefined for the Redis clock. */
export type ClockedCall<T> = (client: ScriptClient, now: number | undefined) => Promise<T>;

export interface ClockRun {
  /** The store client's shared state (storeClockOf). */
  state: StoreClockState;
  /** The caller asked for its own clock whatever the store does. */
  caller: boolean;
  /** The isolate's clock (ms), passed on the caller clock. */
  now: () => number;
  /** Told of the switch when this run made it (after `state` records it). */
  onSwitch?: (event: ClockChangeEvent) => void;
}

/**
 * Calls the store on the client's clock policy: the Redis clock unless the caller asked for its
 * own or the store has refused TIME before (to any script on this client). On a refusal,
 * records it for every script on the client and calls again on `client`, on the caller's clock
 * (within the same deadline). Safe to retry: TIME is each script's first command, so the refused
 * call changed nothing. Not an async function: the Redis clock's call is returned as it is, with
 * a handler for the refusal, rather than awaited in one more promise layer per decision.
 */
export function runOnClock<T>(
  run: ClockRun,
  client: ScriptClient,
  call: ClockedCall<T>,
): Promise<T> {
  const { state, now } = run;
  const caller = run.caller || state.refused;
  let first: Promise<T>;
  try {
    first = call(client, caller ? now() : undefined);
  } catch (error) {
    // A call that throws rejects, as an async function's would.
    first = Promise.reject(error);
  }
  if (caller) return first;
  return first.catch((error: unknown) => {
    if (!refusesStoreClock(error)) throw error;
    // Concurrent calls may all see the refusal: the first records it.
    if (!state.refused) {
      state.refused = true;
      state.event = {
        event: "store-clock",
        from: "redis",
        to: "caller",
        error: error instanceof Error ? storeWords(error).slice(0, 300) : "",
      };
      run.onSwitch?.(state.event);
    }
    return call(client, now());
  });
}

/** The default report of a switch: one JSON line on console.warn, once per store client. */
export function reportClockChange(state: StoreClockState): void {
  if (state.reported || !state.event) return;
  state.reported = true;
  console.warn(JSON.stringify(state.event));
}
