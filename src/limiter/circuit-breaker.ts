/**
 * The circuit breaker: after consecutive store failures the limiter stops calling the store for a
 * cool-down, then lets one probe through. State changes are reported, never per request.
 */
import { DEFAULT_BREAKER } from "./defaults";
export type BreakerState = "closed" | "open" | "half-open";

/** One structured event per state change (never per request). */
export interface BreakerEvent {
  event: "circuit-breaker";
  from: BreakerState;
  to: BreakerState;
  /** Consecutive failures that led here (open), or 0. */
  failures: number;
  /** How long the store is left alone before the next probe (open only). */
  cooldownMs?: number;
  /** The failure that opened it (open only). */
  error?: string;
  /** The shard whose breaker it is, when the limiter has shards (docs/shards.md). */
  shard?: string;
}

export interface CircuitBreakerOptions {
  /**
   * Consecutive store failures that open the breaker.
   * @default 3
   */
  failureThreshold?: number;
  /**
   * First cool-down: no store call at all until it ends, then one probe.
   * @default 1000
   */
  cooldownMs?: number;
  /**
   * The cool-down doubles after each failed probe, up to this.
   * @default 30000
   */
  maxCooldownMs?: number;
  /**
   * A probe that has not reported back this long after it was handed out is given up for lost
   * (its request was cancelled, or threw before it could report) and the next caller probes
   * instead: a lost probe must never leave the breaker half-open, and the store unasked, forever.
   * @default 2 × the limiter's timeoutMs (5000 when used alone)
   */
  probeTimeoutMs?: number;
  /** The clock (ms). @default Date.now */
  now?: () => number;
  /** Called once per state change (closed → open → half-open → …). @default none */
  onStateChange?: (event: BreakerEvent) => void;
}

/** The single call allowed through a half-open breaker; only the newest probe counts. */
interface Probe {
  readonly probe: number;
}

/** What a caller may do now: call the store, call it as the single probe, or not call it. */
export type Permit = "call" | "skip" | Probe;

export interface CircuitBreaker {
  acquire(): Permit;
  /** The store answered. */
  success(permit: Permit): void;
  /** The store failed (timeout, network, 5xx, garbage). */
  failure(permit: Permit, error: unknown): void;
  /**
   * The call says nothing about the store's health (it was slow while other calls were
   * answered, or it was never made): counts neither way. A probe's permit is handed back, so
   * the next caller probes at once.
   */
  release(permit: Permit): void;
  readonly state: BreakerState;
  /** ms until the next probe may go (0 unless open). */
  readonly retryAfterMs: number;
}

/**
 * Consecutive failures open it; while open, no store call and no waiting. After the cool-down
 * exactly one request probes the store: success closes it, failure reopens it with a longer
 * cool-down. Results of calls started before it opened do not move it (they are old news).
 */
export function createCircuitBreaker(options: CircuitBreakerOptions = {}): CircuitBreaker {
  const threshold = options.failureThreshold ?? DEFAULT_BREAKER.failureThreshold;
  const baseCooldown = options.cooldownMs ?? DEFAULT_BREAKER.cooldownMs;
  const maxCooldown = Math.max(
    baseCooldown,
    options.maxCooldownMs ?? DEFAULT_BREAKER.maxCooldownMs,
  );
  const now = options.now ?? Date.now;
  const probeTimeout = options.probeTimeoutMs ?? 5_000;

  let state: BreakerState = "closed";
  let failures = 0;
  let cooldown = baseCooldown;
  let openUntil = 0;
  // The probe now out (half-open only), and when it is given up for lost.
  let probe: Probe | undefined;
  let probeExpiresAt = 0;
  let probes = 0;

  function newProbe(): Probe {
    probe = { probe: ++probes };
    probeExpiresAt = now() + probeTimeout;
    return probe;
  }

  /** Only the probe now out moves a half-open breaker (a lost one's late report is old news). */
  function isCurrentProbe(permit: Permit): boolean {
    return typeof permit === "object" && permit === probe;
  }

  function move(to: BreakerState, extra: Partial<BreakerEvent> = {}) {
    const from = state;
    state = to;
    options.onStateChange?.({ event: "circuit-breaker", from, to, failures, ...extra });
  }

  function open(error: unknown) {
    probe = undefined;
    openUntil = now() + cooldown;
    move("open", { cooldownMs: cooldown, error: String(error) });
  }

  return {
    acquire() {
      if (state === "closed") return "call";
      if (state === "open" && now() >= openUntil) {
        move("half-open");
        return newProbe();
      }
      // The probe out was lost (never reported within its deadline): this caller probes.
      if (state === "half-open" && now() >= probeExpiresAt) return newProbe();
      return "skip";
    },

    success(permit) {
      if (state === "closed") {
        failures = 0;
        return;
      }
      if (!isCurrentProbe(permit)) return;
      probe = undefined;
      failures = 0;
      cooldown = baseCooldown;
      move("closed");
    },

    release(permit) {
      if (!isCurrentProbe(permit)) return;
      // Next acquire() probes again, with no cool-down: nothing was learnt about the store.
      probeExpiresAt = now();
    },

    failure(permit, error) {
      if (state === "closed") {
        failures++;
        if (failures >= threshold) open(error);
        return;
      }
      if (!isCurrentProbe(permit)) return;
      failures++;
      cooldown = Math.min(cooldown * 2, maxCooldown);
      open(error);
    },

    get state() {
      return state;
    },

    get retryAfterMs() {
      return state === "open" ? Math.max(0, openUntil - now()) : 0;
    },
  };
}

/**
 * Breaker options whose cool-down never passes `capMs`, for a store only some decisions use (a
 * shard, a region's store): its keys return to Redis only when a probe finds it answering, so a
 * cool-down that doubles to 30 s would keep them on the fallback that long after it recovered.
 * A probe costs one request per isolate a cool-down at most, on that store's keys alone.
 */
export function cappedCooldown<
  T extends Pick<CircuitBreakerOptions, "cooldownMs" | "maxCooldownMs">,
>(options: T | undefined, capMs: number): T & { cooldownMs: number; maxCooldownMs: number } {
  const cooldownMs = Math.min(options?.cooldownMs ?? DEFAULT_BREAKER.cooldownMs, capMs);
  const maxCooldownMs = Math.min(options?.maxCooldownMs ?? DEFAULT_BREAKER.maxCooldownMs, capMs);
  return { ...(options as T), cooldownMs, maxCooldownMs: Math.max(cooldownMs, maxCooldownMs) };
}
