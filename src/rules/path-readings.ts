/**
 * The paths a request path may be routed to by common origins: what a rule's `match.paths` is
 * tested against. Pure string work, no imports: a bypass found here is fixed here, once.
 */

// What can make some server read a path differently from its plain spelling: a percent escape,
// ";", "\\", a blank, "//", or a segment ending in "." (dot segments, IIS trailing dots).
const UNPLAIN = /[%;\\ ]|\/\/|\.(?:\/|$)/;

/**
 * Every path a common origin may route this request path to, deduplicated. A limiter must err
 * toward counting: a rule applies if any reading matches it. Each reading decodes percent-encoded
 * unreserved characters ("/%6Cogin" is "/login", "%2e" is "."), resolves dot segments and drops
 * empty ones ("//"), and applies any combination of:
 * - separators decoded first: "%2F", "%5C" and "\\" read as "/" (and "%3B" as ";") before dot
 *   segments are resolved, as servers that decode before normalising do ("/x/..%2Flogin");
 * - ";" parameters removed from each segment (Tomcat, Jetty, Spring: "/login;jsessionid=1",
 *   "/x/..;/login");
 * - trailing dots and blanks removed from each segment (IIS: "/login.", "/login%20").
 * Empty segments are dropped before dot segments are resolved (nginx's merge_slashes) and after
 * (the URL standard): "/a//../login" is both "/login" and "/a/login".
 * A plain path (the common case) is its only reading, with no parsing. At most 16 readings, each
 * no longer than the path, in time linear in it: no regex here may backtrack.
 */
export function pathReadings(path: string): readonly string[] {
  if (path.startsWith("/") && !UNPLAIN.test(path)) return [path];
  const decoded = path.replace(/%[0-9A-Fa-f]{2}/g, decodeUnreserved);
  const sources = [decoded];
  const separated = decoded.replace(/%2F|%5C|\\/g, "/").replace(/%3B/g, ";");
  if (separated !== decoded) sources.push(separated);
  const readings = new Set<string>();
  for (const source of sources) {
    const plain = source.split("/");
    const variants = [plain];
    if (source.includes(";")) variants.push(plain.map(withoutParams));
    for (const variant of [...variants]) {
      const stripped = variant.map(withoutTrailingDots);
      if (stripped.some((segment, i) => segment !== variant[i])) variants.push(stripped);
    }
    for (const variant of variants) {
      readings.add(resolveDotSegments(variant, true));
      readings.add(resolveDotSegments(variant, false));
    }
  }
  return [...readings];
}

// The unreserved characters (RFC 3986): an escape of one is the character itself to every server.
const UNRESERVED = new Uint8Array(128);
for (const char of "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~") {
  UNRESERVED[char.charCodeAt(0)] = 1;
}

/** "%6C" → "l"; any other escape in upper case ("%2f" → "%2F"). A table, not a regex per escape. */
function decodeUnreserved(encoded: string): string {
  const code = Number.parseInt(encoded.slice(1), 16);
  return UNRESERVED[code] === 1 ? String.fromCharCode(code) : encoded.toUpperCase();
}

function withoutParams(segment: string): string {
  const semicolon = segment.indexOf(";");
  return semicolon < 0 ? segment : segment.slice(0, semicolon);
}

function withoutTrailingDots(segment: string): string {
  const stripped = segment.slice(0, trailingRunStart(segment, true));
  if (stripped !== "") return stripped;
  // "." and ".." (with trailing blanks) stay dot segments; "..." and the like become empty.
  const dots = segment.slice(0, trailingRunStart(segment, false));
  return dots === "." || dots === ".." ? dots : "";
}

/**
 * Where the segment's trailing run of blanks (" ", "%20") and, with `dots`, "." starts. A scan
 * back from the end, not a regex: `(?:\.|%20| )+$` is retried from every start, quadratic in a
 * long run that does not reach the end (8 000 dots then "x": 0.1 s). Each of the three ends in
 * its own character, so the run read backwards is unique.
 */
function trailingRunStart(segment: string, dots: boolean): number {
  let end = segment.length;
  for (;;) {
    const last = segment.charCodeAt(end - 1);
    if (last === 0x20 || (dots && last === 0x2e)) end--;
    else if (last === 0x30 && end >= 3 && segment.startsWith("%20", end - 3)) end -= 3;
    else return end;
  }
}

/** RFC 3986 remove_dot_segments over "/"-split segments; empty ones dropped before or after. */
function resolveDotSegments(segments: readonly string[], dropEmptyFirst: boolean): string {
  const out: string[] = [];
  for (const segment of segments) {
    if (segment === "." || (segment === "" && dropEmptyFirst)) continue;
    if (segment === "..") out.pop();
    else out.push(segment);
  }
  return `/${out.filter((segment) => segment !== "").join("/")}`;
}
