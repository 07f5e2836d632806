/**
 * The package's two entries export the lists docs/development.md ("Public API") gives, no more
 * and no fewer: a name added to src/index.ts or src/server.ts without its line there (or dropped
 * from one) fails here. Read with the TypeScript checker, so types count as well as values, and a
 * value is told from a type by what the symbol is, not by how the entry spells its export.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../../", import.meta.url));
const MAX_USER_VALUES = 8;

interface Listed {
  name: string;
  kind: "value" | "type";
}

interface Entry {
  /** How users import it, and the heading of its table in the "Public API" section. */
  specifier: string;
  file: string;
}

const USER: Entry = { specifier: "edge-limiter", file: "src/index.ts" };
const SERVER: Entry = { specifier: "edge-limiter/server", file: "src/server.ts" };

/** The table rows under an entry's heading: | `name` | value or type | what it is |. */
function documented(entry: Entry): Listed[] {
  const text = readFileSync(`${root}docs/development.md`, "utf8");
  const api = text.indexOf("\n## Public API");
  expect(api, 'docs/development.md has a "## Public API" section').toBeGreaterThan(0);
  const heading = `\n### \`${entry.specifier}\`\n`;
  const start = text.indexOf(heading, api);
  expect(start, `"Public API" has a "### \`${entry.specifier}\`" heading`).toBeGreaterThan(0);
  const next = [text.indexOf("\n### ", start + 1), text.indexOf("\n## ", start + 1)].filter(
    (at) => at > 0,
  );
  const section = text.slice(start, next.length > 0 ? Math.min(...next) : undefined);
  const rows: Listed[] = [];
  for (const match of section.matchAll(/^\| `([A-Za-z_$][\w$]*)` \| (value|type) \|/gm)) {
    rows.push({ name: match[1] as string, kind: match[2] as Listed["kind"] });
  }
  return rows;
}

const config = ts.readConfigFile(`${root}tsconfig.json`, ts.sys.readFile).config;
const parsed = ts.parseJsonConfigFileContent(config, ts.sys, root);
const program = ts.createProgram(
  [USER, SERVER].map((entry) => `${root}${entry.file}`),
  { ...parsed.options, noEmit: true },
);
const checker = program.getTypeChecker();

/** An entry's exports, each with the symbol it names (through the re-export). */
function exportsOf(entry: Entry): { name: string; target: ts.Symbol }[] {
  const source = program.getSourceFile(`${root}${entry.file}`);
  if (!source) throw new Error(`${entry.file} not found`);
  const module = checker.getSymbolAtLocation(source);
  if (!module) throw new Error(`${entry.file} is not a module`);
  return checker.getExportsOfModule(module).map((symbol) => ({
    name: symbol.name,
    target: symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol,
  }));
}

/** What an entry exports, each a value (it exists at run time) or a type only. */
function exported(entry: Entry): Listed[] {
  return exportsOf(entry).map(({ name, target }) => ({
    name,
    kind: target.flags & ts.SymbolFlags.Value ? "value" : "type",
  }));
}

const byName = (a: Listed, b: Listed) => a.name.localeCompare(b.name);

describe.each([USER, SERVER])("the entry $specifier", (entry) => {
  const listed = documented(entry);

  it("is exactly the documented list, each name as the kind it is documented as", () => {
    expect(listed.length).toBeGreaterThan(0);
    expect([...exported(entry)].sort(byName)).toEqual([...listed].sort(byName));
  });

  it("documents every name once", () => {
    const names = listed.map((item) => item.name);
    expect(names.filter((name, i) => names.indexOf(name) !== i)).toEqual([]);
  });

  it("gives every value TSDoc with an @example", () => {
    const without = exportsOf(entry)
      .filter(({ target }) => target.flags & ts.SymbolFlags.Value)
      .filter(
        ({ target }) =>
          target.getDocumentationComment(checker).length === 0 ||
          !target.getJsDocTags(checker).some((tag) => tag.name === "example"),
      )
      .map(({ name }) => name);
    expect(without).toEqual([]);
  });
});

describe("the two entries", () => {
  it("share no name: each export has one home", () => {
    const user = new Set(exported(USER).map((item) => item.name));
    expect(exported(SERVER).filter((item) => user.has(item.name))).toEqual([]);
  });

  it(`${USER.specifier} exports at most ${MAX_USER_VALUES} values`, () => {
    const values = exported(USER).filter((item) => item.kind === "value");
    expect(values.length, values.map((item) => item.name).join(", ")).toBeLessThanOrEqual(
      MAX_USER_VALUES,
    );
  });
});
