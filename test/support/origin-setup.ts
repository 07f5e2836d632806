// Starts the local origin the proxy forwards to (ORIGIN_URL in the worker's bindings) for the
// worker project; tests reach it directly with inject("originUrl"). See origin-server.mjs.
import type { TestProject } from "vitest/node";
import { startOrigin } from "../../tools/origin-server.mjs";

export default async function setup(project: TestProject) {
  const origin = await startOrigin();
  project.provide("originUrl", origin.url);
  return () => origin.close();
}

declare module "vitest" {
  export interface ProvidedContext {
    originUrl: string;
  }
}
