// Starts the fault server for the worker project and hands its address to the tests
// (inject("faultUrl"), inject("refusedUrl")). See fault-servers.ts.
import type { TestProject } from "vitest/node";
import { startFaultServer } from "../../tools/fault-servers.js";

export default async function setup(project: TestProject) {
  const faults = await startFaultServer();
  project.provide("faultUrl", faults.url);
  project.provide("refusedUrl", faults.refusedUrl);
  return () => faults.close();
}

declare module "vitest" {
  export interface ProvidedContext {
    faultUrl: string;
    refusedUrl: string;
  }
}
