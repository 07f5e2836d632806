// @ts-check
// `npm run bridge`: the Upstash-compatible REST bridge on its own.
// Env: BRIDGE_PORT (8079), BRIDGE_HOST (127.0.0.1), BRIDGE_TOKEN (dev-bridge-token),
// REDIS_URL (redis://127.0.0.1:6379), BRIDGE_MAX_COMMANDS_PER_SECOND (unset: no cap; set, billed
// commands a second as Upstash caps a database, excess requests waiting: command-throttle.mjs).

import { parseCommandCap } from "./command-throttle.mjs";
import { RedisUnavailableError, redactUrl } from "./resp-connection.mjs";
import { startBridge } from "./server.mjs";

const DEFAULT_TOKEN = "dev-bridge-token";

const env = process.env;
const host = env.BRIDGE_HOST || "127.0.0.1";
const redisUrl = env.REDIS_URL || "redis://127.0.0.1:6379";
const token = env.BRIDGE_TOKEN || DEFAULT_TOKEN;
const port = Number(env.BRIDGE_PORT || 8079);

if (!Number.isInteger(port) || port < 0 || port > 65535) {
  fail(`BRIDGE_PORT must be a port number (0-65535), got ${JSON.stringify(env.BRIDGE_PORT)}`);
}
/** @type {number | undefined} */
let maxCommandsPerSecond;
try {
  maxCommandsPerSecond = parseCommandCap(env.BRIDGE_MAX_COMMANDS_PER_SECOND);
} catch (error) {
  fail(error instanceof Error ? error.message : String(error));
}

/** @type {import("./server.mjs").Bridge} */
let bridge;
try {
  bridge = await startBridge({
    host,
    port,
    token,
    redisUrl,
    ...(maxCommandsPerSecond === undefined ? {} : { maxCommandsPerSecond }),
    log: (line) => console.error(`bridge: ${line}`),
  });
} catch (error) {
  if (error instanceof RedisUnavailableError) {
    fail(
      `${error.message}. Start one with \`redis-server\`, or set REDIS_URL to a running Redis (e.g. REDIS_URL=redis://127.0.0.1:6380).`,
    );
  }
  const message = error instanceof Error ? error.message : String(error);
  fail(/already in use/.test(message) ? `${message}; set BRIDGE_PORT to a free port` : message);
}

console.log(`Upstash REST bridge on ${bridge.url} -> Redis ${redactUrl(redisUrl)}`);
console.log(
  maxCommandsPerSecond === undefined
    ? "command cap: none (set BRIDGE_MAX_COMMANDS_PER_SECOND to throttle as Upstash does)"
    : `command cap: ${maxCommandsPerSecond} billed commands/s (burst ${maxCommandsPerSecond}); excess requests wait`,
);
console.log(
  token === DEFAULT_TOKEN
    ? `token: ${DEFAULT_TOKEN} (the default; set BRIDGE_TOKEN to change it)`
    : "token: from BRIDGE_TOKEN",
);

let stopping = false;
/** @param {NodeJS.Signals} signal */
async function stop(signal) {
  if (stopping) process.exit(1); // a second Ctrl-C: leave now
  stopping = true;
  console.error(`bridge: ${signal}, shutting down`);
  await bridge.close();
  process.exit(0);
}
process.on("SIGINT", stop);
process.on("SIGTERM", stop);

/** @param {string} message @returns {never} */
function fail(message) {
  console.error(`bridge: ${message}`);
  process.exit(1);
}
