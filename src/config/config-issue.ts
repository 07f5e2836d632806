import type { BaseIssue } from "valibot";
import { fieldsAt, unknownFieldDetail } from "./field-suggestion";
import { invalid } from "./validation";

/**
 * The first schema issue as `{ field, detail }`, the field spelled as in the config
 * (`rules[2].window`, `clientIp.ipv6PrefixLength`), so a 503 names exactly what to fix.
 * An unknown key is reported at its own path with "unknown field".
 */
export function firstIssue(
  issues: readonly BaseIssue<unknown>[],
  root: string,
  /** The schema that raised them: an unknown field is then told the known one it resembles. */
  schema?: unknown,
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
    issue.expected === "never"
      ? unknownField(issue, schema)
      : missing
        ? "is required"
        : issue.message;
  return invalid(field === "" ? root : field, detail);
}

/** "unknown field", and the known field at that place it is probably a typo of. */
function unknownField(issue: BaseIssue<unknown>, schema: unknown): string {
  const path = (issue.path ?? []).map((item) =>
    typeof item.key === "number" ? item.key : String(item.key),
  );
  const given = path.pop();
  if (schema === undefined || typeof given !== "string") return "unknown field";
  return unknownFieldDetail(given, fieldsAt(schema, path));
}
