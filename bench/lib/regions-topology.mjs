// @ts-check
// Three regions on one machine (docs/regions.md): three private redis-servers, each behind the
// project's REST bridge; home's database lives in "eu", and "us" and "ap" each have a database of
// their own. Every link a worker uses is a delay proxy (latency-proxy.mjs), so each round trip
// pays its distance: home is `farMs` from us and ap and `nearMs` from eu; each region's own
// store is `nearMs` away. Used by the 3-region test (test/e2e/regions.test.ts) and the regions
// benchmark (bench/lib/regions-bench.mjs).
import { startBridge } from "../../bridge/server.mjs";
import { startPrivateRedis } from "../../scripts/lib/redis.mjs";
import { startLatencyProxy } from "./latency-proxy.mjs";

const REGIONS = /** @type {const} */ (["eu", "us", "ap"]);
/** Where home's database is. */
const HOME_REGION = "eu";

/**
 * @param {{ farMs?: number, nearMs?: number, token?: string }} [options]
 */
export async function startRegions({ farMs = 80, nearMs = 5, token = "regions" } = {}) {
  /** @type {Awaited<ReturnType<typeof startPrivateRedis>>[]} */
  const servers = [];
  /** @type {Awaited<ReturnType<typeof startBridge>>[]} */
  const bridges = [];
  /** @type {Awaited<ReturnType<typeof startLatencyProxy>>[]} */
  const proxies = [];
  try {
    /** @type {Record<string, { redisUrl: string, bridgeUrl: string }>} */
    const databases = {};
    for (const region of REGIONS) {
      const redis = await startPrivateRedis();
      servers.push(redis);
      const bridge = await startBridge({ port: 0, token, redisUrl: redis.url });
      bridges.push(bridge);
      databases[region] = { redisUrl: redis.url, bridgeUrl: bridge.url };
    }
    const proxy = async (/** @type {string} */ target, /** @type {number} */ delayMs) => {
      const started = await startLatencyProxy(target, delayMs);
      proxies.push(started);
      return started;
    };
    /**
     * Per worker region, a link to every database: its own region's near, the others far
     * (`home` is the link to eu's, `store` to the region's own outside eu).
     * @type {Record<string, Record<string, Awaited<ReturnType<typeof startLatencyProxy>>> & { home: Awaited<ReturnType<typeof startLatencyProxy>>, store?: Awaited<ReturnType<typeof startLatencyProxy>> }>}
     */
    const links = {};
    for (const from of REGIONS) {
      /** @type {Record<string, Awaited<ReturnType<typeof startLatencyProxy>>>} */
      const reach = {};
      for (const to of REGIONS) {
        const database = /** @type {{ bridgeUrl: string }} */ (databases[to]);
        reach[to] = await proxy(database.bridgeUrl, from === to ? nearMs : farMs);
      }
      const home = /** @type {Awaited<ReturnType<typeof startLatencyProxy>>} */ (
        reach[HOME_REGION]
      );
      links[from] = { ...reach, home, ...(from === HOME_REGION ? {} : { store: reach[from] }) };
    }
    return {
      token,
      databases,
      links,
      /** The LIMITER_CONFIG `regions` of this topology (store suffixes US and AP). */
      regionsConfig: {
        us: { store: "US", continents: ["NA"] },
        ap: { store: "AP", continents: ["AS"] },
      },
      /** A worker's bindings in `region`: home through its link, the region's store through its. */
      bindings(/** @type {string} */ region) {
        const link = links[region];
        if (!link) throw new Error(`no region ${region}`);
        /** @type {Record<string, string>} */
        const env = {
          UPSTASH_REDIS_REST_URL: link.home.url,
          UPSTASH_REDIS_REST_TOKEN: token,
          LIMITER_REGION: region === HOME_REGION ? "" : region,
        };
        for (const other of REGIONS) {
          if (other === HOME_REGION) continue;
          const suffix = other.toUpperCase();
          // A deployment binds every region's store; a worker only ever uses its own region's.
          env[`UPSTASH_REDIS_REST_URL_${suffix}`] = /** @type {{ url: string }} */ (
            link[other]
          ).url;
          env[`UPSTASH_REDIS_REST_TOKEN_${suffix}`] = token;
        }
        return env;
      },
      /** The anchor's databases from `region`, nearest first (MultiRegionRatelimit's list). */
      anchorUrls(/** @type {string} */ region) {
        const link = links[region];
        if (!link) throw new Error(`no region ${region}`);
        return [region, ...REGIONS.filter((other) => other !== region)]
          .map((to) => /** @type {{ url: string }} */ (link[to]).url)
          .join(",");
      },
      async close() {
        for (const started of proxies) await started.close();
        for (const bridge of bridges) await bridge.close();
        for (const redis of servers) await redis.stop();
      },
    };
  } catch (error) {
    for (const started of proxies) await started.close();
    for (const bridge of bridges) await bridge.close();
    for (const redis of servers) await redis.stop();
    throw error;
  }
}
