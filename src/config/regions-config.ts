/**
 * LIMITER_CONFIG's `regions` (docs/regions.md): each region's name, the suffix of its store's
 * bindings (`UPSTASH_REDIS_REST_URL_<SUFFIX>`, `UPSTASH_REDIS_REST_TOKEN_<SUFFIX>`), and the
 * Cloudflare colos and continents it serves. A region neither names is reached only by a worker
 * pinned to it (`LIMITER_REGION`).
 */
import * as v from "valibot";
import { plainObject } from "./schema-parts";

const NAME = /^[A-Za-z0-9_-]{1,32}$/;
const SUFFIX = /^[A-Z0-9_]{1,32}$/;
const CONTINENTS = ["AF", "AN", "AS", "EU", "NA", "OC", "SA"] as const;

const regionSchema = plainObject(
  {
    /** The suffix of its store's bindings: `UPSTASH_REDIS_REST_URL_<store>`. */
    store: v.pipe(
      v.string("must be a binding suffix (A-Z, 0-9, _)"),
      v.regex(SUFFIX, "must be 1-32 characters of A-Z, 0-9 and _"),
    ),
    /** Cloudflare continent codes (`request.cf.continent`) this region serves. @default [] */
    continents: v.optional(
      v.array(
        v.picklist(CONTINENTS, `must be one of ${CONTINENTS.join(", ")}`),
        "must be an array of continent codes",
      ),
      [],
    ),
    /** Cloudflare colos (`request.cf.colo`, IATA codes) this region serves; before continents. @default [] */
    colos: v.optional(
      v.array(
        v.pipe(
          v.string("must be a colo code"),
          v.regex(/^[A-Za-z]{3}$/, "must be a 3-letter colo code"),
          v.toUpperCase(),
        ),
        "must be an array of colo codes",
      ),
      [],
    ),
  },
  "must be an object with store, continents and/or colos",
);

export const regionsSchema = v.pipe(
  v.custom<Record<string, unknown>>(
    (input) => typeof input === "object" && input !== null && !Array.isArray(input),
    "must be an object of regions by name",
  ),
  v.record(
    v.pipe(v.string(), v.regex(NAME, "region names must be 1-32 characters of [A-Za-z0-9_-]")),
    regionSchema,
    "must be an object of regions by name",
  ),
  v.check((regions) => Object.keys(regions).length <= 32, "must name at most 32 regions"),
);

export type RegionsConfig = v.InferOutput<typeof regionsSchema>;

/** What a region is picked by: the request's `cf` (colo, continent). */
type RegionCf = { colo?: unknown; continent?: unknown } | undefined;

/**
 * Picks a request's region from its `cf`. `readsCf` false: the answer is the same for every
 * request (pinned, or no region names a colo or continent), so a caller need not read `cf`
 * (in workerd a getter into the runtime, on each read ~1 % of a /check decision's CPU).
 */
export type RegionPicker = ((cf: RegionCf) => string | undefined) & { readonly readsCf: boolean };

/**
 * A request's region: the one pinned by `LIMITER_REGION`, else the one serving its colo, else
 * its continent; undefined (home) for none.
 */
export function regionPicker(regions: RegionsConfig, pinned: string | undefined): RegionPicker {
  if (pinned) return Object.assign(() => pinned, { readsCf: false });
  const byColo = new Map<string, string>();
  const byContinent = new Map<string, string>();
  for (const [name, region] of Object.entries(regions)) {
    for (const colo of region.colos) if (!byColo.has(colo)) byColo.set(colo, name);
    for (const continent of region.continents) {
      if (!byContinent.has(continent)) byContinent.set(continent, name);
    }
  }
  if (byColo.size === 0 && byContinent.size === 0) {
    return Object.assign(() => undefined, { readsCf: false });
  }
  const pick = (cf: RegionCf) => {
    const colo = typeof cf?.colo === "string" ? byColo.get(cf.colo.toUpperCase()) : undefined;
    if (colo) return colo;
    return typeof cf?.continent === "string" ? byContinent.get(cf.continent) : undefined;
  };
  return Object.assign(pick, { readsCf: true });
}
