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
  // strictObject reports an unknown key as "expected never"; say it plainly.
  const detail = issue.expected === "never" ? "unknown field" : issue.message;
  return invalid(field === "" ? root : field, detail);
}
