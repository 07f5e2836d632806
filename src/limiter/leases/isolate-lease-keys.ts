/**
 * The lease book's per-key state, per isolate: a bounded table (least recently used leaves
 * first, its leases ended) of each leased key's live leases, its recent demand, what the store
 * last said remains, and its one lease call in flight. The lease book (isolate-lease-book.ts) decides
 * with it.
 */
import { stringBytes } from "../../owned-string";
import { policyBytes, type ResolvedPolicy } from "../resolved-policy";
import { NO_OWN_UNITS, type OwnUnits } from "./isolate-lease-own";
import type { Lease } from "./lease";

/** Most bytes the table may hold (see stateBytes); least recently used keys leave first. */
const DEFAULT_LEASE_KEYS_MAX_BYTES = 8 * 1024 * 1024;
/**
 * A key's state besides its strings and leases: the Map slot, the KeyState (its own-units
 * ledger too: isolate-lease-own.ts), its array.
 */
const KEY_STATE_BYTES = 240;
/** A lease besides its policy: the Lease object and its numbers. */
const LEASE_BYTES = 160;

export interface KeyState extends OwnUnits {
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
  /**
   * How long its last granted lease call took (isolate clock, ms; 0 before one): a renewal
   * starts four times this ahead of the leases' end (lease-sizing.ts renewAheadMs).
   */
  callMs: number;
  /** What the table counts it as (stateBytes at its last touch or account). */
  bytes: number;
}

export interface LeaseKeys {
  /** A key's state, made if new, and marked recently used (an evicted key's leases end). */
  stateOf(cacheKey: string, at: number): KeyState;
  /** A key's state if it has one (not marked used). */
  get(cacheKey: string): KeyState | undefined;
  /** Forgets a key's state (its leases are the caller's to end): a new one starts afresh. */
  delete(cacheKey: string): void;
  values(): IterableIterator<KeyState>;
  /**
   * Counts a key's state again after it grew (a policy kept, a lease added): the table stays
   * within its bytes, its least recently used other keys leaving first.
   */
  account(cacheKey: string): void;
  /** Bytes held, as maxBytes counts them. */
  readonly bytes: number;
}

/**
 * What a key's state keeps alive: its key, the policy it keeps and, for each lease, the lease
 * and its own policy when that is another object (a lease holds the policy it was taken with).
 */
function stateBytes(cacheKey: string, state: KeyState): number {
  let bytes = stringBytes(cacheKey) + KEY_STATE_BYTES;
  if (state.policy) bytes += policyBytes(state.policy);
  for (const lease of state.leases) {
    bytes += LEASE_BYTES;
    if (lease.policy !== state.policy) bytes += policyBytes(lease.policy);
  }
  return bytes;
}

/** @param evicted ends an evicted key's leases */
export function createLeaseKeys(
  maxKeys: number,
  evicted: (state: KeyState) => void,
  maxBytes = DEFAULT_LEASE_KEYS_MAX_BYTES,
): LeaseKeys {
  const keys = new Map<string, KeyState>();
  let bytes = 0;

  /** Recounts `state` (the youngest), then evicts the oldest others while over a bound. */
  function recount(cacheKey: string, state: KeyState) {
    const counted = stateBytes(cacheKey, state);
    bytes += counted - state.bytes;
    state.bytes = counted;
    for (const [oldKey, oldState] of keys) {
      if (keys.size <= maxKeys && bytes <= maxBytes) return;
      if (oldState === state) continue;
      keys.delete(oldKey);
      bytes -= oldState.bytes;
      evicted(oldState);
    }
  }

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
          callMs: 0,
          bytes: 0,
          ...NO_OWN_UNITS,
        };
      }
      keys.set(cacheKey, state);
      recount(cacheKey, state);
      return state;
    },
    get: (cacheKey) => keys.get(cacheKey),
    delete: (cacheKey) => {
      const state = keys.get(cacheKey);
      if (state && keys.delete(cacheKey)) bytes -= state.bytes;
    },
    values: () => keys.values(),
    account(cacheKey) {
      const state = keys.get(cacheKey);
      if (state) recount(cacheKey, state);
    },
    get bytes() {
      return bytes;
    },
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

/**
 * Demand per lifetime as a rate, for renewing a lease: with no previous bucket (a key new here,
 * or back after a quiet lifetime) that has run at least a tenth of a lifetime, what it counted
 * over the time it has run, at least a quarter of a lifetime (a burst is not read as a flood;
 * nor is one instant's). Counted alone, a key warming up renewed leases the size of its
 * requests so far, each a little larger: eight lease calls to reach a steady 130 requests a
 * second (bench/lib/billed-commands.mjs's busy shape).
 */
export function demandRate(state: KeyState, at: number, lifetime: number): number {
  const counted = demand(state, at, lifetime);
  const ran = at - state.bucketStart;
  if (state.previous > 0 || ran < lifetime / 10) return counted;
  return Math.max(counted, (state.current * lifetime) / Math.max(ran, lifetime / 4));
}
