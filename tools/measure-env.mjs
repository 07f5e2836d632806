// @ts-check
// What the measurement scripts share: a private redis-server (INFO commandstats of a shared one
// would count everyone's traffic), redis-cli on it, optionally the project's REST bridge in front,
// and src/ bundled for Node (tsconfig.node.json cannot follow src/'s extensionless imports).
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { startBridge } from "../bridge/server.mjs";
import { startPrivateRedis } from "./redis.mjs";

export const ROOT = fileURLToPath(new URL("../", import.meta.url));

/**
 * @param {{ bridge?: boolean, token?: string }} [options]
 */
export async function measureEnv({ bridge: withBridge = true, token = "measure" } = {}) {
  const redis = await startPrivateRedis();
  const port = new URL(redis.url).port;
  const dir = mkdtempSync(join(tmpdir(), "edge-limiter-measure-"));
  /** redis-cli on the private Redis; its stdout. @param {(string | number)[]} args */
  const cli = (...args) =>
    execFileSync("redis-cli", ["-p", port, ...args.map(String)], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    });
  const bridge = withBridge
    ? await startBridge({ port: 0, token, redisUrl: redis.url })
    : undefined;
  return {
    redis,
    port,
    cli,
    bridge,
    token,
    /**
     * src/ bundled as the worker bundles it, imported. @param {string} contents an entry module
     * @returns {Promise<any>}
     */
    bundle: (contents) => bundleSource(contents, dir),
    async close() {
      await bridge?.close();
      await redis.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * src/ bundled as the worker bundles it (tsconfig.node.json cannot follow src/'s extensionless
 * imports), written into `dir` and imported.
 * @param {string} contents an entry module, e.g. `export * from "./src/index";`
 * @param {string} dir
 * @returns {Promise<any>}
 */
export async function bundleSource(contents, dir) {
  const outfile = join(dir, `bundle-${Math.random().toString(36).slice(2)}.mjs`);
  await build({
    stdin: { contents, resolveDir: ROOT, loader: "ts" },
    bundle: true,
    format: "esm",
    platform: "neutral",
    mainFields: ["module", "main"],
    conditions: ["worker", "import"],
    outfile,
    logLevel: "error",
  });
  return import(outfile);
}
