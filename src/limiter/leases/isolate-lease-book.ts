/**
 * The lease book (docs/leases.md): per isolate, the leases this limiter
 * holds per key, spent locally with no round trip, renewed before they run out, and ended on
 * time with their unspent units given back.
 *
 * Why a lease stays exact: lease.ts.
 *
 * What stays with the store: a request with a request id (only the store can replay it), a
 * request any of whose policies is not leased here or lacks room for its cost (multi-rule is all
 * or nothing: every policy's lease pays, or the store decides), and every policy whose algorithm
 * cannot be leased exactly (only the log can: see LEASABLE).
 */

import { nextMemberId } from "../member-id";
import type { ResolvedPolicy } from "../resolved-policy";
import { settleWithin } from "../settle-within";
import type { WaitUntil } from "../types";
import type { LeaseBook, LeaseBookDeps } from "./isolate-lease-book-contract";
import { createLeaseKeys, type KeyState, noteDemand } from "./isolate-lease-keys";
import { noteAnswer, noteGivenBack, noteOwn } from "./isolate-lease-own";
import { type Lease, samePolicy, spendableMs } from "./lease";
import { leaseLifetimeMs, leaseWanted } from "./lease-sizing";

// What a lease book is given and does: isolate-lease-book-contract.ts.

export function createLeaseBook(deps: LeaseBookDeps): LeaseBook {
  const { sizing, store, now, timeoutMs } = deps;
  const ledger = deps.soleShare === true;
  // An evicted key's leases end (their unspent units go back).
  const keys = createLeaseKeys(sizing.maxKeys, (state) => {
    for (const lease of state.leases) void end(lease, undefined);
  });
  // Per log (a policy name and client key: one Redis key whatever its limit or window), the cache
  // key whose leases live in it. A request of another policy of that log (its limit, window or
  // algorithm changed) ends them at once (endStale). Only logs with a live lease have an entry.
  const leasing = new Map<string, string>();
  const logOf = (policy: ResolvedPolicy) => `${policy.name}\n${policy.clientKey}`;

  /**
   * A request of `policy` found no lease to pay it: leases of its log granted under another
   * policy end now, their unspent units given back (never spent under this one: samePolicy).
   */
  function endStale(policy: ResolvedPolicy, waitUntil: WaitUntil | undefined): void {
    if (leasing.size === 0) return;
    const log = logOf(policy);
    const holder = leasing.get(log);
    if (holder === undefined || holder === policy.cacheKey) return;
    leasing.delete(log);
    const stale = keys.get(holder)?.leases.slice() ?? [];
    // What they give back is capacity of this policy's log too: its denial claims may be stale.
    const work = Promise.all(stale.map((lease) => end(lease, undefined))).then(() =>
      deps.capacityFreed([policy.cacheKey]),
    );
    waitUntil?.(work);
  }

  /** Ends the leases whose deadline has passed (lazily, when their key is touched). */
  function endExpired(state: KeyState, at: number, waitUntil: WaitUntil | undefined): void {
    // Oldest deadline first: nothing to do unless the first has passed (the common case).
    if (state.leases.length === 0 || (state.leases[0] as Lease).deadline > at) return;
    const expired = state.leases.filter((lease) => lease.deadline <= at);
    state.leases = state.leases.filter((lease) => lease.deadline > at);
    for (const lease of expired) void end(lease, waitUntil);
  }

  /**
   * Ends a lease: nothing more is spent from it, and its unspent units leave the log. Ending
   * early is always safe (unspent units were never used); ending late is what must not happen,
   * and cannot: a lease is spent only while the isolate clock is before its deadline.
   */
  function end(lease: Lease, waitUntil: WaitUntil | undefined): Promise<void> {
    if (lease.ended) return Promise.resolve();
    lease.ended = true;
    const state = keys.get(lease.policy.cacheKey);
    if (state) state.leases = state.leases.filter((live) => live !== lease);
    if (!state || state.leases.length === 0) {
      const log = logOf(lease.policy);
      if (leasing.get(log) === lease.policy.cacheKey) leasing.delete(log);
    }
    const unspent = lease.units;
    lease.units = 0;
    if (unspent === 0) return Promise.resolve();
    deps.capacityFreed([lease.policy.cacheKey]);
    const work = store.giveBack(lease, unspent).then(
      (units) => {
        if (ledger && state) noteGivenBack(state, units);
        deps.capacityFreed([lease.policy.cacheKey]);
      },
      // Not given back: the units stay in the log until their stamp leaves the window (held
      // capacity, never an over-admission).
      (error: unknown) => deps.onStoreError?.(error),
    );
    waitUntil?.(work);
    return work;
  }

  /** One lease call for one key, off the request path; then its end at the deadline. */
  function take(
    state: KeyState,
    policy: ResolvedPolicy,
    units: number,
    lifetime: number,
    waitUntil: WaitUntil | undefined,
  ): void {
    const sentAt = now();
    state.inFlightUntil = sentAt + timeoutMs;
    const memberId = nextMemberId();
    let settle = () => {};
    state.inFlight = new Promise<void>((resolve) => {
      settle = resolve;
    });
    const work = (async () => {
      let lease: Lease;
      try {
        const grant = await store.take(policy, units, lifetime, memberId, waitUntil);
        state.remaining = grant.remaining;
        state.callMs = now() - sentAt;
        if (ledger) {
          if (grant.granted) noteOwn(state, units, grant.stamp, grant.now, policy.windowMs);
          noteAnswer(state, grant.remaining, policy.limit, grant.now, policy.windowMs);
        }
        if (!grant.granted) return;
        lease = {
          memberId,
          policy,
          granted: units,
          units,
          deadline: sentAt + spendableMs(Math.min(lifetime, grant.lifetimeMs ?? lifetime)),
          stamp: grant.stamp,
          resetMark: grant.resetMark,
          storeNow: grant.now,
          sentAt,
          reset: grant.reset,
          ended: false,
        };
        if (keys.get(policy.cacheKey) !== state) {
          // Evicted while the call was out: nothing will spend it.
          lease.ended = true;
          await store.giveBack(lease, units);
          return;
        }
        state.leases.push(lease);
        state.leases.sort((x, y) => x.deadline - y.deadline);
        leasing.set(logOf(policy), policy.cacheKey);
        keys.account(policy.cacheKey);
      } catch (error) {
        deps.onStoreError?.(error);
        // A second's quiet: the breaker decides about the store; this only stops hammering it.
        state.quietUntil = now() + 1_000;
        return;
      } finally {
        state.inFlightUntil = 0;
        state.inFlight = undefined;
        settle();
      }
      // The end, on time, kept alive like the call (a lease nobody touches again still gives
      // its unspent units back). A timer can fire a little early by the isolate clock: then
      // the lazy end in spend (or a later timer) ends it, never the timer before the deadline.
      if (deps.timers) {
        const ending = (async () => {
          const wait = lease.deadline - now();
          if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait + 1));
          if (now() >= lease.deadline) await end(lease, undefined);
        })();
        if (waitUntil) waitUntil(ending);
      }
    })();
    if (waitUntil) waitUntil(work);
    else void work;
  }

  /** Starts a lease call for every leasable policy of the request that wants one. */
  function lease(
    policies: readonly ResolvedPolicy[],
    at: number,
    waitUntil: WaitUntil | undefined,
  ): void {
    if (deps.storeDown()) return;
    for (const policy of policies) {
      if (!policy.lease) continue;
      const state = keys.get(policy.cacheKey);
      if (!state) continue;
      const lifetime = leaseLifetimeMs(sizing, policy.windowMs);
      const units = leaseWanted(sizing, state, policy, at, lifetime);
      if (units > 0 && state.policy) take(state, state.policy, units, lifetime, waitUntil);
    }
  }

  return {
    spend(policies, at, waitUntil, again = false) {
      let all = true;
      const found: (Lease | undefined)[] = [];
      for (const policy of policies) {
        if (!policy.lease) {
          all = false;
          found.push(undefined);
          continue;
        }
        const lifetime = leaseLifetimeMs(sizing, policy.windowMs);
        const state = keys.stateOf(policy.cacheKey, at);
        if (!again) noteDemand(state, policy.cost, at, lifetime);
        endExpired(state, at, waitUntil);
        // Only a lease granted under this very policy pays (its cache key holds the limit, window
        // and algorithm too: samePolicy says so without relying on that).
        const paying = state.leases.find(
          (lease) => lease.units >= policy.cost && samePolicy(lease.policy, policy),
        );
        if (!paying) {
          all = false;
          endStale(policy, waitUntil);
        }
        found.push(paying);
      }
      if (!all) return undefined;
      const spends = policies.map((policy, i) => {
        const lease = found[i] as Lease;
        lease.units -= policy.cost;
        return { lease, cost: policy.cost };
      });
      lease(policies, at, waitUntil);
      return spends;
    },

    pending(policy, at, waitUntil) {
      const state = keys.get(policy.cacheKey);
      if (!state || !policy.lease) return undefined;
      // None in flight: start one if the key is hot enough (the same rule as a renewal).
      if (!state.inFlight || at >= state.inFlightUntil) lease([policy], at, waitUntil);
      const flight = state.inFlight;
      const left = state.inFlightUntil - now();
      if (!flight || left <= 0) return undefined;
      // Bounded by the call's own deadline: a cancelled request's call never settles in workerd.
      return settleWithin(flight, left, () => undefined);
    },

    afterStore(policies, remaining, at, waitUntil, answered) {
      for (let i = 0; i < policies.length; i++) {
        const policy = policies[i] as ResolvedPolicy;
        if (!policy.lease) continue;
        const state = keys.stateOf(policy.cacheKey, at);
        state.remaining = remaining[i];
        if (ledger && answered && state.remaining !== undefined) {
          const { now: storeNow, stamp, allowed } = answered;
          if (allowed) noteOwn(state, policy.cost, stamp, storeNow, policy.windowMs);
          noteAnswer(state, state.remaining, policy.limit, storeNow, policy.windowMs);
        }
        // Decided by the store: its Redis key is built (withStorageKeys).
        if (policy.redisKey !== "") state.policy = policy;
        keys.account(policy.cacheKey);
      }
      lease(policies, at, waitUntil);
    },

    async refund({ lease, cost }) {
      if (!lease.ended) {
        // Back into the lease it came from: its stamp still covers any later use of it.
        lease.units += cost;
        return cost;
      }
      try {
        const units = await store.giveBack(lease, cost);
        const state = keys.get(lease.policy.cacheKey);
        if (ledger && state) noteGivenBack(state, units);
        deps.capacityFreed([lease.policy.cacheKey]);
        return units;
      } catch (error) {
        deps.onStoreError?.(error);
        return 0;
      }
    },

    async endAll() {
      const all = [...keys.values()].flatMap((state) => state.leases);
      await Promise.all(all.map((lease) => end(lease, undefined)));
    },

    drop(storageKey) {
      const dropped = new Set<string>();
      for (const state of keys.values()) {
        const cacheKey =
          state.policy?.redisKey === storageKey
            ? state.policy.cacheKey
            : state.leases.find((lease) => lease.policy.redisKey === storageKey)?.policy.cacheKey;
        if (cacheKey === undefined) continue;
        for (const lease of state.leases) {
          lease.ended = true;
          lease.units = 0;
          const log = logOf(lease.policy);
          if (leasing.get(log) === cacheKey) leasing.delete(log);
        }
        state.leases = [];
        dropped.add(cacheKey);
      }
      for (const cacheKey of dropped) keys.delete(cacheKey);
    },

    liveUnits(cacheKey, at) {
      let units = 0;
      for (const lease of keys.get(cacheKey)?.leases ?? []) {
        if (lease.deadline > at) units += lease.units;
      }
      return units;
    },

    lastRemaining(cacheKey) {
      return keys.get(cacheKey)?.remaining;
    },
  };
}
