/**
 * Concurrency slots counted in this isolate while the store does not answer (the degraded path,
 * docs/concurrency.md): each concurrency policy admits at most its share of the limit in flight
 * here, released by the same end-of-request hook as a store slot (`limiter.release`), and lapsing
 * at the timeout like one. Another isolate counts its own: in an outage the bound is per isolate.
 */
import type { FallbackDecision } from "./fallback-limiter";

/** Slot ids handed out here start with this: a store slot's id never does. */
export const LOCAL_SLOT_PREFIX = "local:";

/** A policy's client key as the local slots count it (a release names no limit or window). */
export function localSlotKey(policy: string, clientKey: string): string {
  return `${policy}\n${clientKey}`;
}

/** How long a refusal here says to wait: a slot frees whenever its holder ends. */
const LOCAL_RETRY_MS = 1_000;

export interface LocalSlots {
  /** What taking a slot would do now, taking nothing. */
  peek(key: string, limit: number, now: number): FallbackDecision;
  /** Takes slot `id` (expiring at `expires`) when one is free. */
  take(key: string, limit: number, id: string, expires: number, now: number): FallbackDecision;
  /** Gives slot `id` back: true when it was held (and not lapsed). */
  release(key: string, id: string, now: number): boolean;
}

/**
 * @param maxKeys keys tracked at once: past it (after dropping lapsed slots), a new key is
 *   refused, as the fallback limiter's memory cap refuses: a flood of keys cannot grow the isolate.
 */
export function createLocalSlots(maxKeys = 10_000): LocalSlots {
  // Per key, the slots held: id → expiry (isolate clock).
  const held = new Map<string, Map<string, number>>();

  const live = (key: string, now: number): Map<string, number> | undefined => {
    const slots = held.get(key);
    if (!slots) return undefined;
    for (const [id, expires] of slots) if (expires <= now) slots.delete(id);
    if (slots.size === 0) held.delete(key);
    return slots.size > 0 ? slots : undefined;
  };
  const answer = (limit: number, inFlight: number, allowed: boolean): FallbackDecision => ({
    allowed,
    remaining: Math.max(0, limit - inFlight),
    resetAfterMs: allowed ? 0 : LOCAL_RETRY_MS,
    retryAfterMs: allowed ? 0 : LOCAL_RETRY_MS,
  });
  const prune = (now: number) => {
    for (const key of [...held.keys()]) live(key, now);
  };

  return {
    peek(key, limit, now) {
      const count = live(key, now)?.size ?? 0;
      return answer(limit, count, count < limit);
    },
    take(key, limit, id, expires, now) {
      let slots = live(key, now);
      if (!slots) {
        if (held.size >= maxKeys) prune(now);
        if (held.size >= maxKeys) return answer(limit, limit, false);
        slots = new Map();
        held.set(key, slots);
      }
      if (slots.size >= limit) return answer(limit, slots.size, false);
      slots.set(id, expires);
      return answer(limit, slots.size, true);
    },
    release(key, id, now) {
      const slots = held.get(key);
      const expires = slots?.get(id);
      if (!slots || expires === undefined) return false;
      slots.delete(id);
      if (slots.size === 0) held.delete(key);
      return expires > now;
    },
  };
}
