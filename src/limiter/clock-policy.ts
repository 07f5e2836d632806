/**
 * The limiter's side of the store's clock policy (store/store-clock.ts): its calls run on the
 * clock its store client follows, which every script on that client shares — a refusal of TIME
 * seen by any of them (a decision, a refund, a lease, the admin peek) moves them all to the
 * caller clock, once, for good. The refused call is retried by the script runner
 * (store/script-runner.ts), on this limiter's clock (its `now`); this file adds only how the
 * limiter is told.
 */
import type { ScriptClient } from "../store/script-runner";
import type { ClockChangeEvent, ClockSource } from "../store/store-clock";
import {
  type ClockedCall,
  type ClockRun,
  refusesStoreClock,
  reportClockChange,
  runOnClock,
  storeClockOf,
} from "../store/store-clock";

export { refusesStoreClock };

export interface StoreClock {
  /**
   * Calls the store on the store client's clock policy. If the store refuses the Redis clock,
   * every script on that client switches to the caller clock for good, this limiter says so
   * once, and the call is made again on `client` (within the same deadline).
   */
  run<T>(client: ScriptClient, call: ClockedCall<T, ScriptClient>): Promise<T>;
  readonly source: ClockSource;
}

export interface StoreClockOptions {
  /** The store client whose clock policy the limiter follows (its state is per client). */
  store: object;
  clock: ClockSource;
  /** The isolate's clock (ms), passed to the store on the caller clock. */
  now: () => number;
  /** @default one JSON line on console.warn, once per store client */
  onClockChange?: ((event: ClockChangeEvent) => void) | undefined;
}

/** One per limiter; the state it reads and records is its store client's. */
export function createStoreClock(options: StoreClockOptions): StoreClock {
  const state = storeClockOf(options.store);
  const { onClockChange } = options;
  const configuredCaller = options.clock === "caller";
  // A handler of its own hears of the switch once per limiter, whoever met the refusal; without
  // one the store client's one line is enough (two limiters on one client: one line).
  let told = configuredCaller;
  const tell = () => {
    told = true;
    if (onClockChange && state.event) onClockChange(state.event);
    else reportClockChange(state);
  };
  const run: ClockRun = { state, caller: configuredCaller, now: options.now, onSwitch: tell };

  return {
    run(client, call) {
      // Switched by another script on this client since this limiter last called.
      if (!told && state.refused) tell();
      return runOnClock(run, client, call);
    },
    get source() {
      return configuredCaller || state.refused ? "caller" : "redis";
    },
  };
}
