/**
 * The package's exports are the list docs/development.md ("Public API") gives, no more and no
 * fewer: a name added to src/index.ts without its line there (or dropped from one) fails here.
 * Read with the TypeScript checker, so types count as well as values, and a value is told from a
 * type by what the symbol is, not by how index.ts spells its export.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../../", import.meta.url));
const MAX_VALUES = 15;

interface Listed {
  name: string;
  kind: "value" | "type";
}

/** The table rows of the "Public API" section: | `name` | value or type | what it is |. */
function documented(): Listed[] {
  const text = readFileSync(`${root}docs/development.md`, "utf8");
  const start = text.indexOf("\n## Public API");
  expect(start, 'docs/development.md has a "## Public API" section').toBeGreaterThan(0);
  const end = text.indexOf("\n## ", start + 1);
  const section = text.slice(start, end < 0 ? undefined : end);
  const rows: Listed[] = [];
  for (const match of section.matchAll(/^\| `([A-Za-z_$][\w$]*)` \| (value|type) \|/gm)) {
    rows.push({ name: match[1] as string, kind: match[2] as Listed["kind"] });
  }
  return rows;
}

/** What src/index.ts exports, each a value (it exists at run time) or a type only. */
function exported(): Listed[] {
  const entry = `${root}src/index.ts`;
  const config = ts.readConfigFile(`${root}tsconfig.json`, ts.sys.readFile).config;
  const parsed = ts.parseJsonConfigFileContent(config, ts.sys, root);
  const program = ts.createProgram([entry], { ...parsed.options, noEmit: true });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(entry);
  if (!source) throw new Error("src/index.ts not found");
  const module = checker.getSymbolAtLocation(source);
  if (!module) throw new Error("src/index.ts is not a module");
  return checker.getExportsOfModule(module).map((symbol) => {
    const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
    return {
      name: symbol.name,
      kind: target.flags & ts.SymbolFlags.Value ? "value" : "type",
    };
  });
}

describe("the public API", () => {
  const listed = documented();
  const actual = exported();
  const byName = (a: Listed, b: Listed) => a.name.localeCompare(b.name);

  it("is exactly the documented list, each name as the kind it is documented as", () => {
    expect(listed.length).toBeGreaterThan(0);
    expect([...actual].sort(byName)).toEqual([...listed].sort(byName));
  });

  it(`exports at most ${MAX_VALUES} values`, () => {
    const values = actual.filter((entry) => entry.kind === "value").map((entry) => entry.name);
    expect(values.length, values.join(", ")).toBeLessThanOrEqual(MAX_VALUES);
  });

  it("documents every name once", () => {
    const names = listed.map((entry) => entry.name);
    expect(names.filter((name, i) => names.indexOf(name) !== i)).toEqual([]);
  });
});
