// @ts-check
// Commands the bridge will not forward. Every request shares one Redis connection, so a command
// that changes that connection's state (database, user, protocol, transaction, subscriber or
// monitor mode) would leak into other callers' commands, and one that blocks would stall them.
// Upstash's REST API refuses the same families.
//
// This guards against mistakes, not attackers: a script runs any command (EVAL "return
// redis.call('FLUSHALL')" 0), and a script that never ends stalls Redis for everyone (until
// SCRIPT KILL). The bridge is a local development tool whose boundary is its token (docs/local-bridge.md); parsing Lua to police scripts would only pretend otherwise.

const CHANGES_CONNECTION = new Set([
  "select",
  "auth",
  "hello",
  "client",
  "quit",
  "reset",
  "readonly",
  "readwrite",
  "multi",
  "exec",
  "discard",
  "watch",
  "unwatch",
  "subscribe",
  "psubscribe",
  "ssubscribe",
  "unsubscribe",
  "punsubscribe",
  "sunsubscribe",
  "monitor",
  "sync",
  "psync",
  "replconf",
]);

const BLOCKS = new Set([
  "blpop",
  "brpop",
  "blmove",
  "brpoplpush",
  "bzpopmin",
  "bzpopmax",
  "blmpop",
  "bzmpop",
  "wait",
  "waitaof",
]);

// Not about the connection, but about everyone else on the server: they stall or stop it
// (DEBUG SLEEP, SHUTDOWN, FAILOVER, SAVE), wipe, swap or move every caller's keys (FLUSHALL,
// FLUSHDB, SWAPDB, MIGRATE, REPLICAOF / SLAVEOF, which also makes it read-only), or change the
// server itself: its settings and files (CONFIG, all of it: CONFIG GET shows requirepass), its
// code (MODULE) and its users (ACL). A dev bridge usually fronts a Redis that other tools and tests
// share; tests delete their own keys instead. (bench/ and scripts/ read INFO and reset stats on a
// private redis-server with redis-cli or ioredis, not through the bridge.)
const AFFECTS_EVERYONE = new Set([
  "debug",
  "shutdown",
  "failover",
  "flushall",
  "flushdb",
  "swapdb",
  "migrate",
  "replicaof",
  "slaveof",
  "config",
  "module",
  "acl",
  "save",
  "bgsave",
  "bgrewriteaof",
]);

/**
 * Why the command is refused, as a Redis-style error text, or null if it may run.
 * @param {readonly string[]} command name first, then arguments
 * @returns {string | null}
 */
export function refusal(command) {
  const name = (command[0] ?? "").toLowerCase();
  const shown = name.toUpperCase();
  if (CHANGES_CONNECTION.has(name)) {
    return `ERR ${shown} is not allowed through the REST bridge: it would change the shared Redis connection`;
  }
  if (
    BLOCKS.has(name) ||
    ((name === "xread" || name === "xreadgroup") && hasBlockOption(command))
  ) {
    return `ERR ${shown} is not allowed through the REST bridge: blocking commands would stall the shared Redis connection`;
  }
  if (AFFECTS_EVERYONE.has(name)) {
    return `ERR ${shown} is not allowed through the REST bridge: it would stall, stop, wipe or reconfigure a Redis other callers share`;
  }
  return null;
}

/** XREAD / XREADGROUP options come before STREAMS; a BLOCK among them makes the call blocking. */
/** @param {readonly string[]} command */
function hasBlockOption(command) {
  for (let i = 1; i < command.length; i++) {
    const word = command[i]?.toLowerCase();
    if (word === "streams") return false;
    if (word === "block") return true;
  }
  return false;
}
