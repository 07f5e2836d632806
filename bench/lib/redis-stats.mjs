// @ts-check
// What Redis did: INFO commandstats and INFO cpu deltas, MEMORY USAGE of a contender's keys.
import { Redis } from "ioredis";

/** Our own probes; never counted as a contender's work. */
const PROBES = new Set(["info", "memory", "scan", "ping", "config", "client", "hello", "command"]);
/** Top-level commands that carry a script: one per store call. */
const SCRIPT_CALLS = new Set(["evalsha", "eval", "evalsha_ro", "eval_ro", "script|load"]);

/**
 * @typedef {object} RedisSnapshot
 * @property {Map<string, { calls: number, usec: number }>} commands
 * @property {number} cpuSeconds used_cpu_user + used_cpu_sys of redis-server
 */

/** @param {string} url */
export function connectStats(url) {
  const redis = new Redis(url, { lazyConnect: false, maxRetriesPerRequest: 1 });

  /** @returns {Promise<RedisSnapshot>} */
  async function snapshot() {
    const [stats, cpu] = await Promise.all([redis.info("commandstats"), redis.info("cpu")]);
    /** @type {Map<string, { calls: number, usec: number }>} */
    const commands = new Map();
    for (const match of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
      commands.set(String(match[1]), { calls: Number(match[2]), usec: Number(match[3]) });
    }
    const field = (/** @type {string} */ name) =>
      Number(new RegExp(`^${name}:([\\d.]+)`, "m").exec(cpu)?.[1] ?? 0);
    return { commands, cpuSeconds: field("used_cpu_user") + field("used_cpu_sys") };
  }

  /**
   * Per-decision work between two snapshots.
   * - storeCalls: script calls (EVALSHA, EVAL, SCRIPT LOAD): Redis round trips of the limiter.
   * - commands: every command Redis executed for it, the script calls and the commands inside.
   * - scriptUsec: Redis's own time in those script calls (includes the commands they run).
   * - cpuUsec: redis-server process CPU, networking included.
   * @param {RedisSnapshot} before
   * @param {RedisSnapshot} after
   * @param {number} decisions
   */
  function perDecision(before, after, decisions) {
    let storeCalls = 0;
    let commands = 0;
    let scriptUsec = 0;
    /** @type {Record<string, number>} */
    const byCommand = {};
    for (const [name, now] of after.commands) {
      if (PROBES.has(name)) continue;
      const was = before.commands.get(name) ?? { calls: 0, usec: 0 };
      const calls = now.calls - was.calls;
      if (calls <= 0) continue;
      commands += calls;
      byCommand[name] = calls / decisions;
      if (SCRIPT_CALLS.has(name)) {
        storeCalls += calls;
        scriptUsec += now.usec - was.usec;
      }
    }
    return {
      storeCalls: storeCalls / decisions,
      commands: commands / decisions,
      scriptUsec: scriptUsec / decisions,
      cpuUsec: ((after.cpuSeconds - before.cpuSeconds) * 1e6) / decisions,
      byCommand,
    };
  }

  /**
   * Total MEMORY USAGE (bytes) of the keys matching `pattern`, and how many there are.
   * @param {string} pattern
   */
  async function memoryOf(pattern) {
    let cursor = "0";
    let bytes = 0;
    let keys = 0;
    do {
      const [next, batch] = await redis.scan(cursor, "MATCH", pattern, "COUNT", 1000);
      cursor = next;
      for (const key of batch) {
        bytes += Number(await redis.call("MEMORY", "USAGE", key, "SAMPLES", "0"));
        keys++;
      }
    } while (cursor !== "0");
    return { bytes, keys };
  }

  return { snapshot, perDecision, memoryOf, close: () => redis.quit().then(() => {}) };
}
