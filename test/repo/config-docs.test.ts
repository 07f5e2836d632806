// docs/configuration.md ("every setting and its default") against the schema LIMITER_CONFIG is
// checked with (src/config/): every field it accepts has a row (or is named in its parent's row,
// for a setting whose guide holds the details), and no row names a field it refuses.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bundleSource } from "../../tools/measure-env.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const DOC = readFileSync(path.join(ROOT, "docs", "configuration.md"), "utf8");

interface SchemaNode {
  kind?: string;
  type?: string;
  entries?: Record<string, SchemaNode>;
  wrapped?: SchemaNode;
  options?: SchemaNode[];
  item?: SchemaNode;
  pipe?: SchemaNode[];
}

/** Every field path the schema accepts (`rules[].match.path`), objects and leaves alike. */
function acceptedPaths(schema: SchemaNode, prefix = "", out = new Map<string, boolean>()) {
  const visit = (node: SchemaNode | undefined, at: string) => {
    if (!node || typeof node !== "object") return;
    if (node.wrapped) visit(node.wrapped, at);
    for (const option of node.options ?? []) visit(option, at);
    if (node.type === "array" && node.item) visit(node.item, `${at}[]`);
    for (const step of node.pipe ?? [])
      if (step !== node && step.kind === "schema") visit(step, at);
    if ((node.type === "strict_object" || node.type === "object") && node.entries) {
      for (const [name, child] of Object.entries(node.entries)) {
        const field = at ? `${at}.${name}` : name;
        out.set(field, true);
        visit(child, field);
      }
    }
  };
  visit(schema, prefix);
  return [...out.keys()];
}

/**
 * The settings table's rows: the first cell's field paths, with its text. `a.b` / `c` is
 * `a.b` and `a.c`.
 */
function documentedRows(): { fields: string[]; text: string }[] {
  const rows: { fields: string[]; text: string }[] = [];
  for (const line of DOC.split("\n")) {
    const cells = line.split("|").map((cell) => cell.trim());
    const first = cells[1];
    if (!line.startsWith("| `") || !first) continue;
    const names = [...first.matchAll(/`([A-Za-z][\w.[\]]*)`/g)].map((m) => m[1] as string);
    if (names.length === 0 || !/^[a-z]/.test(names[0] as string)) continue;
    const parent = (names[0] as string).includes(".")
      ? (names[0] as string).slice(0, (names[0] as string).lastIndexOf(".") + 1)
      : "";
    const fields = names.map((name, i) => (i > 0 && !name.includes(".") ? parent + name : name));
    rows.push({ fields, text: line });
  }
  return rows;
}

let schema: SchemaNode;
let parseConfig: (input: unknown, options: { required: true }) => { ok: boolean };
const dir = mkdtempSync(path.join(tmpdir(), "edge-limiter-config-docs-"));
beforeAll(async () => {
  ({ configSchema: schema, parseConfig } = await bundleSource(
    `export { configSchema, parseConfig } from "./src/config/limiter-config";`,
    dir,
  ));
}, 60_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("docs/configuration.md", () => {
  it("has a row for every field LIMITER_CONFIG accepts (or names it in its parent's row)", () => {
    const accepted = acceptedPaths(schema);
    // The walk found the schema (a guard against a walk that finds nothing and passes).
    expect(accepted).toEqual(expect.arrayContaining(["rules", "rules[].match.path", "analytics"]));
    const rows = documentedRows();
    const documented = new Set(rows.flatMap((row) => row.fields));
    const missing = accepted.filter((field) => {
      if (documented.has(field)) return false;
      // A child named in its parent's row (`{"refreshMs": …}`, regions' fields in their guide).
      const parent = field.slice(0, field.lastIndexOf("."));
      const child = field.slice(field.lastIndexOf(".") + 1);
      const parentRow = rows.find((row) => row.fields.includes(parent));
      if (parentRow && new RegExp(`\\b${child}\\b`).test(parentRow.text)) return false;
      // An object whose every field has its own row.
      return !accepted.some(
        (other) =>
          (other.startsWith(`${field}.`) || other.startsWith(`${field}[].`)) &&
          documented.has(other),
      );
    });
    expect(missing).toEqual([]);
  });

  it("names no field LIMITER_CONFIG refuses", () => {
    const accepted = new Set(acceptedPaths(schema));
    const refused = documentedRows()
      .flatMap((row) => row.fields)
      .filter((field) => !accepted.has(field));
    expect(refused).toEqual([]);
  });
});

describe("docs/shards.md's wrangler.toml snippets", () => {
  // wrangler's own TOML reader: what `wrangler dev` and `wrangler deploy` parse.
  const wrangler = createRequire(path.join(ROOT, "package.json"))("wrangler") as {
    experimental_readRawConfig(args: { config: string }): {
      rawConfig: { vars?: Record<string, unknown> };
    };
  };
  const shipped = readFileSync(path.join(ROOT, "wrangler.toml"), "utf8");
  const snippets = [
    ...readFileSync(path.join(ROOT, "docs", "shards.md"), "utf8").matchAll(
      /```toml\n([\s\S]*?)```/g,
    ),
  ].map((m) => m[1] as string);

  it("are valid TOML in the shipped wrangler.toml, with a valid LIMITER_CONFIG", () => {
    expect(snippets.length).toBeGreaterThan(0);
    for (const [i, snippet] of snippets.entries()) {
      // A snippet that starts with [vars] replaces that section (the file's last); any other is
      // added to the file as it ships.
      const file = snippet.startsWith("[vars]")
        ? `${shipped.slice(0, shipped.indexOf("\n[vars]") + 1)}${snippet}`
        : `${shipped}\n${snippet}`;
      const at = path.join(dir, `wrangler-${i}.toml`);
      writeFileSync(at, file);
      const { rawConfig } = wrangler.experimental_readRawConfig({ config: at });
      expect(
        parseConfig(rawConfig.vars?.LIMITER_CONFIG, { required: true }),
        snippet,
      ).toMatchObject({
        ok: true,
      });
    }
  });
});
