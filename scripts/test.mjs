// @ts-check
// npm test: a Redis for the tests (REDIS_URL, the default one, or a private redis-server),
// then `vitest run` with any extra arguments (`npm test -- --project node`). Exits with
// vitest's code. Node only.
import "./lib/node-version.mjs";
import { spawn } from "node:child_process";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { ensureRedis } from "../tools/redis.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const log = (/** @type {string} */ message) => console.error(`[npm test] ${message}`);

/** @type {import("../tools/redis.mjs").RedisHandle} */
let redis;
try {
  redis = await ensureRedis({ log });
} catch (error) {
  log(`cannot run the tests without Redis.\n${error instanceof Error ? error.message : error}`);
  process.exit(1);
}
process.env.REDIS_URL = redis.url;

const vitest = spawn(
  path.join(root, "node_modules", ".bin", "vitest"),
  ["run", ...process.argv.slice(2)],
  {
    cwd: root,
    stdio: "inherit",
    env: process.env,
  },
);

// Ctrl-C reaches vitest through the terminal (same process group); other signals sent to this
// process are forwarded. Either way, wait for vitest to exit before stopping Redis.
for (const signal of /** @type {const} */ (["SIGINT", "SIGTERM", "SIGHUP"])) {
  process.on(signal, () => {
    if (signal !== "SIGINT" || !process.stdin.isTTY) vitest.kill(signal);
  });
}

/** @type {number} */
const code = await new Promise((resolve) => {
  vitest.once("error", (error) => {
    log(`could not run vitest: ${error.message} (run \`npm ci\` first?)`);
    resolve(1);
  });
  vitest.once("exit", (exitCode, signal) =>
    resolve(exitCode ?? (signal ? 128 + (os.constants.signals[signal] ?? 0) : 1)),
  );
});
await redis.stop();
process.exit(code);
