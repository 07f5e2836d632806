/**
 * Lease sizing (docs/leases.md): how long a lease lives, how many units it asks for, and when a
 * key is hot enough in this isolate to lease at all. Pure arithmetic: no clock, no store.
 */
import { STAMP_AHEAD_MAX_MS } from "../../store/keys";

import { DEFAULT_LEASES } from "../defaults";
import type { ResolvedPolicy } from "../resolved-policy";
import { demand, demandRate, type KeyState } from "./isolate-lease-keys";
import { spendableMs } from "./lease";

/**
 * The longest an isolate lease may live: its last tenth is the slack for an isolate clock that
 * lags (lease.ts), which workerd's clock, advancing only with I/O, can do for a while. A regional
 * lease (regional-leases.ts) lives longer: its life runs on the region store's clock.
 */
const ISOLATE_LEASE_MAX_MS = Math.min(1_000, STAMP_AHEAD_MAX_MS);

/**
 * The most units one lease takes, whatever the limit: an isolate holds them until spent or given
 * back (capacity other isolates cannot use meanwhile), and a region's lease takes as many
 * (region-lease.lua.ts MAX_UNITS).
 */
const LEASE_MAX_UNITS = 1_000;

/** How leases are sized and when they are taken (LimiterOptions.leases). */
export interface LeaseOptions {
  /**
   * The longest a lease lives (ms), at most 1000 (how far ahead the store stamps). A lease also
   * lives at most a twentieth of its window: a
   * leased unit holds capacity from its grant until its stamp (grant + lifetime) plus the window,
   * so the lifetime is what a steady over-limit sender can lose per window (≤ 5 %).
   * @default 1000
   */
  maxLifetimeMs?: number;
  /**
   * The fewest units worth a lease: a key is leased only when this isolate expects at least this
   * many units of demand within one lease lifetime, and only when a lease of that size fits in
   * `maxShare` of the budget the store last reported.
   * @default 2
   */
  minUnits?: number;
  /**
   * The largest share of the remaining budget (as the store last reported it) one lease may take:
   * other isolates keep the rest, and near the limit leases get too small and stop (every request
   * is then decided by the store, exactly as without leases).
   * @default 0.25
   */
  maxShare?: number;
  /**
   * A key's first lease (none live) asks for this many lifetimes' worth of its recent local
   * demand (more units: fewer calls, more held capacity). A renewal asks for what the recent
   * rate spends in the span the renewal will be spent (more would be given back at its end).
   * @default 1.5
   */
  headroom?: number;
  /**
   * Most keys this isolate keeps lease state for (least recently used leave first; their leases
   * end and give back what is unspent).
   * @default 10000
   */
  maxKeys?: number;
}

export interface LeaseSizing {
  readonly maxLifetimeMs: number;
  readonly minUnits: number;
  readonly maxShare: number;
  readonly headroom: number;
  readonly maxKeys: number;
}

export const DEFAULT_LEASE_SIZING: LeaseSizing = DEFAULT_LEASES;

/** A lease's lifetime for a window: min(maxLifetimeMs, window / 20), at least 1 ms. */
export function leaseLifetimeMs(sizing: LeaseSizing, windowMs: number): number {
  return Math.max(1, Math.min(sizing.maxLifetimeMs, Math.floor(windowMs / 20)));
}

/**
 * Units to ask for: enough for `headroom` lifetimes of the recent demand, at most `share` of
 * the remaining budget (`maxShare` unless this isolate holds the whole window) and `maxUnits`
 * (LEASE_MAX_UNITS or the limit); 0 when that is below `minUnits` (the key is not hot here,
 * or little budget is left: decide per request).
 */
export function leaseUnits(
  sizing: LeaseSizing,
  demandPerLifetime: number,
  remaining: number,
  maxUnits: number,
  asked = demandPerLifetime * sizing.headroom,
  share = sizing.maxShare,
): number {
  if (demandPerLifetime < sizing.minUnits) return 0;
  const wanted = Math.ceil(asked);
  const units = Math.min(wanted, Math.floor(remaining * share), maxUnits);
  return units >= sizing.minUnits ? units : 0;
}

