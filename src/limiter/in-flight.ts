/**
 * `limiter.inFlight`: each concurrency policy's slots held now, over all its keys (an admin look
 * for the stats route; store/in-flight.ts scans), on the limiter's store, prefix and clock.
 */
import { countInFlight, type InFlightCount } from "../store/in-flight";
import type { LimiterContext } from "./context";

export function inFlightOf(
  ctx: LimiterContext,
  policies: readonly string[],
): Promise<InFlightCount[]> {
  return Promise.all(
    policies.map((policy) =>
      ctx.clock.run(ctx.store, (client, clock) => countInFlight(client, ctx.prefix, policy, clock)),
    ),
  );
}
