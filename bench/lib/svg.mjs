// @ts-check
// Two small line charts as plain SVG text: no chart library, no fonts beyond the default.

const COLORS = ["#d9480f", "#1971c2", "#2b8a3e", "#862e9c", "#e67700"];
const W = 640;
const H = 320;
const PAD = { left: 56, right: 16, top: 28, bottom: 44 };

/** @param {string} text */
const esc = (text) => text.replace(/[<>&"]/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * @typedef {{ name: string, points: [number, number][], dashed?: boolean, step?: boolean }} Series
 * @param {{ title: string, xLabel: string, yLabel: string, series: Series[], xTicks?: [number, string][], logX?: (x: number) => number, yMax?: number }} chart
 */
export function lineChart({ title, xLabel, yLabel, series, xTicks, logX, yMax }) {
  const tx = logX ?? ((/** @type {number} */ x) => x);
  const xs = series.flatMap((s) => s.points.map((p) => tx(p[0])));
  const ys = series.flatMap((s) => s.points.map((p) => p[1]));
  const x0 = Math.min(...xs);
  const x1 = Math.max(...xs) || 1;
  const y1 = yMax ?? niceMax(Math.max(...ys, 0));
  const px = (/** @type {number} */ x) =>
    PAD.left + ((tx(x) - x0) / (x1 - x0 || 1)) * (W - PAD.left - PAD.right);
  const py = (/** @type {number} */ y) =>
    H - PAD.bottom - (Math.min(y, y1) / y1) * (H - PAD.top - PAD.bottom);
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" font-family="sans-serif" font-size="11">`,
    `<title>${esc(title)}</title>`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="16" text-anchor="middle" font-size="13">${esc(title)}</text>`,
  ];
  for (let i = 0; i <= 4; i++) {
    const y = (y1 * i) / 4;
    parts.push(
      `<line x1="${PAD.left}" x2="${W - PAD.right}" y1="${py(y)}" y2="${py(y)}" stroke="#eee"/>`,
      `<text x="${PAD.left - 6}" y="${py(y) + 4}" text-anchor="end">${fmt(y)}</text>`,
    );
  }
  for (const [x, label] of xTicks ?? []) {
    parts.push(
      `<line x1="${px(x)}" x2="${px(x)}" y1="${PAD.top}" y2="${H - PAD.bottom}" stroke="#f3f3f3"/>`,
      `<text x="${px(x)}" y="${H - PAD.bottom + 14}" text-anchor="middle">${esc(label)}</text>`,
    );
  }
  parts.push(
    `<line x1="${PAD.left}" x2="${PAD.left}" y1="${PAD.top}" y2="${H - PAD.bottom}" stroke="#333"/>`,
    `<line x1="${PAD.left}" x2="${W - PAD.right}" y1="${H - PAD.bottom}" y2="${H - PAD.bottom}" stroke="#333"/>`,
    `<text x="${W / 2}" y="${H - 8}" text-anchor="middle">${esc(xLabel)}</text>`,
    `<text transform="translate(14 ${H / 2}) rotate(-90)" text-anchor="middle">${esc(yLabel)}</text>`,
  );
  series.forEach((s, i) => {
    const color = s.dashed ? "#555" : (COLORS[i % COLORS.length] ?? "#000");
    /** @type {string[]} */
    const d = [];
    s.points.forEach(([x, y], j) => {
      const prev = s.points[j - 1];
      if (s.step && prev) d.push(`L${px(x).toFixed(1)},${py(prev[1]).toFixed(1)}`);
      d.push(`${j === 0 ? "M" : "L"}${px(x).toFixed(1)},${py(y).toFixed(1)}`);
    });
    parts.push(
      `<path d="${d.join("")}" fill="none" stroke="${color}" stroke-width="1.6"${s.dashed ? ' stroke-dasharray="5 4"' : ""}/>`,
      `<rect x="${PAD.left + 10}" y="${PAD.top + 4 + i * 15}" width="12" height="3" fill="${color}"/>`,
      `<text x="${PAD.left + 28}" y="${PAD.top + 9 + i * 15}">${esc(s.name)}</text>`,
    );
  });
  parts.push("</svg>");
  return `${parts.join("\n")}\n`;
}

/** @param {number} v */
function niceMax(v) {
  if (v <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

/** @param {number} v */
function fmt(v) {
  return Number.isInteger(v) ? String(v) : v.toFixed(v < 10 ? 1 : 0);
}
