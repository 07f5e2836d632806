/**
 * Whose clock a store's scripts run on: one policy per store client, shared by every script run
 * through it (the limiter's decisions, refunds and leases, the admin peek and reset, plans, a
 * region's leases). A store that refuses the Redis clock (TIME in a script) is refused once, by
 * whichever script meets it first; from then on every script on that client passes the caller's
 * clock. The retry itself is the script runner's (script-runner.ts runs every script that reads
 * TIME through clockedCall, below), so no call site can forget it.
 */

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
  // A StoreCommandError keeps the store's words apart (not imported: script-runner.ts imports
  // this file).
  const said = (error as { said?: unknown }).said;
  if (typeof said === "string") return said;
  // @upstash/redis appends ", command was: [...]" (the script text, which itself calls TIME).
  return error.message.split(", command was:")[0] ?? "";
}

/** One ARGV of a script call, as the REST protocol carries it. */
export type ScriptArg = string | number;

/** A store call given the clock to pass: the caller's ms, or undefined for the Redis clock. */
export type ClockedCall<T, C extends object> = (client: C, now: number | undefined) => Promise<T>;

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

// A client's own run when nobody gave it one (clockRunOf): the Redis clock until the store
// refuses it, the isolate's Date.now after, the switch reported by the default line.
const defaultRuns = new WeakMap<object, ClockRun>();

/**
 * The clock run a script on `client` follows: the one it carries (withClock: a limiter's, with
 * its own clock and handler; withinDeadline passes its store's on), else the client's own
 * default, keyed by the client itself.
 */
export function clockRunOf(client: object): ClockRun {
  const carried = (client as { clock?: ClockRun }).clock;
  if (carried) return carried;
  let run = defaultRuns.get(client);
  if (!run) {
    const state = storeClockOf(client);
    run = { state, caller: false, now: Date.now, onSwitch: () => reportClockChange(state) };
    defaultRuns.set(client, run);
  }
  return run;
}

/**
 * `client`, carrying `run` for the scripts sent through it (clockRunOf). The same object when it
 * carries it already; a plain object (withinDeadline's client, made per decision) copied with
 * the run; else one that delegates everything else to `client`. Not a delegate of a plain
 * object: V8 turns an object into a prototype at a cost (its map made a prototype map, the
 * chain's validity cells), ~3 µs per decision for an object that is used once.
 */
export function withClock<C extends object>(client: C, run: ClockRun): C {
  if ((client as { clock?: ClockRun }).clock === run) return client;
  const proto: unknown = Object.getPrototypeOf(client);
  if (proto === Object.prototype || proto === null) return { ...client, clock: run };
  const clocked = Object.create(client) as C & { clock: ClockRun };
  clocked.clock = run;
  return clocked;
}

/**
 * The script runner's clock step (script-runner.ts), for a script that reads its clock from
 * `args[slot]` ("" there: the Redis clock, TIME). On the caller clock (asked for, or the store
 * has refused TIME to any script on this client) the slot gets the run's now before the call.
 * On the Redis clock a refusal is recorded for every script on the client and the call is made
 * once more with the caller's now, through the same `send` (the same client, so within the same
 * deadline). Safe to retry: each script reads its clock before it reads or writes anything, so
 * the refused call changed nothing. Not an async function: the Redis clock's call is returned as
 * it is, with a handler for the refusal, rather than awaited in one more promise layer.
 */
export function clockedCall<T>(
  run: ClockRun,
  args: ScriptArg[],
  slot: number,
  send: (args: ScriptArg[]) => Promise<T>,
): Promise<T> {
  if (args[slot] !== "") return send(args);
  const withNow = () => {
    const given = args.slice();
    given[slot] = run.now();
    return given;
  };
  if (run.caller || run.state.refused) return send(withNow());
  return send(args).catch((error: unknown) => {
    if (!refusesStoreClock(error)) throw error;
    recordRefusal(run, error);
    return send(withNow());
  });
}

/** A refusal of TIME seen by `run`: recorded once for the store client, and told. */
function recordRefusal(run: ClockRun, error: unknown): void {
  const { state } = run;
  // Concurrent calls may all see the refusal: the first records it.
  if (state.refused) return;
  state.refused = true;
  state.event = {
    event: "store-clock",
    from: "redis",
    to: "caller",
    error: error instanceof Error ? storeWords(error).slice(0, 300) : "",
  };
  run.onSwitch?.(state.event);
}

/**
 * Calls the store on the client's clock policy: the Redis clock unless the caller asked for its
 * own or the store has refused TIME before (to any script on this client). The call gets
 * `client` carrying `run` (withClock), so the runner's clock step follows this run (its clock,
 * its handler): a refusal is met there, recorded for every script on the client and retried on
 * the caller's clock within the same deadline. A call that throws rejects, as an async
 * function's would.
 */
export function runOnClock<T, C extends object>(
  run: ClockRun,
  client: C,
  call: ClockedCall<T, C>,
): Promise<T> {
  const caller = run.caller || run.state.refused;
  try {
    // On the caller clock the call passes its now itself: no client to make.
    return caller ? call(client, run.now()) : call(withClock(client, run), undefined);
  } catch (error) {
    return Promise.reject(error);
  }
}

/** The default report of a switch: one JSON line on console.warn, once per store client. */
export function reportClockChange(state: StoreClockState): void {
  if (state.reported || !state.event) return;
  state.reported = true;
  console.warn(JSON.stringify(state.event));
}
