/**
 * Lease sizing (src/limiter/leases/lease-sizing.ts): the lifetime tied to the window, the units from the
 * local demand and the remaining budget, and options refused naming the field.
 */
import { describe, expect, it } from "vitest";
import { createLimiter } from "../../../../src/limiter/create-limiter";
import type { KeyState } from "../../../../src/limiter/leases/isolate-lease-keys";
import {
  NO_OWN_UNITS,
  noteAnswer,
  noteGivenBack,
  noteOwn,
} from "../../../../src/limiter/leases/isolate-lease-own";
import type { Lease } from "../../../../src/limiter/leases/lease";
import { spendableMs } from "../../../../src/limiter/leases/lease";
import {
  leaseLifetimeMs,
  leaseUnits,
  leaseWanted,
  renewAheadMs,
  resolveLeaseSizing,
  DEFAULT_LEASE_SIZING as S,
} from "../../../../src/limiter/leases/lease-sizing";
import type { ResolvedPolicy } from "../../../../src/limiter/resolved-policy";
import { testStore } from "../../../support/worker/redis";

describe("lease sizing", () => {
  it("lives min(1 s, window / 20) and is spent for all but its last tenth", () => {
    expect(leaseLifetimeMs(S, 60_000)).toBe(1_000);
    expect(leaseLifetimeMs(S, 10_000)).toBe(500);
    expect(leaseLifetimeMs(S, 1_000)).toBe(50);
    expect(leaseLifetimeMs(S, 10)).toBe(1);
    expect(spendableMs(1_000)).toBe(900);
    expect(spendableMs(50)).toBe(45);
    expect(spendableMs(1)).toBe(1);
  });

  it("asks for 1.5 × the demand, within a quarter of the remaining budget and one call's cap", () => {
    expect(leaseUnits(S, 10, 1_000, 1_000)).toBe(15);
    expect(leaseUnits(S, 10, 40, 1_000)).toBe(10);
    expect(leaseUnits(S, 10_000, 100_000, 1_000)).toBe(1_000);
    // Not hot here (under 2 units a lifetime), or too little budget left: no lease.
    expect(leaseUnits(S, 1, 1_000, 1_000)).toBe(0);
    expect(leaseUnits(S, 100, 7, 1_000)).toBe(0);
  });

  it("renews four lease calls ahead, sized to what the rate spends before the renewal's end", () => {
    const policy = { limit: 100_000 } as ResolvedPolicy;
    // 200 units asked for in the last second (a full bucket before this one), 100 live.
    const state = (callMs: number, units: number, deadline: number): KeyState => ({
      leases: [{ units, deadline } as Lease],
      bucketStart: 0,
      current: 0,
      previous: 200,
      remaining: 50_000,
      policy,
      inFlightUntil: 0,
      inFlight: undefined,
      quietUntil: 0,
      callMs,
      bytes: 0,
      ...NO_OWN_UNITS,
    });
    // Between a tenth and half a lifetime; half before a call was timed.
    expect(renewAheadMs(state(0, 1, 1), 1_000)).toBe(500);
    expect(renewAheadMs(state(10, 1, 1), 1_000)).toBe(100);
    expect(renewAheadMs(state(50, 1, 1), 1_000)).toBe(200);
    expect(renewAheadMs(state(400, 1, 1), 1_000)).toBe(500);
    // At 0 (200 a lifetime, a 20 ms call: 80 ms ahead, at least 100): 100 live last 500 ms and
    // end at 600: no renewal yet; ending within 100 ms, or 10 left (50 ms), a renewal of what
    // 200 a second spends in the 800 ms it will be spent: 160, not 1.5 × 200.
    expect(leaseWanted(S, state(20, 100, 600), policy, 0, 1_000)).toBe(0);
    expect(leaseWanted(S, state(20, 100, 90), policy, 0, 1_000)).toBe(160);
    expect(leaseWanted(S, state(20, 10, 600), policy, 0, 1_000)).toBe(160);
    // No lease live: a first lease, 1.5 × the demand.
    expect(leaseWanted(S, { ...state(20, 0, 0), leases: [] }, policy, 0, 1_000)).toBe(300);
    // 100 left at the store: a quarter of it (25), or all of it when the window is this
    // isolate's alone (its renewal would spend 160).
    const end = { ...state(20, 10, 600), remaining: 100 };
    expect(leaseWanted(S, end, policy, 0, 1_000)).toBe(25);
    expect(leaseWanted(S, { ...end, sole: true }, policy, 0, 1_000)).toBe(100);
  });

  it("refuses nonsense options naming the field", () => {
    expect(() => resolveLeaseSizing({ maxShare: 0 })).toThrow(/leases\.maxShare/);
    expect(() => resolveLeaseSizing({ maxLifetimeMs: 0.5 })).toThrow(/leases\.maxLifetimeMs/);
    expect(() => resolveLeaseSizing({ maxLifetimeMs: 1_001 })).toThrow(/at most 1000/);
    expect(() => resolveLeaseSizing({ headroom: 0.5 })).toThrow(/leases\.headroom/);
    expect(() => createLimiter({ store: testStore(), leases: { minUnits: 0 } })).toThrow(
      /leases\.minUnits/,
    );
    expect(resolveLeaseSizing(undefined)).toEqual(S);
  });

  it("is sole only while the store counts this isolate's own units and no others in the window", () => {
    const state = { ...NO_OWN_UNITS } as KeyState;
    const W = 10_000;
    // 10 admitted here at 1 000 (store clock): 90 left of 100 is all its own; 89 is one more.
    noteOwn(state, 10, 1_000, 1_000, W);
    noteAnswer(state, 90, 100, 1_000, W);
    expect(state.sole).toBe(true);
    noteAnswer(state, 89, 100, 1_000, W);
    expect(state.sole).toBe(false);
    // A lease of 20 stamped ahead, then 5 of it given back: 75 left is still all its own.
    noteOwn(state, 20, 11_000, 10_000, W);
    noteGivenBack(state, 5);
    noteAnswer(state, 75, 100, 10_000, W);
    expect(state.sole).toBe(true);
    // Its first units are leaving the window: it no longer knows how many of its own are in it.
    noteAnswer(state, 85, 100, 11_500, W);
    expect(state.sole).toBe(false);
    // A window after its last one left, it starts again, knowing.
    noteOwn(state, 3, 30_000, 30_000, W);
    noteAnswer(state, 97, 100, 30_000, W);
    expect(state.sole).toBe(true);
    // With nothing of its own in the window it is not sole (an empty key is anyone's).
    const fresh = { ...NO_OWN_UNITS } as KeyState;
    noteAnswer(fresh, 100, 100, 1_000, W);
    expect(fresh.sole).toBe(false);
  });
});
