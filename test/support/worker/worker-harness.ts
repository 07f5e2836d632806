/// <reference path="../provided.d.ts" />
import { createExecutionContext, env, waitOnExecutionContext } from "cloudflare:test";
import { inject } from "vitest";
import type { Env } from "../../../worker/env";
import app from "../../../worker/worker";

declare module "vitest" {
  export interface ProvidedContext {
    /** test/support/origin-setup.ts */
    originUrl: string;
  }
}

/** The worker's bindings as vitest.config.ts sets them. */
export const baseEnv = env as unknown as Env;

/** The local origin (tools/origin-server.mjs). */
export const originUrl = (): string => inject("originUrl");

/**
 * Calls the deployed worker's app with its real bindings but a given LIMITER_CONFIG (and any
 * other override): each test file runs its own rules under its own Redis prefix.
 */
export function workerWith(overrides: Partial<Env>) {
  const bindings = { ...baseEnv, ...overrides };
  return (input: string, init?: RequestInit): Promise<Response> =>
    Promise.resolve(
      app.fetch(
        new Request(new URL(input, "https://limited.test"), init),
        bindings,
        createExecutionContext(),
      ),
    );
}

/** How many requests the origin has seen for `path`. */
export async function originCount(path: string): Promise<number> {
  const res = await fetch(`${originUrl()}/__count?path=${encodeURIComponent(path)}`);
  return (await res.json<{ count: number }>()).count;
}

/** The bearer token vitest.config.ts gives the worker (LIMITER_TOKEN). */
export const TEST_LIMITER_TOKEN = "test-limiter-token";

/** The admin routes' token vitest.config.ts gives the worker (LIMITER_ADMIN_TOKEN). */
export const TEST_ADMIN_TOKEN = "test-admin-token";

/** A POST with a JSON body and a bearer token (null: none). */
function jsonPost(body: unknown, token: string | null): RequestInit {
  return {
    method: "POST",
    headers: {
      "Content-Type": "application/json",
      ...(token === null ? {} : { Authorization: `Bearer ${token}` }),
    },
    body: JSON.stringify(body),
  };
}

/** The /check routes a caller POSTs a JSON body to: decisions, then the admin token's. */
export type CheckPath =
  | "/check"
  | "/check/peek"
  | "/check/release"
  | "/check/settle"
  | "/check/reset"
  | "/check/override"
  | "/check/block"
  | "/check/unblock";

const DECISION_PATHS: readonly CheckPath[] = [
  "/check",
  "/check/peek",
  "/check/release",
  "/check/settle",
];

export interface PostCheckOptions {
  /** @default "/check" */
  path?: CheckPath | undefined;
  /**
   * The bearer token, null for none.
   * @default LIMITER_TOKEN's for /check, /check/peek, /check/release and /check/settle, else the
   *   admin token
   */
  token?: string | null | undefined;
}

/**
 * POSTs `body` as JSON to /check (or another /check route) of a worker of workerWith, or of the
 * worker with these bindings through callWorker (its waitUntil work awaited before it returns).
 */
export function postCheck(
  target: ReturnType<typeof workerWith> | Env,
  body: unknown,
  { path = "/check", token }: PostCheckOptions = {},
): Promise<Response> {
  const fallback = DECISION_PATHS.includes(path) ? TEST_LIMITER_TOKEN : TEST_ADMIN_TOKEN;
  const init = jsonPost(body, token === undefined ? fallback : token);
  return typeof target === "function" ? target(path, init) : callWorker(target, path, init);
}

/** One request to the worker with these bindings, its waitUntil work awaited before it returns. */
export async function callWorker(
  bindings: Env,
  path: string,
  init?: RequestInit,
): Promise<Response> {
  const ctx = createExecutionContext();
  const res = await app.fetch(
    new Request(new URL(path, "https://limited.test"), init),
    bindings,
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return res;
}
