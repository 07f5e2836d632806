/**
 * One store's limiter: the decision flow of docs/failure-modes.md, step by step — a
 * lease this isolate holds (docs/leases.md), the denial cache, single flight, the breaker, the
 * store, then remember what the answer proves (answer-memory.ts).
 * Each step's mechanics live in its own file; this one only orders them.
 */
import { boundedKey, needsDigest } from "../bounded-key";
import type { EvaluateAnswer } from "../store/evaluate";
import { type FenceView, fenceKey } from "../store/placement-fence";
import { plansKey } from "../store/plans";
import { withinDeadline } from "../store/script-runner";
import { StoreTimeoutError } from "../store/with-deadline";
import { forgetRequest, rememberAnswers } from "./answer-memory";
import type { Permit } from "./circuit-breaker";
import { createLimiterContext, type LimiterContext } from "./context";
import { conflicted, denied, fromCache, fromEvaluation, notAsked } from "./decisions";
import { createDegradedPath } from "./degraded";
import { inFlightOf } from "./in-flight";
import { createKeyBlocks } from "./key-blocks";
import { refundLeasedOnce } from "./lease-refund-once";
import { createLimiterLeases } from "./leases/isolate-leases";
import { createRegionBooks } from "./leases/isolate-leases-in-region";
import type { Limiter } from "./limiter-api";
import type { StoreLimiterOptions } from "./limiter-options";
import { nextMemberId } from "./member-id";
import { createNetworkBlockCopies } from "./network-block-copies";
import { peekRequest } from "./peek";
import { evaluateInPeriods } from "./period-anchors";
import { type PlacedCallOptions, refusedByFence } from "./placement-refusal";
import { createPlanChanges } from "./plan-changes";
import { createPlanListing } from "./plan-listing";
import type { CountedReceipt } from "./receipt-state";
import { refundReceipt } from "./refund-receipt";
import { createRegionalLeases } from "./regions/regional-leases";
import { releaseOf, slotMemberId } from "./release-slots";
import { resetKey } from "./reset";
import {
  policyBytes,
  type ResolvedPolicy,
  receiptIssue,
  resolvePolicies,
  withStorageKeys,
} from "./resolved-policy";
import { reportedSettle } from "./settle-report";
import type { Decision, LimitRequest, MultiDecision, WaitUntil } from "./types";

/**
 * One store's limiter, and its context (a sharded limiter reads a shard's breaker, clock and
 * store through it): the decision flow below.
 */
