import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// Every relative link in the README and the guides resolves: the file exists, and an anchor
// names a heading of it (GitHub's slugs). A moved section or a renamed heading fails here, not
// in a reader's browser.
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const DOCS = [
  "README.md",
  "CHANGELOG.md",
  "bench/README.md",
  ...readdirSync(path.join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .map((f) => `docs/${f}`),
];

/** GitHub's anchor for a heading: lower-cased, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/`/g, "")
    .replace(/[^\p{L}\p{N}_\- ]/gu, "")
    .replace(/ /g, "-");
}

/** A Markdown text without its fenced code blocks (links and headings there are not ones). */
function prose(text: string): string {
  return text.replace(/^```[\s\S]*?^```/gm, "");
}

function anchorsOf(file: string): Set<string> {
  const text = prose(readFileSync(path.join(ROOT, file), "utf8"));
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => slug(m[1] ?? "")));
}

/** What a citation may name in a file: a heading, or a paragraph's bold lead (`**Why 500 ms.**`). */
function sectionsOf(file: string): string[] {
  const text = prose(readFileSync(path.join(ROOT, file), "utf8"));
  const headings = [...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => m[1] ?? "");
  const leads = [...text.matchAll(/^(?:- )?\*\*(.+?)\*\*/gm)].map((m) => m[1] ?? "");
  return [...headings, ...leads].map((t) => t.replace(/`/g, "").toLowerCase());
}

/** Files whose comments cite a guide's section: the code, its tests, the bench and scripts. */
function codeFiles(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const file = `${dir}/${entry.name}`;
    if (entry.isDirectory()) return entry.name === "node_modules" ? [] : codeFiles(file);
    return /\.(ts|mjs|js)$/.test(entry.name) ? [file] : [];
  });
}

describe("links in the documentation", () => {
  it("the README is short: at most 300 lines, the quick start in its first 80", () => {
    const readme = readFileSync(path.join(ROOT, "README.md"), "utf8").split("\n");
    expect(readme.length).toBeLessThanOrEqual(300);
    expect(readme.findIndex((line) => line.startsWith("## Quick start"))).toBeLessThan(80);
  });

  it("there are guides in docs/", () => {
    expect(DOCS.filter((f) => f.startsWith("docs/")).length).toBeGreaterThanOrEqual(5);
  });

  for (const file of DOCS) {
    it(`${file}: every relative link names a file that exists, and a heading there`, () => {
      const text = prose(readFileSync(path.join(ROOT, file), "utf8"));
      const broken: string[] = [];
      for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const target = match[1] ?? "";
        if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
        const [relative = "", anchor] = target.split("#");
        const resolved = relative === "" ? file : path.join(path.dirname(file), relative);
        if (!existsSync(path.join(ROOT, resolved))) {
          broken.push(`${target}: no file ${resolved}`);
          continue;
        }
        if (anchor !== undefined && resolved.endsWith(".md") && !anchorsOf(resolved).has(anchor)) {
          broken.push(`${target}: no heading #${anchor} in ${resolved}`);
        }
      }
      expect(broken).toEqual([]);
    });
  }

  // A guide's first heading under its title is a section, not the title again: a repeat would
  // take the title's anchor with a "-1" and leave links to it pointing at the title.
  for (const file of DOCS.filter((f) => f !== "CHANGELOG.md")) {
    it(`${file}: the first heading after the title does not repeat it`, () => {
      const headings = [
        ...prose(readFileSync(path.join(ROOT, file), "utf8")).matchAll(/^#{1,6} (.+)$/gm),
      ].map((m) => m[1] ?? "");
      expect(headings[1], `first heading under "# ${headings[0]}"`).not.toBe(headings[0]);
    });
  }

  // A citation in prose or a comment, `docs/check-api.md "Limits"` or `README "Install"`, names a
  // section of a file in this repository by its heading (or its start): a moved or renamed
  // section fails here like a link does. Files not in the repository are not checked.
  it("every quoted section a doc or a comment cites is there", () => {
    const citing = [...DOCS, ...["src", "test", "bench", "scripts", "bridge"].flatMap(codeFiles)];
    const broken: string[] = [];
    for (const file of citing) {
      const text = readFileSync(path.join(ROOT, file), "utf8");
      for (const match of text.matchAll(/(README|[\w./-]+\.md),?\s+"([^"]+)"/g)) {
        const cited = match[1] === "README" ? "README.md" : (match[1] ?? "");
        if (!existsSync(path.join(ROOT, cited))) continue;
        const name = (match[2] ?? "")
          .replace(/\s*\n\s*(?:\*|\/\/)?\s*/g, " ") // a citation across comment lines
          .replace(/`/g, "")
          .toLowerCase();
        if (!sectionsOf(cited).some((section) => section.startsWith(name))) {
          broken.push(`${file}: ${match[0]}`);
        }
      }
    }
    expect(broken).toEqual([]);
  });
});
