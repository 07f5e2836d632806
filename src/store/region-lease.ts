/**
 * The calls a region's store takes for regional leases (docs/regions.md): spend, put, return.
 * The scripts are in lua/region-lease.lua.ts; this file builds their inputs and reads their
 * replies. Keys: the client's home key with `:region` appended, in the region's own database.
 */
import { STAMP_AHEAD_MAX_MS } from "./keys";
import {
  REGION_FORGET_SCRIPT,
  REGION_PUT_SCRIPT,
  REGION_RETURN_SCRIPT,
  REGION_SPEND_SCRIPT,
} from "./lua/region-lease.lua";
import { runScript, type ScriptClient, StoreReplyError } from "./script-runner";

/** A region's hash for a client key, from the key's home (Redis) key. */
export function regionKey(homeKey: string): string {
  return `${homeKey}:region`;
}

export interface RegionSpendItem {
  /** The home key (StorePolicy.redisKey). */
  redisKey: string;
  cost: number;
  /** A lease's life for this key (ms). */
  lifeMs: number;
  limit: number;
  /** A lease below this many units is not asked for. */
  minUnits: number;
  /** How long a claim to ask home holds before another caller may ask (ms). */
  claimMs: number;
  /**
   * Pay from a lease with this much life left if there is one (an isolate's lease taken for
   * later), else from the one that ends last; 0: the one that ends first (a request).
   */
  wantLifeMs: number;
  /**
   * The request's policy (policyFingerprint in limiter/lease.ts): only a lease granted under it
   * pays, and a denial held under another does not deny.
   */
  policy: string;
}

export interface RegionSpendAnswer {
  /** "spent": paid from a lease; "miss": ask home; "denied": a denial home decided still holds. */
  status: "spent" | "miss" | "denied";
  /** The lease's stamp (home clock) when spent. */
  stamp: number;
  /** Units left in that lease. */
  left: number;
  /** An estimate of what remains (home's last report plus the region's live units). */
  remaining: number;
  /** When spent or missed: ms until capacity next frees; when denied: ms until it may pass. */
  waitMs: number;
  /** > 0: this caller claimed the key's next lease and is to ask home for this many units. */
  claim: number;
  /** The lease's member id and reset mark at home (what a refund there carries). */
  memberId: string;
  resetMark: string;
  /** When spent: ms the lease has left on the region's clock. */
  lifeLeftMs: number;
  /**
   * The region's clock when it ran (ms): read before any grant a claim leads to is sent, so a
   * lease ending at regionNow + its spendable life ends before its stamp.
   */
  regionNow: number;
}

const STATUS = { 1: "spent", 0: "miss", [-1]: "denied" } as const;

export async function regionSpend(
  client: ScriptClient,
  items: readonly RegionSpendItem[],
): Promise<RegionSpendAnswer[]> {
  const args: (number | string)[] = [items.length];
  for (const item of items) {
    args.push(item.cost, item.lifeMs, item.limit, item.minUnits, item.claimMs, item.wantLifeMs);
    args.push(item.policy);
  }
  // The clock, last: "" for the region's TIME (the runner passes the caller's on a refusal).
  args.push("");
  const reply = await runScript<unknown>(
    client,
    REGION_SPEND_SCRIPT,
    items.map((item) => regionKey(item.redisKey)),
    args,
  );
  if (!Array.isArray(reply) || reply.length !== items.length) {
    throw new StoreReplyError(`unexpected region spend reply: ${JSON.stringify(reply)}`);
  }
  return reply.map((row: unknown) => {
    if (!Array.isArray(row) || row.length !== 9 || !row.slice(0, 6).every(Number.isFinite)) {
      throw new StoreReplyError(`unexpected region spend reply: ${JSON.stringify(reply)}`);
    }
    const [status, stamp, left, remaining, waitMs, claim] = row as number[];
    const [memberId = "", resetMark = ""] = String(row[6]).split(" ");
    return {
      status: STATUS[status as 1 | 0 | -1] ?? "miss",
      stamp: stamp as number,
      left: left as number,
      remaining: remaining as number,
      waitMs: waitMs as number,
      claim: claim as number,
      memberId,
      resetMark,
      lifeLeftMs: Number(row[7]) || 0,
      regionNow: Number(row[8]) || 0,
    };
  });
}

