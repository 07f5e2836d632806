import { cloudflareTest } from "@cloudflare/vitest-pool-workers";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: "node",
          include: ["test/node/**/*.test.ts"],
          environment: "node",
          globalSetup: ["./test/support/global-setup.ts"],
        },
      },
      {
        // The worker runs in real workerd; its store is the bridge the global setup started.
        plugins: [
          cloudflareTest(({ inject }) => ({
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: {
              bindings: {
                UPSTASH_REDIS_REST_URL: inject<string>("bridgeUrl"),
                UPSTASH_REDIS_REST_TOKEN: inject<string>("bridgeToken"),
                LIMITER_TOKEN: "test-limiter-token",
                ORIGIN_URL: inject<string>("originUrl"),
              },
            },
          })),
        ],
        test: {
          name: "worker",
          include: ["test/worker/**/*.test.ts"],
          globalSetup: [
            "./test/support/global-setup.ts",
            "./test/support/fault-setup.ts",
            "./test/support/origin-setup.ts",
          ],
        },
      },
    ],
  },
});
