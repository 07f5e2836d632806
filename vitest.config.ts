import { fileURLToPath } from "node:url";
import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    // A green run prints a line per file and the summary. Console output (the worker's JSON log
    // lines, figures some tests print) is shown for failing tests only; `npm test --
    // --silent=false` shows all of it.
    silent: "passed-only",
    projects: [
      {
        test: {
          name: "node",
          include: ["test/node/**/*.test.ts"],
          environment: "node",
          // These tests spawn processes (redis-cli per command, wrangler, workerd) beside the
          // worker project's workerd on a 2-core machine: 5 s was seen to run out under that load.
          testTimeout: 30_000,
          globalSetup: ["./test/support/global-setup.ts"],
        },
      },
      {
        // The worker runs in real workerd; its store is the bridge the global setup started.
        plugins: [
          cloudflareTest(({ inject }) => ({
            // Off (the pool's default is on): workerd --verbose logs every rejected fetch as
            // "Uncaught (in promise) … Network connection lost" with a native stack, even one our
            // code catches (the failure tests reach a refused and a reset store on purpose). A
            // rejection nothing handles still fails the run: vitest reports it. WORKERD_VERBOSE=1
            // turns workerd's own logging back on.
            verbose: Boolean(process.env.WORKERD_VERBOSE),
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: {
              bindings: {
                UPSTASH_REDIS_REST_URL: inject<string>("bridgeUrl"),
                UPSTASH_REDIS_REST_TOKEN: inject<string>("bridgeToken"),
                LIMITER_TOKEN: "test-limiter-token",
                LIMITER_ADMIN_TOKEN: "test-admin-token",
                ORIGIN_URL: inject<string>("originUrl"),
              },
            },
          })),
        ],
        // The example app imports the package by name: here, the source (package.json's
        // exports name dist/, which only `npm run build` writes). tsconfig.json's paths agree.
        resolve: {
          alias: { "edge-limiter": fileURLToPath(new URL("./src/index.ts", import.meta.url)) },
        },
        test: {
          name: "worker",
          include: ["test/worker/**/*.test.ts", "test/src/**/*.test.ts"],
          // As the node project's: on a shared 2-core machine a test of a few real round trips
          // was seen to pass 5 s while another job ran beside the suite.
          testTimeout: 30_000,
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