export function buildStoreLimiter(options: StoreLimiterOptions): {
  limiter: Limiter;
  ctx: LimiterContext;
} {
  const ctx = createLimiterContext(options);
  const { cache, flights, breaker, now } = ctx;
  const degraded = createDegradedPath(ctx);
  // Plans (docs/plans.md): the hash the policies with `overrides` read, and the blocks seen.
  const plans = plansKey(ctx.prefix);
  const fenced = fenceKey(ctx.prefix);
  const keyBlocks = createKeyBlocks();
  // Leases (isolate-leases.ts): steps 0 and 6 below, the refund and endLeases.
  const leases = createLimiterLeases(ctx, options.leases);
  // Regional leases (regional-leases.ts): step 0 for a request in a region.
  const regional = options.regions
    ? createRegionalLeases(ctx, options.regions, options.breaker)
    : undefined;
  const regionOf = options.regions?.regionOf;
  // Isolate leases on top of regional ones (isolate-leases-in-region.ts): step 0 for a request in a region.
  const regionBooks = regional && createRegionBooks(ctx, options.leases, regional);
  // Every isolate lease book: home's, and one per region this isolate decided in.
  const allBooks = () => [leases, ...(regionBooks?.built() ?? [])];
  const forget: Limiter["forget"] = (request) => forgetRequest(ctx, request, allBooks(), keyBlocks);
  // What is done to keys besides deciding (docs/plans.md, docs/check-api.md): on this
  // limiter's prefix, clock and store (one module each).
  const networkCopies = createNetworkBlockCopies(ctx);
  const planChanges = createPlanChanges(ctx, networkCopies.invalidate);

  async function decide(
    policies: ResolvedPolicy[],
    requestId: string | undefined,
    waitUntil: WaitUntil | undefined,
    region: string | undefined,
    fence: FenceView | undefined,
  ): Promise<MultiDecision> {
    // 0. A request in a region (`region`, see limitAll): paid from the region's leases in one
    // near round trip, or denied there from a denial home decided; else home decides it below
    // (leases: this isolate's are for home's requests).
    if (region !== undefined && regionBooks) {
      withStorageKeys(policies, ctx.prefix);
      const decidedThere = await regionBooks.decide(policies, region, waitUntil);
      if (decidedThere) return decidedThere;
    }
    // 0. Leases: every policy paid from a live lease this isolate holds, no round trip. Not for
    // a request id (only the store can replay it).
    if (leases && requestId === undefined && region === undefined) {
      let local = leases.decide(policies, waitUntil);
      // (A promise only while the key's lease call is in flight: this request waits for it.)
      if (local instanceof Promise) local = await local;
      if (local) return local;
    }

    // 1. The denial cache: one policy known to deny is enough to deny the whole request, and
    // only time frees capacity (other requests can only consume), so no round trip is needed.
    // Not for a request id: its retry must get the original answer, which only the store holds
    // (an admitted original followed by exhaustion would otherwise be denied from the cache).
    let at = now();
    const block = keyBlocks.lookup(policies, at);
    if (block) return block;
    const cached = policies.map((policy) =>
      requestId === undefined ? cache?.lookup(policy.cacheKey, policy.cost, at) : undefined,
    );
    if (cached.some((lookup) => lookup?.hit)) {
      return denied(
        policies.map((policy, i) => {
          const lookup = cached[i];
          return lookup?.hit ? fromCache(policy, lookup.entry, at) : notAsked(policy, at);
        }),
      );
    }

    // 2. Single flight: one policy, no request id (a request id's retry is answered by the
    // store), a key exhausted at its last answer. Wait for the call in flight, then ask the
    // cache again.
    const only = policies.length === 1 && requestId === undefined ? policies[0] : undefined;
    const lookup = cached[0];
    if (only && flights && lookup && !lookup.hit && lookup.exhausted) {
      const pending = flights.follow(only.cacheKey);
      if (pending) {
        // The flight failed (timeout, error) or was lost: the store is not answering now. Decide
        // as it did rather than wait a second timeout of our own.
        if (!(await pending)) return degraded(policies);
        at = now();
        const after = cache?.lookup(only.cacheKey, only.cost, at);
        if (after?.hit) return denied([fromCache(only, after.entry, at)]);
      }
    }

    // 3. The breaker. Everything built from what the client sent (keys, member id) is built before
    // it hands out a permit: nothing a client sends can fail between the permit and the store call,
    // so a permit is always reported and a client's input never counts as a store failure.
    withStorageKeys(policies, ctx.prefix);
    const memberId = slotMemberId(policies) ?? nextMemberId();
    const permit: Permit = breaker.acquire();
    if (permit === "skip") return degraded(policies);

    // 4. The store, within the deadline, on the limiter's clock.
    const sentAt = now();
    const epochAtSend = ctx.capacityEpoch;
    const ask = { policies, memberId, requestId, plansKey: plans };
    const fenceAt = fence && { key: fenced, view: fence };
    // (Calendar periods around the call's clock: the caller's, or ours estimating the store's.)
    const call = withinDeadline(ctx.store, ctx.timeoutMs, (store) =>
      ctx.clock.run(store, (client, clock) =>
        evaluateInPeriods(
          client,
          { ...ask, now: clock, fence: fenceAt },
          clock ?? sentAt,
          ctx.prefix,
        ),
      ),
    );
    // Followers join only a key exhausted at its last answer (step 2): lead only there, so an
    // ordinary request allocates no flight.
    if (only && flights && lookup && !lookup.hit && lookup.exhausted) {
      flights.lead(
        only.cacheKey,
        call.then(
          () => true,
          () => false,
        ),
        // The call keeps the policy alive until it settles (or the flight is dropped).
        policyBytes(only),
      );
    }
    let answer: EvaluateAnswer;
    try {
      answer = await call;
    } catch (error) {
      // Slow is not dead: a call that timed out while the store answered another call sent no
      // earlier proves the store is up and busy. It degrades this decision but does not move
      // the breaker (opening it would send every request to the local fallback at once).
      if (error instanceof StoreTimeoutError && ctx.lastAnswerAt >= sentAt) breaker.release(permit);
      else breaker.failure(permit, error);
      ctx.onStoreError?.(error);
      return degraded(policies);
    }
    const receivedAt = now();
    ctx.lastAnswerAt = Math.max(ctx.lastAnswerAt, receivedAt);
    // (A region slower than home is not waited for: region-stores.ts.)
    regional?.homeAnswered(receivedAt - sentAt);
    breaker.success(permit);
    // A shard that refused this isolate's placement (a sharded limiter's call): nothing counted.
    if (answer.fenced) return refusedByFence(ctx, policies, answer.fenced, fence, receivedAt);
    // A request id decided with other parameters: nothing was decided, so nothing is learnt.
    if (answer.conflict) return conflicted(policies, answer.conflict, receivedAt);
    // A blocked key: nothing was read or counted.
    if (answer.blocked) return keyBlocks.remember(policies, answer.blocked, answer.now, receivedAt);

    // 5. Remember what the answer proves. A replayed answer is the original's, at the
    // original's time: it proves nothing now. Nor does one a refund or reset may have
    // overtaken (see capacityEpoch).
    if (!answer.replayed && ctx.capacityEpoch === epochAtSend) {
      rememberAnswers(ctx, policies, answer, sentAt, receivedAt);
    }
    // 6. Leases learn what remains, and hot keys are leased (off the request path); a region
    // holds home's denial until the time home named.
    if (region !== undefined && regional) {
      if (!answer.replayed && !answer.allowed) {
        regional.afterHome(policies, region, answer.policies, sentAt, waitUntil);
      }
    } else {
      leases?.afterStore(policies, answer, waitUntil);
    }
    return fromEvaluation(policies, answer, memberId, requestId);
  }

  async function limitAll(
    given: readonly LimitRequest[],
    requestId: string | undefined,
    waitUntil?: WaitUntil,
    regionName?: string,
    fence?: FenceView,
  ): Promise<MultiDecision> {
    // Keys past MAX_KEY_LENGTH count under their digest, before any map or Redis key sees them
    // (bounded-key.ts); the hook below sees the keys as counted.
    // (A plain-JS caller may pass anything: resolvePolicies refuses what is not a request.)
    const requests =
      Array.isArray(given) && given.some((request) => needsDigest(request?.key))
        ? await Promise.all(
            given.map(async (request) => ({ ...request, key: await boundedKey(request.key) })),
          )
        : given;
    // A field past its bounds (resolved-policy.ts: the caps of store/caps.ts, the window, the
    // key, the name) is the caller's error, thrown to the caller (not a decision in the fail
    // mode): never sent, never a store failure, never the breaker or the clock. /check and the
    // config refuse the same earlier, naming the field.
    const policies = resolvePolicies("limit", requests, ctx.defaultFailMode);
    if (policies.length === 0) return { allowed: true, decisions: [], replayed: false };
    let decided: MultiDecision;
    try {
      // Where the request is decided, once: in its region when that is a known one and every
      // policy is leasable there, not for a request id (only home can replay it); else home.
      const named = regional ? (regionName ?? regionOf?.(requests)) : undefined;
      const region =
        requestId === undefined && regional?.applies(policies, named) ? named : undefined;
      decided = await decide(policies, requestId, waitUntil, region, fence);
      if (region !== undefined) decided.region = region;
    } catch (error) {
      // Only a bug of ours gets here (store errors are handled above); still never throw.
      ctx.onStoreError?.(error);
      decided = degraded(policies);
    }
    // Metrics (src/analytics): every decision, the denial cache's included, passes here.
    if (options.onDecision) {
      try {
        options.onDecision(requests, decided);
      } catch {
        // A metrics hook must never turn a decision into an error.
      }
    }
    return decided;
  }

  const limiter: Limiter = {
    async limit(request, limitOptions) {
      const { decisions } = await limitAll(
        [request],
        undefined,
        limitOptions?.waitUntil,
        limitOptions?.region,
      );
      return decisions[0] as Decision;
    },
    limitAll(requests, limitOptions) {
      return limitAll(
        requests,
        limitOptions?.requestId,
        limitOptions?.waitUntil,
        limitOptions?.region,
        (limitOptions as PlacedCallOptions | undefined)?.fence,
      );
    },
    refund(receipt, refundOptions) {
      // A receipt past the bounds is the caller's error, answered (a refund never throws)
      // without asking the store, and not a store failure.
      const refused = receiptIssue(receipt, refundOptions?.policies);
      if (refused) return Promise.resolve({ refunded: false, units: [], error: String(refused) });
      // Checked above: a receipt this limiter made, with its record of how it was counted.
      const counted = receipt as CountedReceipt;
      const only = refundOptions?.policies;
      const paidInRegion = regionBooks?.paid(counted);
      const via = paidInRegion ?? (counted.leased && leases) ?? (counted.regional && regional);
      if (via) return refundLeasedOnce(counted, only, (rest) => via.refund(counted, rest));
      return refundReceipt(ctx, counted, only);
    },
    settle: reportedSettle(ctx, options.onSettle),
    release(slots, releaseOptions) {
      // Released when a request ends, often past its response: waitUntil keeps the call alive
      // whether or not the caller awaits it (as limitAll's keeps its lease calls alive).
      const released = releaseOf(ctx, slots, releaseOptions);
      releaseOptions?.waitUntil?.(released);
      return released;
    },
    inFlight: (names) => inFlightOf(ctx, names),
    async endLeases() {
      await Promise.all(allBooks().map((book) => book?.endAll() ?? Promise.resolve()));
    },
    forget,
    peek: (request) => peekRequest(ctx, request),
    reset: (request) => resetKey(ctx, request, forget, options.regions?.stores),
    ...planChanges,
    plans: createPlanListing(ctx),
    networkBlocks: networkCopies.of,
    shards: () => [{ name: "", breaker: breaker.state, placed: true, previous: false }],
    placement: () => ({ phase: "single", shards: [""] }),
    shardOf: () => "",
  };
  return { limiter, ctx };
}
