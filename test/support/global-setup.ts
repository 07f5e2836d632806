// Starts one bridge for a vitest project and hands its address to the tests (inject("bridgeUrl")).
// The Redis behind it is real and shared: tests use their own key prefixes, never FLUSH*.
import { randomUUID } from "node:crypto";
import type { TestProject } from "vitest/node";
import { startBridge } from "../../bridge/server.mjs";

export default async function setup(project: TestProject) {
  const redisUrl = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
  const token = `test-${randomUUID()}`;
  const bridge = await startBridge({ port: 0, token, redisUrl });
  project.provide("bridgeUrl", bridge.url);
  project.provide("bridgeToken", token);
  project.provide("redisUrl", redisUrl);
  // Two more bridges, on the same Redis's databases 1 and 2: the shards tests' other stores
  // (separate key spaces, as separate databases would be).
  const shardBridges = await Promise.all(
    [1, 2].map((db) => {
      const url = new URL(redisUrl);
      url.pathname = `/${db}`;
      return startBridge({ port: 0, token, redisUrl: url.toString() });
    }),
  );
  project.provide(
    "shardBridgeUrls",
    shardBridges.map((shard) => shard.url),
  );
  return async () => {
    await bridge.close();
    await Promise.all(shardBridges.map((shard) => shard.close()));
  };
}
