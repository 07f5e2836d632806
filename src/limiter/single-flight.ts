/**
 * Single flight: one store call in flight per key; concurrent checks of that key wait for it
 * instead of each calling the store.
 *
 * In workerd a flight belongs to the request that started it. If that request is cancelled, its
 * timers and fetch go with it and the flight's promise never settles. So nothing here trusts a
 * flight to settle: every flight has a deadline (the decision's timeout, on the isolate clock)
 * after which it is gone from the map, and a follower waits with a timer of its own, never past
 * that deadline. A lost flight is dropped when its key is next asked for, or by the sweep every
 * lead and follow makes of the oldest flights: it cannot stay for want of another request of
 * its key.
 */
import { stringBytes } from "../owned-string";
import { DEFAULT_FLIGHT_MAX_BYTES, DEFAULT_FLIGHT_MAX_ENTRIES } from "./defaults";
import { settleWithin } from "./settle-within";
export interface SingleFlight {
  /**
   * Registers the leader's call for `key`. `settled` resolves true when the store answered,
   * false when it failed; it must never reject. The entry goes when it settles or at its
   * deadline, whichever comes first. `heldBytes`: what the call keeps alive besides the key
   * (its policy), counted against maxBytes.
   */
  lead(key: string, settled: Promise<boolean>, heldBytes?: number): void;
  /**
   * Waits for the flight in progress for `key`: true when it answered, false when it failed or
   * did not settle by its deadline, undefined when there is none (or it is past its deadline:
   * then its entry is dropped, so a lost flight never wedges its key).
   */
  follow(key: string): Promise<boolean> | undefined;
  /** Flights in progress (for tests and bounds). */
  readonly size: number;
  /** Bytes the flights hold, as maxBytes counts them. */
  readonly bytes: number;
}

export interface SingleFlightOptions {
  /** How long a flight is trusted to settle: the decision's timeout (ms). */
  timeoutMs: number;
  /** The isolate clock (ms). @default Date.now */
  now?: () => number;
  /**
   * Most flights held; past it (or maxBytes) the oldest is dropped: its followers still get its
   * answer, later requests of its key ask the store themselves.
   * @default 10000
   */
  maxEntries?: number;
  /** Most bytes held (keys at 2 bytes a character, FLIGHT_BYTES each, their held bytes). @default 2 MiB */
  maxBytes?: number;
}

/** A flight besides its key: the Map slot, the Flight, its promise and the leader's callback. */
const FLIGHT_BYTES = 300;

interface Flight {
  settled: Promise<boolean>;
  /** Isolate-clock time after which the flight is given up for lost. */
  expiresAt: number;
  bytes: number;
}

export function createSingleFlight(options: SingleFlightOptions): SingleFlight {
  const now = options.now ?? Date.now;
  const maxEntries = options.maxEntries ?? DEFAULT_FLIGHT_MAX_ENTRIES;
  const maxBytes = options.maxBytes ?? DEFAULT_FLIGHT_MAX_BYTES;
  // Insertion order is deadline order (one timeout for all, a re-lead moves its key to the
  // end), so the expired flights are always the oldest.
  const flights = new Map<string, Flight>();
  let bytes = 0;

  function drop(key: string, flight: Flight) {
    if (flights.get(key) !== flight) return;
    flights.delete(key);
    bytes -= flight.bytes;
  }

  /** Drops every flight past its deadline: each is dropped once, so O(1) amortised. */
  function sweep(at: number) {
    for (const [key, flight] of flights) {
      if (flight.expiresAt > at) return;
      drop(key, flight);
    }
  }

  return {
    lead(key, settled, heldBytes = 0) {
      const at = now();
      sweep(at);
      const old = flights.get(key);
      if (old) drop(key, old);
      const flight: Flight = {
        settled,
        expiresAt: at + options.timeoutMs,
        bytes: stringBytes(key) + FLIGHT_BYTES + heldBytes,
      };
      flights.set(key, flight);
      bytes += flight.bytes;
      // The oldest leave first; the new flight too if it alone is past maxBytes.
      for (const [oldKey, oldFlight] of flights) {
        if (flights.size <= maxEntries && bytes <= maxBytes) break;
        drop(oldKey, oldFlight);
      }
      void settled.then(() => drop(key, flight));
    },

    follow(key) {
      const at = now();
      sweep(at);
      const flight = flights.get(key);
      if (!flight) return undefined;
      // The follower's own timer bounds the wait (the leader's may be gone with its request).
      return settleWithin(flight.settled, flight.expiresAt - at, () => {
        drop(key, flight);
        return false;
      });
    },

    get size() {
      return flights.size;
    },

    get bytes() {
      return bytes;
    },
  };
}
