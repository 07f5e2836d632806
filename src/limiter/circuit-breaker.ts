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
  /** The clock (ms). @default Date.now */
  now?: () => number;
  /** Called once per state change (closed → open → half-open → …). @default none */
  onStateChange?: (event: BreakerEvent) => void;
}

/** What a caller may do now: call the store, call it as the single probe, or not call it. */
export type Permit = "call" | "probe" | "skip";

export interface CircuitBreaker {
  acquire(): Permit;
  success(permit: Permit): void;
  failure(permit: Permit, error: unknown): void;
  readonly state: BreakerState;
  /** ms until the next probe may go (0 unless open). */
  readonly retryAfterMs: number;
}

export const DEFAULT_BREAKER = { failureThreshold: 3, cooldownMs: 1_000, maxCooldownMs: 30_000 };

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

  let state: BreakerState = "closed";
  let failures = 0;
  let cooldown = baseCooldown;
  let openUntil = 0;

  function move(to: BreakerState, extra: Partial<BreakerEvent> = {}) {
    const from = state;
    state = to;
    options.onStateChange?.({ event: "circuit-breaker", from, to, failures, ...extra });
  }

  function open(error: unknown) {
    openUntil = now() + cooldown;
    move("open", { cooldownMs: cooldown, error: String(error) });
  }

  return {
    acquire() {
      if (state === "closed") return "call";
      if (state === "open" && now() >= openUntil) {
        move("half-open");
        return "probe";
      }
      return "skip";
    },

    success(permit) {
      if (state === "closed") {
        failures = 0;
        return;
      }
      if (permit !== "probe") return;
      failures = 0;
      cooldown = baseCooldown;
      move("closed");
    },

    failure(permit, error) {
      if (state === "closed") {
        failures++;
        if (failures >= threshold) open(error);
        return;
      }
      if (permit !== "probe") return;
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
