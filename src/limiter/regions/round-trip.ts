/**
 * A store's round trip as its answers show it: the smoothed mean of RFC 6298 (gain 1/8), from
 * the first answer on. A region's store is compared with home's by it (region-stores.ts): a
 * region slower than home is not worth waiting for.
 */
export interface RoundTrip {
  /** One answered call, `ms` after it was sent. */
  observe(ms: number): void;
  /** Starts again from this one answer: what came before no longer describes the store. */
  restart(ms: number): void;
  /** The smoothed round trip (ms), or undefined before any answer. */
  readonly smoothedMs: number | undefined;
}

export function createRoundTrip(): RoundTrip {
  let smoothed: number | undefined;
  return {
    observe(ms) {
      // (An isolate clock that stood still, or a skewed one stepping, says nothing.)
      if (!Number.isFinite(ms) || ms < 0) return;
      smoothed = smoothed === undefined ? ms : smoothed + (ms - smoothed) / 8;
    },
    restart(ms) {
      if (Number.isFinite(ms) && ms >= 0) smoothed = ms;
    },
    get smoothedMs() {
      return smoothed;
    },
  };
}
