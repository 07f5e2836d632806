import { fileURLToPath } from "node:url";
import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

/** A file of src/, by its path on this machine. */
function source(file: string): string {
  return fileURLToPath(new URL(`./src/${file}`, import.meta.url));
}

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
          // Which runtime runs a test is its place: Node runs the end-to-end tests, the bridge's and
          // the repository's checks, and any library test named *.node.test.ts (one that needs
          // processes or a real heap); workerd runs the rest of test/src/ and test/worker/.
          include: [
            "test/e2e/**/*.test.ts",
            "test/bridge/**/*.test.ts",
            "test/repo/**/*.test.ts",
            "test/**/*.node.test.ts",
          ],
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
        // The worker and the example app import the package by name: here, the source
        // (package.json's exports name dist/, which only `npm run build` writes). tsconfig.json's
        // paths agree. Whole names only: a plain "edge-limiter" alias also rewrites the start of
        // "edge-limiter/server" (to index.ts + "/server").
        resolve: {
          alias: [
            { find: /^edge-limiter$/, replacement: source("index.ts") },
            { find: /^edge-limiter\/server$/, replacement: source("server.ts") },
          ],
        },
        test: {
          name: "worker",
          include: [
            "test/src/**/*.test.ts",
            "test/worker/**/*.test.ts",
            "test/examples/**/*.test.ts",
          ],
          exclude: ["test/**/*.node.test.ts"],
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
