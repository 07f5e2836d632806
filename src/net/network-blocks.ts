/**
 * Network blocks (docs/plans.md): IP addresses and CIDRs (IPv4 and IPv6), countries and ASNs set
 * at run time in the store (store/plans.ts `<prefix>:blocks`). Matched before any key is derived,
 * so each isolate holds a copy, and `refreshMs` bounds its age: a request that finds the copy
 * older (the first one, or the first after a quiet spell) waits for a refresh, bounded by the
 * store timeout, and shares it with every request that arrives meanwhile; a busy isolate
 * refreshes a little before that, off the request path. A refresh that fails leaves the old copy
 * deciding (a warning, a retry refreshMs later); a copy that was never loaded blocks nothing (a
 * store outage must not refuse everyone).
 */
import { groupAddress } from "./ip-address";

/** What a network block names (the store's fields spell these). */
type NetworkBlockKind = "ip" | "country" | "asn";

/** Who is asking, as far as a network block can tell. */
export interface NetworkIdentity {
  /** The client's address (the trusted one: rules/client-key.ts). */
  ip?: string | undefined;
  /** `request.cf.country`: ISO 3166-1 alpha-2. */
  country?: string | undefined;
  /** `request.cf.asn`. */
  asn?: number | undefined;
}

/** The block a request met. */
export interface NetworkBlockHit {
  by: NetworkBlockKind;
  /** The blocked value as stored: a CIDR or address, a country code, an AS number. */
  value: string;
  /** The rule the block names; undefined: every rule. */
  rule?: string;
  /** When the block ends (unix ms, this isolate's clock); absent: until removed. */
  until?: number;
}

/** The store's blocks as read: its clock, and `<kind>|<rule or *>|<value>` → end (0: none). */
export type BlocksLoader = () => Promise<{
  now: number;
  entries: { field: string; value: string }[];
}>;

/** A refresh that failed: decisions go on from the copy of `ageMs` (none: nothing blocked). */
export interface BlocksRefreshFailed {
  event: "network-blocks-refresh-failed";
  /** How old the copy that still decides is (ms since its load started); absent: no copy. */
  ageMs?: number;
  detail: string;
}

export interface NetworkBlocks {
  /**
   * The first live block that applies to a request these rules apply to, or undefined. Never
   * decides on a copy whose load started more than `refreshMs` ago while the store answers: such
   * a request waits for the refresh (one for all who wait). A copy near that age is refreshed in
   * the background, so an isolate with steady traffic rarely waits.
   */
  match(
    identity: NetworkIdentity,
    rules: readonly string[],
    waitUntil?: (promise: Promise<unknown>) => void,
  ): Promise<NetworkBlockHit | undefined>;
  /** Forget the copy: the next request loads it again (after a change made through this isolate). */
  invalidate(): void;
  /** Entries in the copy. */
  readonly size: number;
}

interface Entry {
  rule: string | undefined;
  value: string;
  /** Isolate-clock ms; Infinity: no end. */
  until: number;
}

interface Copy {
  /** When the load that read it started: the store's blocks are at least this recent. */
  loadedAt: number;
  byKey: Map<string, Entry[]>;
  /** Distinct prefix lengths of the IPv4 and IPv6 blocks (a lookup per length). */
  v4Lengths: number[];
  v6Lengths: number[];
  size: number;
}