export interface RegionPut {
  redisKey: string;
  /** The lease home granted (units 0: none, only release the claim). */
  stamp: number;
  units: number;
  /** Its end on the region's clock (exclusive); a put arriving after it is refused. */
  endsAt: number;
  /** The claim this put answers (the `g` its spend set), released only if still that one. */
  claim: number;
  memberId: string;
  resetMark: string;
  /** What home reported remaining (-1: home did not answer), and ms until capacity next frees. */
  remaining: number;
  resetAfterMs: number;
  /** A denial to hold for this many ms (0: none), for a cost of `denyCost` or more. */
  denyMs: number;
  denyCost: number;
  /** The hash's time to live from now (ms). */
  ttlMs: number;
  /** The policy home decided under (policyFingerprint): the lease's, the denial's, remaining's. */
  policy: string;
}

/** A lease taken out of the region whole by a put: its unspent units go back to home. */
export interface TakenLease {
  stamp: number;
  units: number;
  memberId: string;
  resetMark: string;
}

/** What a put did: its lease refused (its end had passed), and the leases it took out. */
export interface PutAnswer {
  refused: boolean;
  taken: TakenLease[];
}

export async function regionPut(client: ScriptClient, put: RegionPut): Promise<PutAnswer> {
  const reply = await runScript<unknown>(
    client,
    REGION_PUT_SCRIPT,
    [regionKey(put.redisKey)],
    [
      put.stamp,
      put.units,
      Math.max(0, Math.floor(put.endsAt)),
      `${put.memberId} ${put.resetMark}`,
      Math.max(-1, Math.floor(put.remaining)),
      Math.max(0, Math.floor(put.resetAfterMs)),
      Math.max(0, Math.floor(put.denyMs)),
      put.denyCost,
      Math.max(1, Math.ceil(put.ttlMs)),
      put.claim,
      put.policy,
      // The clock: "" for the region's TIME (the runner passes the caller's on a refusal).
      "",
    ],
  );
  const [refused, list] = Array.isArray(reply) ? reply : [];
  if (!Array.isArray(list) || list.length % 3 !== 0 || (refused !== 0 && refused !== 1)) {
    throw new StoreReplyError(`unexpected region put reply: ${JSON.stringify(reply)}`);
  }
  const taken: TakenLease[] = [];
  for (let i = 0; i < list.length; i += 3) {
    const [memberId = "", resetMark = ""] = String(list[i + 2]).split(" ");
    taken.push({ stamp: Number(list[i]), units: Number(list[i + 1]), memberId, resetMark });
  }
  return { refused: refused === 1, taken };
}

/**
 * How long a forget's mark stays (ms): past the end of any lease whose put may still be on its
 * way (a lease lives at most STAMP_AHEAD_MAX_MS), so such a put finds the mark, not a new hash.
 */
const FORGET_MARK_MS = 2 * STAMP_AHEAD_MAX_MS;

/**
 * A reset of the key at home, in a region: its leases, claim and held denial go, and a put
 * answering a claim made before it is refused (the forget script's mark).
 */
export async function regionForget(client: ScriptClient, redisKey: string): Promise<void> {
  await runScript<unknown>(
    client,
    REGION_FORGET_SCRIPT,
    [regionKey(redisKey)],
    [
      FORGET_MARK_MS,
      // The clock last: "" for the region's TIME.
      "",
    ],
  );
}

/** Units back into the lease stamped `stamp` while it lives: false when it has ended. */
export async function regionReturn(
  client: ScriptClient,
  redisKey: string,
  stamp: number,
  units: number,
): Promise<boolean> {
  const reply = await runScript<unknown>(
    client,
    REGION_RETURN_SCRIPT,
    [regionKey(redisKey)],
    // The clock last: "" for the region's TIME.
    [stamp, units, ""],
  );
  return reply === 1;
}
