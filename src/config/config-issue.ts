import type { BaseIssue } from "valibot";
import { invalid } from "./validation";

/**
 * The first schema issue as `{ field, detail }`, the field spelled as in the config
 * (`rules[2].window`, `clientIp.ipv6PrefixLength`), so a 503 names exactly what to fix.
 * An unknown key is reported at its own path with "unknown field".
 */
export function firstIssue(
  issues: readonly BaseIssue<unknown>[],
  root: string,
): { ok: false; field: string; detail: string } {
  const issue = issues[0];
  if (!issue) return invalid(root, "is invalid");
  let field = "";
  for (const item of issue.path ?? []) {
    const key = item.key;
    if (typeof key === "number") field += `[${key}]`;
    else field += field === "" ? String(key) : `.${String(key)}`;
  }
  // strictObject reports an unknown key as "expected never", and a missing one with the message
  // of the schema it fails (e.g. "must be an object" for a missing rule name): say both plainly.
  const missing = issue.input === undefined && (issue.path?.length ?? 0) > 0;
  const detail =
    issue.expected === "never" ? "unknown field" : missing ? "is required" : issue.message;
  return invalid(field === "" ? root : field, detail);
}
