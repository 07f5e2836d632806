/**
 * createLimiter's `store` and `reshard` read into the limiter's shards (docs/shards.md): which
 * clients there are, their names, the placement in force and, during a reshard, the one before.
 * Bad options are thrown at createLimiter time as RangeError / TypeError naming the field, as
 * the other option groups are (leases, regions): a limiter is never built on a store it cannot
 * place keys over.
 */
import type { ScriptClient } from "../../store/script-runner";

/** A change of the shards (LimiterOptions.reshard). */
export interface ReshardOptions {
  /**
   * The shard names keys were placed over before the change. Each must be a shard of `store`
   * or of `stores` (a shard being removed keeps its client until the transition ends).
   */
  from: readonly string[];
  /**
   * The instant of the change (unix ms or a Date). Every isolate must run the new options
   * before it: until it, keys are decided where `from` places them; from it, where `store`
   * does (docs/shards.md "Reshard").
   */
  at: number | Date;
  /**
   * Clients of the shards in `from` that are no longer in `store` (being removed): keys are
   * not placed on them, but their counts are read, and their keys decided there until `at`.
   * Keep them until the transition ends (`placement().transitionEndsBy`). @default none
   */
  stores?: Readonly<Record<string, ScriptClient>>;
}

/** What createLimiter's `store` takes: one client, or several shards (by position or name). */
export type StoreShards =
  | ScriptClient
  | readonly ScriptClient[]
  | Readonly<Record<string, ScriptClient>>;

/** The shards as the limiter keeps them. */
export interface ShardLayout {
  /** One client given as is (no shard names, no `shard` on decisions). */
  single: boolean;
  /** Every shard with a client: the placement's, then the removed ones of `reshard.stores`. */
  names: readonly string[];
  clients: readonly ScriptClient[];
  /** How many of `names` the placement in force uses (the first ones: `store`'s). */
  placed: number;
  reshard: { from: readonly string[]; at: number } | undefined;
}

const isClient = (value: unknown): value is ScriptClient =>
  typeof value === "object" &&
  value !== null &&
  typeof (value as ScriptClient).evalsha === "function" &&
  typeof (value as ScriptClient).eval === "function";

export function shardLayout(store: StoreShards, reshard: ReshardOptions | undefined): ShardLayout {
  if (isClient(store)) {
    if (reshard !== undefined) {
      throw new TypeError("reshard: needs shards (store as an array or a record of clients)");
    }
    return { single: true, names: [""], clients: [store], placed: 1, reshard: undefined };
  }
  if (typeof store !== "object" || store === null) {
    throw new TypeError("store must be a store client, an array of them or a record of them");
  }
  const entries: [string, unknown][] = Array.isArray(store)
    ? store.map((client, i) => [String(i), client])
    : Object.entries(store);
  if (entries.length === 0) throw new RangeError("store: name at least one shard");
  const names: string[] = [];
  const clients: ScriptClient[] = [];
  const add = (field: string, name: string, client: unknown) => {
    if (!isClient(client)) {
      throw new TypeError(`${field}: not a store client (evalsha and eval of @upstash/redis)`);
    }
    const same = clients.indexOf(client);
    if (same >= 0) {
      // One database under two names would count each key's requests in two places at once.
      throw new RangeError(`${field}: the same client as shard "${names[same]}"`);
    }
    names.push(name);
    clients.push(client);
  };
  for (const [name, client] of entries) {
    add(Array.isArray(store) ? `store[${name}]` : `store[${JSON.stringify(name)}]`, name, client);
  }
  const placed = names.length;
  if (reshard === undefined) return { single: false, names, clients, placed, reshard: undefined };
  if (typeof reshard !== "object" || reshard === null) {
    throw new TypeError("reshard must be { from, at }");
  }
  const at = reshard.at instanceof Date ? reshard.at.getTime() : reshard.at;
  if (typeof at !== "number" || !Number.isSafeInteger(at) || at < 0) {
    throw new RangeError("reshard.at must be a unix time in ms (an integer ≥ 0) or a valid Date");
  }
  const removed = reshard.stores ?? {};
  if (typeof removed !== "object" || removed === null || Array.isArray(removed)) {
    throw new TypeError("reshard.stores must be a record of clients by shard name");
  }
  for (const [name, client] of Object.entries(removed)) {
    if (names.includes(name)) {
      throw new RangeError(`reshard.stores[${JSON.stringify(name)}]: already a shard of store`);
    }
    add(`reshard.stores[${JSON.stringify(name)}]`, name, client);
  }
  const from = reshard.from;
  if (!Array.isArray(from) || from.length === 0) {
    throw new RangeError("reshard.from must name at least one shard");
  }
  for (const [i, name] of from.entries()) {
    if (typeof name !== "string" || !names.includes(name)) {
      throw new RangeError(
        `reshard.from[${i}]: ${JSON.stringify(name)} is not a shard of store or reshard.stores (a shard being removed keeps its client in reshard.stores until the transition ends)`,
      );
    }
    if (from.indexOf(name) !== i) {
      throw new RangeError(`reshard.from[${i}]: ${JSON.stringify(name)} is named twice`);
    }
  }
  if (from[0] !== names[0]) {
    // The first shard holds what is per deployment (network blocks, the analytics' counts),
    // read from store's first: another one there would start with none (every blocked network
    // let through, from the deploy on). A reshard moves client keys, not those.
    throw new RangeError(
      `reshard.from[0]: ${JSON.stringify(from[0])} is not store's first shard ${JSON.stringify(names[0])} (the first shard holds the network blocks and analytics; keep it first in both)`,
    );
  }
  for (const name of Object.keys(removed)) {
    if (!from.includes(name)) {
      throw new RangeError(
        `reshard.stores[${JSON.stringify(name)}]: not in reshard.from (only a shard being removed is kept there)`,
      );
    }
  }
  const current = names.slice(0, placed);
  if (from.length === placed && current.every((name) => from.includes(name))) {
    // It would move no key, yet be told to the shards and hold off the next reshard.
    throw new RangeError("reshard.from: the same shards as store: nothing to reshard");
  }
  return { single: false, names, clients, placed, reshard: { from: [...from], at } };
}
