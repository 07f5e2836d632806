/**
 * The regions' own stores (docs/regions.md), each behind its own breaker and deadline: the one
 * way regional-leases.ts and the files beside it reach a region. A region that fails costs a far
 * round trip to home, not an outage, so its breaker gives up on it quickly and probes again soon.
 *
 * A region slower than home is worse than none: each decision would wait for it and then, as
 * often as not, for home too. So a call on the request path (a spend) is not made to a region
 * whose smoothed round trip is clearly above home's (SLOWER_BY_MS): the decision goes home at
 * once (one far round trip, as without regions). Once a second one such call goes as a probe,
 * with that much (home's round trip and the margin) as its deadline: answered in time, it shows
 * the region near again (its old figure is dropped); timed out, it tells the breaker nothing
 * (the region is slow, not down) and that decision goes home. That is exact, and the simplest way that is: a probe given up on may still
 * land and take units of a lease, which then only lapse (held capacity, never an admission);
 * asking home in parallel instead would count one request twice, once in each, unless one of
 * the two were refunded. The breaker is left to failures, so isolate leases keep taking from a
 * slow region off the request path, with its own deadline, and keep deciding with no round trip
 * at all; and a region a load slows as much as home (a burst) does not compare worse, since both
 * figures rise.
 */
import type { ScriptClient } from "../../store/script-runner";
import { withinDeadline } from "../../store/script-runner";
import { type ClockRun, storeClockOf, withClock } from "../../store/store-clock";
import { StoreTimeoutError } from "../../store/with-deadline";
import {
  type CircuitBreaker,
  type CircuitBreakerOptions,
  cappedCooldown,
  createCircuitBreaker,
} from "../circuit-breaker";
import type { LimiterContext } from "../context";
import { createRoundTrip, type RoundTrip } from "./round-trip";

export interface RegionStores {
  /** Whether `region` is one of `regions.stores`. */
  has(region: string | undefined): region is string;
  /** Whether a region's store is not being asked now (its breaker is open). */
  down(region: string): boolean;
  /**
   * A region store call within the region's deadline, through its breaker. Undefined when the
   * region is unknown, its breaker skips it, or the call fails (reported to onStoreError).
   * `onPath`: a request waits for it (a spend): a region slower than home is not asked, but
   * for a probe (above), and the call is undefined.
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
/** A region slower than home is probed on the request path this often (ms). */
const SLOW_PROBE_MS = 1_000;
/**
 * A region is slower than home when its round trip is more than this (ms), or a quarter of
 * home's, above home's: a region about as near as home still spares home its commands, and two
 * stores equally near must not trade places on noise.
 */
const SLOWER_BY_MS = 10;

export function createRegionStores(
  ctx: LimiterContext,
  clients: Readonly<Record<string, ScriptClient>>,
  timeoutMs: number,
  breakerOptions: CircuitBreakerOptions | undefined,
  home: RoundTrip,
): RegionStores {
  // Each region's store on its own clock policy (clock-policy.ts): its TIME until it refuses it,
  // then the isolate's clock (the limiter's `now`) for that store only; said once, naming it.
  const stores = new Map(
    Object.entries(clients).map(([name, client]) => [
      name,
      withClock(client, regionClock(ctx, name, client)),
    ]),
  );
  const breakers = new Map<string, CircuitBreaker>();
  const trips = new Map<string, { trip: RoundTrip; probedAt: number }>();
  const capped = cappedCooldown(breakerOptions, REGION_MAX_COOLDOWN_MS);
  for (const name of stores.keys()) {
    breakers.set(
      name,
      createCircuitBreaker({
        ...capped,
        now: ctx.now,
      }),
    );
    trips.set(name, { trip: createRoundTrip(), probedAt: Number.NEGATIVE_INFINITY });
  }

  /**
   * How a request-path call to `region` goes now (above): with the region's own deadline, as a
   * probe with home's round trip as its deadline, or not at all (undefined).
   */
  function pathCall(region: string): { deadlineMs: number; probe: boolean } | undefined {
    const slow = trips.get(region);
    const homeMs = home.smoothedMs;
    const regionMs = slow?.trip.smoothedMs;
    if (!slow || homeMs === undefined || regionMs === undefined) {
      return { deadlineMs: timeoutMs, probe: false };
    }
    // As near as home, or nearly: the region's own deadline.
    const nearEnoughMs = homeMs + Math.max(SLOWER_BY_MS, homeMs / 4);
    if (regionMs <= nearEnoughMs) return { deadlineMs: timeoutMs, probe: false };
    const at = ctx.now();
    if (at - slow.probedAt < SLOW_PROBE_MS) return undefined;
    slow.probedAt = at;
    return { deadlineMs: Math.max(1, Math.min(timeoutMs, Math.ceil(nearEnoughMs))), probe: true };
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
    const call = onPath ? pathCall(region) : { deadlineMs: timeoutMs, probe: false };
    if (!call) {
      if (rethrow) throw new Error(`region ${region}: slower than home`);
      return undefined;
    }
    const permit = breaker.acquire();
    if (permit === "skip") {
      if (rethrow) throw new Error(`region ${region}: breaker open`);
      return undefined;
    }
    const trip = trips.get(region)?.trip;
    const sentAt = ctx.now();
    try {
      const result = await withinDeadline(store, call.deadlineMs, work);
      breaker.success(permit);
      const elapsed = ctx.now() - sentAt;
      // A probe answered in time: the region is (nearly) as near as home again.
      if (call.probe) trip?.restart(elapsed);
      else trip?.observe(elapsed);
      return result;
    } catch (error) {
      if (call.probe && error instanceof StoreTimeoutError) {
        // Still slower than home: no news for the breaker, and no store error.
        breaker.release(permit);
        trip?.observe(ctx.now() - sentAt);
        if (rethrow) throw error;
        return undefined;
      }
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

/** A region store's clock run: the Redis clock until that store refuses TIME, then `ctx.now`. */
function regionClock(ctx: LimiterContext, region: string, client: ScriptClient): ClockRun {
  const state = storeClockOf(client);
  return {
    state,
    caller: false,
    now: ctx.now,
    onSwitch: (event) => {
      if (state.reported) return;
      state.reported = true;
      console.warn(JSON.stringify({ ...event, region }));
    },
  };
}
