/**
 * Model-based runs: `numRuns` random command sequences from `seed`, each on a fresh world (new
 * isolates, keys and prefix) over the shared private stores; or one kept sequence, replayed.
 * Returns fast-check's verdict and the figures the fuzz prints (operations, the violated
 * property, the shrunk sequence as the steps' text, ready to keep).
 */
import fc from "fast-check";
import { parseStep, steps } from "./commands";
import type { Feature } from "./features";
import { Violation } from "./reference";
import type { ModelStore } from "./stores";
import { type RunConfig, World } from "./world";

export interface ModelRunOptions {
  seed: number;
  numRuns: number;
  maxCommands: number;
  features: ReadonlySet<Feature>;
}

export interface ModelRunReport {
  seed: number;
  numRuns: number;
  operations: number;
  failed: boolean;
  property?: string | undefined;
  message?: string | undefined;
  /** The shrunk failing run: its config and steps, as model/kept-seeds.json keeps them. */
  config?: RunConfig | undefined;
  steps?: string[] | undefined;
}

/** A sequence kept from a failing seed (model/kept-seeds.json). */
export interface KeptCase {
  seed: number;
  config: RunConfig;
  steps: string[];
}

async function runOnce(
  stores: readonly ModelStore[],
  cfg: RunConfig,
  features: ReadonlySet<Feature>,
  commands: Iterable<fc.AsyncCommand<World, World, false>>,
  count: (operations: number) => void,
): Promise<void> {
  const world = new World(stores, cfg, features);
  try {
    await fc.asyncModelRun(() => ({ model: world, real: world }), commands);
  } finally {
    count(world.ref.operations);
    await world.close();
  }
}

function failure(error: unknown): Pick<ModelRunReport, "property" | "message"> {
  return {
    property: error instanceof Violation ? error.property : "error",
    message: error instanceof Error ? error.message : String(error),
  };
}

export async function runModel(
  stores: readonly ModelStore[],
  options: ModelRunOptions,
): Promise<ModelRunReport> {
  let operations = 0;
  const config: fc.Arbitrary<RunConfig> = fc.record({
    reshard: options.features.has("reshard") ? fc.boolean() : fc.constant(false),
    atOffset: fc.integer({ min: 1_000, max: 20_000 }),
    lateRedeployMs: options.features.has("reshard-premise")
      ? fc.constantFrom(0, 1_000, 3_000)
      : fc.constant(0),
  });
  const property = fc.asyncProperty(
    config,
    fc.commands(steps(options.features), { maxCommands: options.maxCommands, size: "max" }),
    async (cfg, commands) => {
      await runOnce(stores, cfg, options.features, commands, (n) => {
        operations += n;
      });
    },
  );
  const out = await fc.check(property, { seed: options.seed, numRuns: options.numRuns });
  const report: ModelRunReport = {
    seed: options.seed,
    numRuns: out.numRuns,
    operations,
    failed: out.failed,
  };
  if (out.failed) {
    Object.assign(report, failure(out.errorInstance));
    if (out.counterexample) {
      const [cfg, commands] = out.counterexample;
      report.config = cfg;
      // The steps that ran (fast-check's own printing lists only those, too).
      report.steps = fc.stringify(commands) === "" ? [] : parseShown(commands);
    }
  }
  return report;
}

/** The steps a shrunk sequence ran, as text (its `toString` lists them, skipped ones left out). */
function parseShown(commands: Iterable<fc.AsyncCommand<World, World, false>>): string[] {
  const shown = String(commands).replace(/\s*\/\*replayPath=.*\*\/\s*$/, "");
  return shown === "" ? [] : shown.split(/,(?![^(]*\))/).map((s) => s.trim());
}

/** Replays a kept sequence on a fresh world: its verdict, as `runModel` gives it. */
export async function replayKept(
  stores: readonly ModelStore[],
  kept: KeptCase,
  features: ReadonlySet<Feature>,
): Promise<ModelRunReport> {
  const report: ModelRunReport = { seed: kept.seed, numRuns: 1, operations: 0, failed: false };
  try {
    await runOnce(stores, kept.config, features, kept.steps.map(parseStep), (n) => {
      report.operations += n;
    });
  } catch (error) {
    Object.assign(report, failure(error), { failed: true, config: kept.config, steps: kept.steps });
  }
  return report;
}