export function createNetworkBlocks(options: {
  load: BlocksLoader;
  /** The bound on a deciding copy's age (ms), while the store answers. */
  refreshMs: number;
  now?: () => number;
  /** A refresh failed: the old copy (or none) decides until the next attempt, refreshMs later. */
  onRefreshFailed?: (event: BlocksRefreshFailed) => void;
}): NetworkBlocks {
  const now = options.now ?? Date.now;
  const { refreshMs } = options;
  let copy: Copy | undefined;
  /** The one load in flight, and the generation it was started in (invalidate starts a new one). */
  let flight: { promise: Promise<void>; generation: number } | undefined;
  let generation = 0;
  /** When the last load started, whatever its outcome: a failed one is retried refreshMs later. */
  let attemptedAt = Number.NEGATIVE_INFINITY;
  /** How long the last good load took: the background refresh starts that much (twice) early. */
  let lastLoadMs = 0;

  function refresh(): Promise<void> {
    // Single flight: every request on a stale copy awaits the same load. A load started before
    // an invalidation may have read the store before the change: it does not count.
    if (flight && flight.generation === generation) return flight.promise;
    const mine = generation;
    const startedAt = now();
    attemptedAt = startedAt;
    const promise = options
      .load()
      .then(
        (read) => {
          if (mine !== generation) return;
          copy = compile(read.entries, read.now, now(), startedAt);
          lastLoadMs = Math.max(0, now() - startedAt);
        },
        (error: unknown) => {
          if (mine !== generation) return;
          const event: BlocksRefreshFailed = {
            event: "network-blocks-refresh-failed",
            detail: error instanceof Error ? error.message : String(error),
          };
          if (copy) event.ageMs = Math.max(0, now() - copy.loadedAt);
          options.onRefreshFailed?.(event);
        },
      )
      .finally(() => {
        if (flight?.promise === promise) flight = undefined;
      });
    flight = { promise, generation: mine };
    return promise;
  }

  /** Start the background refresh this early before a copy goes stale (bounded: [10 %, 50 %]). */
  function lead(): number {
    return Math.min(refreshMs / 2, Math.max(refreshMs / 10, 2 * lastLoadMs));
  }

  return {
    async match(identity, rules, waitUntil) {
      const at = now();
      const age = copy ? at - copy.loadedAt : Number.POSITIVE_INFINITY;
      if (age >= refreshMs) {
        // Too old to decide on (or none): wait for a refresh, unless the last attempt failed
        // less than refreshMs ago (the store is down: the old copy decides, already warned).
        const retry = at - attemptedAt >= refreshMs;
        if (retry || (flight && flight.generation === generation)) await refresh();
      } else if (age >= refreshMs - lead()) {
        waitUntil?.(refresh());
      }
      return copy ? find(copy, identity, rules, now()) : undefined;
    },
    invalidate() {
      copy = undefined;
      generation++;
      // The next request loads at once, whenever the last attempt was.
      attemptedAt = Number.NEGATIVE_INFINITY;
    },
    get size() {
      return copy?.size ?? 0;
    },
  };
}

function compile(
  entries: readonly { field: string; value: string }[],
  storeNow: number,
  localNow: number,
  loadedAt: number,
): Copy {
  const byKey = new Map<string, Entry[]>();
  const v4 = new Set<number>();
  const v6 = new Set<number>();
  let size = 0;
  for (const { field, value } of entries) {
    const first = field.indexOf("|");
    const second = field.indexOf("|", first + 1);
    if (first < 0 || second < 0) continue;
    const kind = field.slice(0, first);
    const rule = field.slice(first + 1, second);
    const blocked = field.slice(second + 1);
    const end = Number(value);
    // The store's end on this isolate's clock (the offset as read).
    const until = end > 0 ? end - storeNow + localNow : Number.POSITIVE_INFINITY;
    if (until <= localNow) continue;
    if (kind === "ip") {
      const slash = blocked.indexOf("/");
      const length = slash < 0 ? undefined : Number(blocked.slice(slash + 1));
      if (blocked.includes(":")) v6.add(length ?? 128);
      else v4.add(length ?? 32);
    } else if (kind !== "country" && kind !== "asn") continue;
    const key = `${kind}|${blocked}`;
    const list = byKey.get(key) ?? [];
    list.push({ rule: rule === "*" ? undefined : rule, value: blocked, until });
    byKey.set(key, list);
    size++;
  }
  return { loadedAt, byKey, v4Lengths: [...v4], v6Lengths: [...v6], size };
}

function find(
  copy: Copy,
  identity: NetworkIdentity,
  rules: readonly string[],
  at: number,
): NetworkBlockHit | undefined {
  if (copy.size === 0) return undefined;
  const keys: [NetworkBlockKind, string][] = [];
  if (identity.ip) {
    const full = groupAddress(identity.ip, { ipv4PrefixLength: 32, ipv6PrefixLength: 128 });
    if (full !== undefined) {
      const isV6 = full.includes(":");
      for (const length of isV6 ? copy.v6Lengths : copy.v4Lengths) {
        const network = groupAddress(
          identity.ip,
          isV6
            ? { ipv4PrefixLength: 32, ipv6PrefixLength: length }
            : { ipv4PrefixLength: length, ipv6PrefixLength: 128 },
        );
        if (network !== undefined) keys.push(["ip", network]);
      }
    }
  }
  if (identity.country) keys.push(["country", identity.country.toUpperCase()]);
  if (identity.asn !== undefined) keys.push(["asn", String(identity.asn)]);
  for (const [kind, value] of keys) {
    for (const entry of copy.byKey.get(`${kind}|${value}`) ?? []) {
      if (entry.until <= at) continue;
      if (entry.rule !== undefined && !rules.includes(entry.rule)) continue;
      const hit: NetworkBlockHit = { by: kind, value: entry.value };
      if (entry.rule !== undefined) hit.rule = entry.rule;
      if (Number.isFinite(entry.until)) hit.until = Math.round(entry.until);
      return hit;
    }
  }
  return undefined;
}
