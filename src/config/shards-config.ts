/**
 * LIMITER_CONFIG's `shards` and `reshard` (docs/shards.md): the databases client keys are placed
 * over, each named by the suffix of its bindings (`UPSTASH_REDIS_REST_URL_<NAME>`,
 * `UPSTASH_REDIS_REST_TOKEN_<NAME>`; `""` the unsuffixed pair, so the first database stays a
 * shard), and a change of that list at an instant, kept exact through one longest window.
 */
import * as v from "valibot";
import { plainObject } from "./schema-parts";

/** Most shards a deployment places keys over. */
const MAX_SHARDS = 16;

const SUFFIX = /^[A-Z0-9_]{1,32}$/;

const shardName = v.pipe(
  v.string('must be a binding suffix (A-Z, 0-9, _) or "" for the unsuffixed bindings'),
  v.check(
    (name) => name === "" || SUFFIX.test(name),
    'must be "" or 1-32 characters of A-Z, 0-9 and _',
  ),
  // The shards' order matters (the first holds what is per deployment), and an object keeps
  // integer-like keys apart from the others' order: "2" would move before "".
  v.check((name) => !/^\d+$/.test(name), "must not be all digits (write S2, not 2)"),
);

const shardList = v.pipe(
  v.array(shardName, "must be an array of shard names"),
  v.minLength(1, "must name at least one shard"),
  v.maxLength(MAX_SHARDS, `must name at most ${MAX_SHARDS} shards`),
  v.check(
    (names) => new Set(names).size === names.length,
    "must not name a shard twice (each is one database)",
  ),
);

/** `shards`: the shard names, in order (the first holds what is per deployment). */
export const shardsSchema = shardList;

/** `reshard`: the shards before the change, and the instant it takes effect. */
export const reshardSchema = plainObject(
  {
    /** The shard names in force before `at` (their bindings must still be set). */
    from: shardList,
    /** The instant the new `shards` take effect: an ISO 8601 date and time. */
    at: v.pipe(
      v.string("must be an ISO 8601 instant, e.g. 2026-12-10T12:00:00Z"),
      v.check(
        (at) => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}/.test(at) && Number.isFinite(Date.parse(at)),
        "must be an ISO 8601 instant, e.g. 2026-12-10T12:00:00Z",
      ),
      v.transform((at) => Date.parse(at)),
    ),
  },
  'must be an object: { "from": [shard names], "at": "<ISO instant>" }',
);
