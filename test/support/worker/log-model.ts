/**
 * The exact sliding-window log's contract as plainly as it can be written: every admission's
 * time, counted the way the contract says (a unit admitted at s is inside the window while
 * now < s + window). The ring tests hold the store's answers against it.
 */
export interface Admission {
  id: string;
  at: number;
  cost: number;
  /** Which layout admitted it; a layout switch since makes its refund inexact (see README). */
  epoch: number;
}

export class Model {
  admissions: Admission[] = [];
  live(now: number, window: number): number[] {
    const times: number[] = [];
    for (const a of this.admissions) {
      if (a.at > now - window) for (let i = 0; i < a.cost; i++) times.push(a.at);
    }
    return times.sort((x, y) => x - y);
  }
  decide(now: number, limit: number, window: number, cost: number) {
    const times = this.live(now, window);
    const count = times.length;
    const allowed = count + cost <= limit;
    if (allowed) {
      const after = [...times, ...Array<number>(cost).fill(now)].sort((x, y) => x - y);
      return {
        allowed,
        remaining: Math.max(0, limit - count - cost),
        reset: (after[0] ?? now) + window,
        retryAfterMs: 0,
      };
    }
    const need = count + cost - limit;
    if (cost > limit) {
      return {
        allowed,
        remaining: Math.max(0, limit - count),
        reset: now + window,
        retryAfterMs: window,
      };
    }
    const reset = (times[need - 1] ?? now) + window;
    return { allowed, remaining: Math.max(0, limit - count), reset, retryAfterMs: reset - now };
  }
}
