/**
 * Single flight: one store call in flight per key; concurrent checks of that key wait for it
 * instead of each calling the store.
 *
 * In workerd a flight belongs to the request that started it. If that request is cancelled, its
 * timers and fetch go with it and the flight's promise never settles. So nothing here trusts a
 * flight to settle: every flight has a deadline (the decision's timeout, on the isolate clock)
 * after which it is gone from the map, and a follower waits with a timer of its own, never past
 * that deadline.
 */
import { settleWithin } from "./settle-within";
export interface SingleFlight {
  /**
   * Registers the leader's call for `key`. `settled` resolves true when the store answered,
   * false when it failed; it must never reject. The entry goes when it settles or at its
   * deadline, whichever comes first.
   */
  lead(key: string, settled: Promise<boolean>): void;
  /**
   * Waits for the flight in progress for `key`: true when it answered, false when it failed or
   * did not settle by its deadline, undefined when there is none (or it is past its deadline:
   * then its entry is dropped, so a lost flight never wedges its key).
   */
  follow(key: string): Promise<boolean> | undefined;
  /** Flights in progress (for tests and bounds). */
  readonly size: number;
}

export interface SingleFlightOptions {
  /** How long a flight is trusted to settle: the decision's timeout (ms). */
  timeoutMs: number;
  /** The isolate clock (ms). @default Date.now */
  now?: () => number;
}

interface Flight {
  settled: Promise<boolean>;
  /** Isolate-clock time after which the flight is given up for lost. */
  expiresAt: number;
}

export function createSingleFlight(options: SingleFlightOptions): SingleFlight {
  const now = options.now ?? Date.now;
  const flights = new Map<string, Flight>();

  return {
    lead(key, settled) {
      const flight: Flight = { settled, expiresAt: now() + options.timeoutMs };
      flights.set(key, flight);
      void settled.then(() => {
        if (flights.get(key) === flight) flights.delete(key);
      });
    },

    follow(key) {
      const flight = flights.get(key);
      if (!flight) return undefined;
      const left = flight.expiresAt - now();
      if (left <= 0) {
        flights.delete(key);
        return undefined;
      }
      // The follower's own timer bounds the wait (the leader's may be gone with its request).
      return settleWithin(flight.settled, left, () => {
        if (flights.get(key) === flight) flights.delete(key);
        return false;
      });
    },

    get size() {
      return flights.size;
    },
  };
}
