/**
 * The error a shard's refusal of this isolate's placement is told with (placement-refusal.ts
 * makes it). Apart from the refusal's handling so that the degradation log can recognise it
 * without importing the limiter's context: a refused request is denied, not sent to the failure
 * policy, and the log must say so.
 */
import type { FenceRefusalKind } from "../store/placement-fence";

/** A shard refused this isolate's placement: `setting` names what to fix. */
export class PlacementFenceError extends Error {
  override name = "PlacementFenceError";
  constructor(
    readonly kind: FenceRefusalKind,
    /** The configuration field at fault: `reshard.at`, `reshard`, `reshard.from`. */
    readonly setting: string,
    message: string,
  ) {
    super(`${setting}: ${message}`);
  }
}
