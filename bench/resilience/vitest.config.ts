// `npx vitest run --config bench/resilience/vitest.config.ts`: the failure-handling figures
// (docs/failure-modes.md). Runs in Node for a precise clock (workerd's only moves on I/O), with
// the real bridge and Redis the tests use, and the fault server in-process.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["bench/resilience/*.figures.ts"],
    environment: "node",
    globalSetup: ["./test/support/global-setup.ts"],
    testTimeout: 120_000,
  },
});
