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
  return async () => {
    await bridge.close();
  };
}
