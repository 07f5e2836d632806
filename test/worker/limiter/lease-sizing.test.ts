/**
 * Lease sizing (src/limiter/lease-sizing.ts): the lifetime tied to the window, the units from the
 * local demand and the remaining budget, and options refused naming the field.
 */
import { describe, expect, it } from "vitest";
import { createLimiter } from "../../../src/limiter/create-limiter";
import { spendableMs } from "../../../src/limiter/lease";
import {
  leaseLifetimeMs,
  leaseUnits,
  resolveLeaseSizing,
  DEFAULT_LEASE_SIZING as S,
} from "../../../src/limiter/lease-sizing";
import { testStore } from "../../support/worker/redis";

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
});
