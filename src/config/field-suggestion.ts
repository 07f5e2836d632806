/**
 * "did you mean window": the known field closest to an unknown one, among the fields the schema
 * accepts at that place (a typo in a config is the commonest mistake, and "unknown field" alone
 * leaves the reader to find the spelling in the docs).
 */

/** The parts of a valibot schema the walk reads (its public shape: kind, type, entries…). */
interface SchemaShape {
  kind?: string;
  type?: string;
  entries?: Record<string, SchemaShape>;
  wrapped?: SchemaShape;
  options?: readonly SchemaShape[];
  item?: SchemaShape;
  pipe?: readonly SchemaShape[];
}

/** The field names of the objects the schema accepts at `path` (array indexes as numbers). */
export function fieldsAt(schema: unknown, path: readonly (string | number)[]): string[] {
  const names = new Set<string>();
  const visit = (node: SchemaShape | undefined, depth: number, seen: number) => {
    // Bounded: a schema is a finite tree, but a wrapper chain is followed at most this deep.
    if (!node || typeof node !== "object" || seen > 32) return;
    if (node.wrapped) visit(node.wrapped, depth, seen + 1);
    for (const option of node.options ?? []) visit(option, depth, seen + 1);
    for (const step of node.pipe ?? []) {
      if (step !== node && step.kind === "schema") visit(step, depth, seen + 1);
    }
    const key = path[depth];
    if (node.type === "array" && typeof key === "number") visit(node.item, depth + 1, 0);
    if ((node.type === "strict_object" || node.type === "object") && node.entries) {
      if (depth === path.length) for (const name of Object.keys(node.entries)) names.add(name);
      else if (typeof key === "string" && Object.hasOwn(node.entries, key)) {
        visit(node.entries[key], depth + 1, 0);
      }
    }
  };
  visit(schema as SchemaShape, 0, 0);
  return [...names];
}

/** The closest of `known` to `given`, if close enough to be a typo (case ignored). */
function closestField(given: string, known: readonly string[]): string | undefined {
  // A field name is short; a long unknown one is not a typo worth an edit distance.
  if (given.length > 64) return undefined;
  const wanted = given.toLowerCase();
  const allowed = Math.max(1, Math.floor(wanted.length / 3));
  let best: string | undefined;
  let bestDistance = allowed + 1;
  for (const name of known) {
    const distance = editDistance(wanted, name.toLowerCase());
    if (distance < bestDistance) {
      best = name;
      bestDistance = distance;
    }
  }
  return best;
}

/** Optimal string alignment distance: insertions, deletions, substitutions, transpositions. */
function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    rows.push([i]);
    for (let j = 1; j <= b.length; j++) {
      const row = rows[i] as number[];
      if (i === 0) {
        row.push(j);
        continue;
      }
      const above = rows[i - 1] as number[];
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let value = Math.min(
        (above[j] as number) + 1,
        (row[j - 1] as number) + 1,
        (above[j - 1] as number) + cost,
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        value = Math.min(value, ((rows[i - 2] as number[])[j - 2] as number) + 1);
      }
      row.push(value);
    }
  }
  return (rows[a.length] as number[])[b.length] as number;
}

/** "unknown field", with the known field it is probably a typo of. */
export function unknownFieldDetail(given: string, known: readonly string[]): string {
  const suggestion = closestField(given, known);
  return suggestion ? `unknown field (did you mean "${suggestion}"?)` : "unknown field";
}
