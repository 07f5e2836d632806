/**
 * The regions' own stores (docs/regions.md), each behind its own breaker and deadline: the one
 * way regional-leases.ts and the files beside it reach a region. A region that fails costs a far
 * round trip to home, not an outage, so its breaker gives up on it quickly and probes again soon.
 */
import type { ScriptClient } from "../store/script-runner";
import { withinDeadline } from "../store/script-runner";
import {
  type CircuitBreaker,
  type CircuitBreakerOptions,
  createCircuitBreaker,
} from "./circuit-breaker";
import type { LimiterContext } from "./context";
import { createRoundTrip, type RoundTrip } from "./round-trip";

export interface RegionStores {
  /** Whether `region` is one of `regions.stores`. */
  has(region: string | undefined): region is string;
  /** Whether a region's store is not being asked now (its breaker is open). */
  down(region: string): boolean;
  /**
   * A region store call within the region's deadline, through its breaker. Undefined when the
   * region is unknown, its breaker skips it, or the call fails (reported to onStoreError).
   * `onPath`: a request waits for it (a spend), so a region slower than home is waited for no
   * longer than home's round trip (above).
   */
  inRegion<T>(
    region: string,
    work: (client: ScriptClient) => Promise<T>,
    options?: { rethrow?: false; onPath?: boolean },
  ): Promise<T | undefined>;
  /**
   * The same, but rejects instead: for a caller whose contract is to reject (a LeaseStore's
   * take), and which reports the failure itself.
   */
  inRegion<T>(
    region: string,
    work: (client: ScriptClient) => Promise<T>,
    options: { rethrow: true; onPath?: boolean },
  ): Promise<T>;
  /** Each region's breaker (tests and the dashboard). */
  readonly breakers: ReadonlyMap<string, CircuitBreaker>;
}

/** A region's breaker probes again within this (ms), so a region that recovers is used soon. */
const REGION_MAX_COOLDOWN_MS = 2_000;

export function createRegionStores(
  ctx: LimiterContext,
  clients: Readonly<Record<string, ScriptClient>>,
  timeoutMs: number,
  breakerOptions: CircuitBreakerOptions | undefined,
  home: RoundTrip,
): RegionStores {
  const stores = new Map(Object.entries(clients));
  const breakers = new Map<string, CircuitBreaker>();
  const trips = new Map<string, RoundTrip>();
  const cooldownMs = Math.min(breakerOptions?.cooldownMs ?? 1_000, REGION_MAX_COOLDOWN_MS);
  for (const name of stores.keys()) {
    breakers.set(
      name,
      createCircuitBreaker({
        ...breakerOptions,
        cooldownMs,
        maxCooldownMs: Math.min(breakerOptions?.maxCooldownMs ?? 30_000, REGION_MAX_COOLDOWN_MS),
        now: ctx.now,
      }),
    );
    trips.set(name, createRoundTrip());
  }

  /** The deadline of a request-path call to `region` (above). */
  function pathDeadlineMs(region: string): number {
    const homeMs = home.smoothedMs;
    const regionMs = trips.get(region)?.smoothedMs;
    if (homeMs === undefined || regionMs === undefined || regionMs <= homeMs) return timeoutMs;
    return Math.max(1, Math.min(timeoutMs, Math.ceil(homeMs)));
  }

  async function inRegion<T>(
    region: string,
    work: (client: ScriptClient) => Promise<T>,
    { rethrow = false, onPath = false }: { rethrow?: boolean; onPath?: boolean } = {},
  ): Promise<T | undefined> {
    const store = stores.get(region);
    const breaker = breakers.get(region);
    if (!store || !breaker) {
      if (rethrow) throw new Error(`no store for region ${region}`);
      return undefined;
    }
    const permit = breaker.acquire();
    if (permit === "skip") {
      if (rethrow) throw new Error(`region ${region}: breaker open`);
      return undefined;
    }
    const sentAt = ctx.now();
    try {
      const result = await withinDeadline(store, onPath ? pathDeadlineMs(region) : timeoutMs, work);
      breaker.success(permit);
      trips.get(region)?.observe(ctx.now() - sentAt);
      return result;
    } catch (error) {
      breaker.failure(permit, error);
      if (rethrow) throw error;
      ctx.onStoreError?.(error);
      return undefined;
    }
  }

  return {
    breakers,
    has: (region): region is string => region !== undefined && stores.has(region),
    down: (region) => breakers.get(region)?.state === "open",
    inRegion: inRegion as RegionStores["inRegion"],
  };
}
