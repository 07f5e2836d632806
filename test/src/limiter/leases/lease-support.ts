/**
 * What the lease tests share: limiters as isolates on one manual clock (the caller clock, so the
 * store decides on it too), their background work collected and settled, and the reference model
 * the admissions are checked against (every rolling window of uses within the limit).
 */
import { inject } from "vitest";
import { createLimiter } from "../../../../src/limiter/create-limiter";
import type { Limiter } from "../../../../src/limiter/limiter-api";
import type { LimiterOptions } from "../../../../src/limiter/limiter-options";
import type { CountedReceipt } from "../../../../src/limiter/receipt-state";
import type { LimitRequest, MultiDecision } from "../../../../src/limiter/types";
import { counting, storeAt } from "../../../support/worker/fault-control";

/** A manual clock every isolate and the store read (caller clock). */
export interface ManualClock {
  t: number;
}

export interface Isolate {
  limiter: Limiter;
  /** Store calls made so far (EVALSHA and EVAL: decisions, lease calls, give-backs). */
  calls: () => number;
  waitUntil: (promise: Promise<unknown>) => void;
  /** Awaits every background call started so far (lease calls, give-backs). */
  settle: () => Promise<void>;
}

/** One limiter with its own store client (an isolate), on the manual clock. */
export function isolateOn(
  clock: ManualClock,
  prefix: string,
  extra: Partial<LimiterOptions> = {},
): Isolate {
  const counted = counting(storeAt(inject("bridgeUrl"), 5_000));
  const pending: Promise<unknown>[] = [];
  const limiter = createLimiter({
    store: counted.store,
    prefix,
    clock: "caller",
    now: () => clock.t,
    timeoutMs: 5_000,
    ...extra,
  });
  return {
    limiter,
    calls: counted.calls,
    waitUntil: (promise) => {
      pending.push(promise);
    },
    async settle() {
      while (pending.length > 0) await Promise.all(pending.splice(0));
    },
  };
}

/** One admitted request as the tests record it. */
export interface Use {
  policy: string;
  /** When it was admitted (the manual clock). */
  at: number;
  /** Where its units sit in the log (the receipt's `at`: the store's now, or the lease's stamp). */
  stamp: number;
  cost: number;
  source: string;
  refunded: boolean;
}

/** The uses each decision recorded, in its policies' order (to refund them in the model). */
export const recordedUses = new WeakMap<MultiDecision, Use[]>();

/** Decides `requests` on `isolate` now and records an admission's uses, one per policy. */
export async function decideAndRecord(
  isolate: Isolate,
  requests: readonly LimitRequest[],
  at: number,
  uses: Use[],
  requestId?: string,
): Promise<MultiDecision> {
  const decided = await isolate.limiter.limitAll(requests, {
    waitUntil: isolate.waitUntil,
    ...(requestId !== undefined ? { requestId } : {}),
  });
  if (decided.allowed && !decided.replayed) {
    const recorded: Use[] = [];
    recordedUses.set(decided, recorded);
    for (const [i, request] of requests.entries()) {
      recorded.push({
        policy: request.policy,
        at,
        // A lease-paid request's units sit at its leases' stamps (one lease per policy).
        stamp:
          (decided.receipt as CountedReceipt | undefined)?.leased?.[i]?.lease.stamp ??
          decided.receipt?.at ??
          Number.NaN,
        cost: request.cost ?? 1,
        source: decided.decisions[i]?.source ?? "?",
        refunded: false,
      });
    }
    uses.push(...recorded);
  }
  return decided;
}

/**
 * The reference model's one question: the most units in use in any span of `windowMs` (a use at
 * u and one at u' share a window when |u - u'| < windowMs), refunded uses left out.
 */
export function mostInAnyWindow(uses: readonly Use[], policy: string, windowMs: number): number {
  const mine = uses
    .filter((use) => use.policy === policy && !use.refunded)
    .sort((x, y) => x.at - y.at);
  let most = 0;
  let sum = 0;
  let from = 0;
  for (const use of mine) {
    sum += use.cost;
    while ((mine[from] as Use).at <= use.at - windowMs) {
      sum -= (mine[from] as Use).cost;
      from++;
    }
    most = Math.max(most, sum);
  }
  return most;
}

/** Units admitted for a policy (refunded uses left out). */
export function admitted(uses: readonly Use[], policy: string): number {
  return uses
    .filter((use) => use.policy === policy && !use.refunded)
    .reduce((sum, use) => sum + use.cost, 0);
}