/** Resolves the options, refusing nonsense with the field's name (a config error, not a 500). */
export function resolveLeaseSizing(options: LeaseOptions | undefined): LeaseSizing {
  const sizing = { ...DEFAULT_LEASE_SIZING, ...options };
  const positiveInteger = (field: keyof LeaseSizing) => {
    const value = sizing[field];
    if (!Number.isInteger(value) || value < 1) {
      throw new RangeError(`leases.${field} must be a positive integer (got ${String(value)})`);
    }
  };
  positiveInteger("maxLifetimeMs");
  if (sizing.maxLifetimeMs > ISOLATE_LEASE_MAX_MS) {
    throw new RangeError(
      `leases.maxLifetimeMs must be at most ${ISOLATE_LEASE_MAX_MS} (an isolate's clock may lag a tenth of it)`,
    );
  }
  positiveInteger("minUnits");
  positiveInteger("maxKeys");
  if (!(sizing.maxShare > 0 && sizing.maxShare <= 1)) {
    throw new RangeError(`leases.maxShare must be in (0, 1] (got ${String(sizing.maxShare)})`);
  }
  if (!(sizing.headroom >= 1 && Number.isFinite(sizing.headroom))) {
    throw new RangeError(`leases.headroom must be a number ≥ 1 (got ${String(sizing.headroom)})`);
  }
  return sizing;
}

/**
 * How long before its leases end a key's renewal starts: four times its last lease call (the
 * renewal must land before they end, with room for a slower call), between a tenth and half a
 * lifetime; half before a call was timed. Half a lifetime always was twenty times a 20 ms store's
 * call: each lease was spent for 0.4 of its life, a lease granted and one given back about every
 * 400 ms (`node bench/leases.mjs`: 14.2 store round trips per 1000 decisions; 7.9 with this and
 * the renewal's size in leaseWanted).
 */
export function renewAheadMs(state: KeyState, lifetime: number): number {
  if (state.callMs <= 0) return lifetime / 2;
  return Math.min(lifetime / 2, Math.max(lifetime / 10, 4 * state.callMs));
}

/** Whether a key needs a (new) lease now, and how many units (0: none). */
export function leaseWanted(
  sizing: LeaseSizing,
  state: KeyState,
  policy: ResolvedPolicy,
  at: number,
  lifetime: number,
): number {
  if (
    state.remaining === undefined ||
    state.policy === undefined ||
    at < state.inFlightUntil ||
    at < state.quietUntil
  ) {
    return 0;
  }
  let live = 0;
  let coveredUntil = at;
  for (const lease of state.leases) {
    live += lease.units;
    coveredUntil = Math.max(coveredUntil, lease.deadline);
  }
  // A first lease by what was counted (a key is hot here by its count); a renewal by the rate.
  const expected = live > 0 ? demandRate(state, at, lifetime) : demand(state, at, lifetime);
  // Renew before the lease runs out, so a hot key never waits: when what is left would last
  // less than renewAheadMs at the recent rate, or the leases end within it.
  const ahead = renewAheadMs(state, lifetime);
  if (live > 0 && live >= (expected * ahead) / lifetime && coveredUntil - at > ahead) return 0;
  const maxUnits = Math.min(LEASE_MAX_UNITS, policy.limit);
  // A quarter of what remains leaves the rest to other isolates; when the store's last answer
  // counted only this isolate's units in the window (isolate-lease-own.ts), there are none to leave it
  // to, and the end of the budget is a lease or two, not a quarter at a time (about 13 lease
  // calls and 7 store decisions per key). The billed bench's busy shape at 1000: 20.0-20.1 store
  // calls per 1000 decisions with the quarter alone, 10.1 with this (docs/leases.md).
  const share = state.sole ? 1 : sizing.maxShare;
  if (live === 0) {
    return leaseUnits(sizing, expected, state.remaining, maxUnits, undefined, share);
  }
  // A renewal asks for what the recent rate spends in the span it will be spent: from when the
  // leases before it run out (renewAheadMs from now) to its own end. More is given back at its
  // end, one store call a lease: with `headroom` lifetimes' worth, each lease was granted and
  // given back (a paced 120 a second per key: 36 store calls per 1000 decisions; 24 so sized).
  const span = Math.max(0, spendableMs(lifetime) - ahead);
  return leaseUnits(
    sizing,
    expected,
    state.remaining,
    maxUnits,
    (expected * span) / lifetime,
    share,
  );
}
