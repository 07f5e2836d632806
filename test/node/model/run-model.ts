/**
 * One model-based run: `numRuns` random command sequences from `seed`, each on a fresh world
 * (new isolates, keys and prefix) over the shared private stores. Returns fast-check's verdict
 * and the figures the fuzz prints (operations, the violated property, the shrunk sequence).
 */
import fc from "fast-check";
import { steps } from "./commands";
import type { Feature } from "./features";
import { Violation } from "./reference";
import type { ModelStore } from "./stores";
import { type RunConfig, World } from "./world";

export interface ModelRunOptions {
  seed: number;
  numRuns: number;
  maxCommands: number;
  /** A counterexample's path, to replay it shrunk (fast-check's `path`). */
  path?: string | undefined;
  features: ReadonlySet<Feature>;
}

export interface ModelRunReport {
  seed: number;
  numRuns: number;
  operations: number;
  failed: boolean;
  property?: string | undefined;
  counterexample?: string | undefined;
  path?: string | undefined;
  message?: string | undefined;
}

export async function runModel(
  stores: readonly ModelStore[],
  options: ModelRunOptions,
): Promise<ModelRunReport> {
  let operations = 0;
  const config: fc.Arbitrary<RunConfig> = fc.record({
    reshard: options.features.has("reshard") ? fc.boolean() : fc.constant(false),
    atOffset: fc.integer({ min: 1_000, max: 20_000 }),
  });
  const property = fc.asyncProperty(
    config,
    fc.commands(steps(), { maxCommands: options.maxCommands, size: "max" }),
    async (cfg, commands) => {
      const world = new World(stores, cfg, options.features);
      try {
        await fc.asyncModelRun(() => ({ model: world, real: world }), commands);
      } finally {
        operations += world.ref.operations;
        await world.close();
      }
    },
  );
  const out = await fc.check(property, {
    seed: options.seed,
    numRuns: options.numRuns,
    ...(options.path === undefined ? {} : { path: options.path }),
  });
  const report: ModelRunReport = {
    seed: options.seed,
    numRuns: out.numRuns,
    operations,
    failed: out.failed,
  };
  if (out.failed) {
    const error = out.errorInstance;
    report.property = error instanceof Violation ? error.property : "error";
    report.path = out.counterexamplePath ?? undefined;
    report.counterexample = out.counterexample ? fc.stringify(out.counterexample) : undefined;
    report.message = error instanceof Error ? error.message : String(error);
  }
  return report;
}
