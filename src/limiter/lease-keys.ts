/**
 * The lease book's per-key state, per isolate: a bounded table (least recently used leaves
 * first, its leases ended) of each leased key's live leases, its recent demand, what the store
 * last said remains, and its one lease call in flight. The lease book (lease-book.ts) decides
 * with it.
 */
import type { Lease } from "./lease";
import type { ResolvedPolicy } from "./resolved-policy";

export interface KeyState {
  /** Live leases, oldest deadline first. */
  leases: Lease[];
  /** Demand (units asked for, admitted or not) in the current and the previous bucket of δ. */
  bucketStart: number;
  current: number;
  previous: number;
  /** What the store last said remains (undefined: never asked in this isolate). */
  remaining: number | undefined;
  /**
   * The policy as the store last decided it, its Redis key built: what a lease call sends (a
   * request paid from a lease never builds its key).
   */
  policy: ResolvedPolicy | undefined;
  /** Isolate clock until which a lease call is in flight (at most one per key). */
  inFlightUntil: number;
  /** The call in flight: settles (never rejects) once its lease, if granted, can be spent. */
  inFlight: Promise<void> | undefined;
  /** Isolate clock until which no lease call is made (after a failed one). */
  quietUntil: number;
}

export interface LeaseKeys {
  /** A key's state, made if new, and marked recently used (an evicted key's leases end). */
  stateOf(cacheKey: string, at: number): KeyState;
  /** A key's state if it has one (not marked used). */
  get(cacheKey: string): KeyState | undefined;
  /** Forgets a key's state (its leases are the caller's to end): a new one starts afresh. */
  delete(cacheKey: string): void;
  values(): IterableIterator<KeyState>;
}

/** @param evicted ends an evicted key's leases */
export function createLeaseKeys(maxKeys: number, evicted: (state: KeyState) => void): LeaseKeys {
  const keys = new Map<string, KeyState>();
  return {
    stateOf(cacheKey, at) {
      let state = keys.get(cacheKey);
      if (state) {
        // Least recently used leaves first: delete + set moves it to the young end.
        keys.delete(cacheKey);
      } else {
        state = {
          leases: [],
          bucketStart: at,
          current: 0,
          previous: 0,
          remaining: undefined,
          policy: undefined,
          inFlightUntil: 0,
          inFlight: undefined,
          quietUntil: 0,
        };
        while (keys.size >= maxKeys) {
          const oldest = keys.entries().next();
          if (oldest.done) break;
          keys.delete(oldest.value[0]);
          evicted(oldest.value[1]);
        }
      }
      keys.set(cacheKey, state);
      return state;
    },
    get: (cacheKey) => keys.get(cacheKey),
    delete: (cacheKey) => {
      keys.delete(cacheKey);
    },
    values: () => keys.values(),
  };
}

/** Counts demand per lifetime δ in two buckets: the current one and the one before. */
export function noteDemand(state: KeyState, units: number, at: number, lifetime: number): void {
  const elapsed = at - state.bucketStart;
  if (elapsed >= lifetime) {
    state.previous = elapsed >= 2 * lifetime ? 0 : state.current;
    state.current = 0;
    state.bucketStart = elapsed >= 2 * lifetime ? at : state.bucketStart + lifetime;
  }
  state.current += units;
}

/** Demand per lifetime: the previous bucket weighed by how much of it is still within δ. */
export function demand(state: KeyState, at: number, lifetime: number): number {
  const left = Math.max(0, 1 - (at - state.bucketStart) / lifetime);
  return state.previous * left + state.current;
}
