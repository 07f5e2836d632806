/**
 * The dashboard's usage section (docs/analytics.md "Usage rules"), script inlined into
 * dashboard-page.ts's: for a usage rule, its units charged per minute as an inline SVG chart and
 * its top spenders. It uses the page script's `el`, `svgEl`, `time` and `keyCell`; values go in
 * as text or SVG attributes only (client keys are attacker-chosen).
 */
export const USAGE_SCRIPT = `
  function unitsChart(rule) {
    const W = 600, H = 90, left = 36, bottom = 18, top = 6;
    const minutes = rule.minutes;
    // Units per minute, never below 0 (a settle's give-back lands on its admission's minute).
    const units = (m) => Math.max(0, m.units || 0);
    const max = Math.max(1, ...minutes.map(units));
    const svg = svgEl("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": rule.rule + " units charged per minute" });
    const plotH = H - bottom - top, step = (W - left) / Math.max(1, minutes.length), barW = Math.max(1, step - 1);
    for (const frac of [0, 1]) {
      const y = top + plotH * (1 - frac);
      svg.append(svgEl("line", { x1: left, x2: W, y1: y, y2: y, stroke: "#e0e0e0" }));
      const label = svgEl("text", { x: left - 4, y: y + 4, "text-anchor": "end", "font-size": 10, fill: "#666", class: "units-axis" });
      label.textContent = String(max * frac);
      svg.append(label);
    }
    minutes.forEach((m, i) => {
      const h = (units(m) / max) * plotH;
      if (h > 0) svg.append(svgEl("rect", { x: left + i * step, width: barW, y: top + plotH - h, height: h, fill: "#1565c0", class: "bar-units" }));
    });
    const last = minutes[minutes.length - 1];
    if (last) {
      const label = svgEl("text", { x: W, y: H - 4, "font-size": 10, fill: "#666", "text-anchor": "end" });
      label.textContent = time(last.minute);
      svg.append(label);
    }
    return svg;
  }

  // Reservations, then what each settle charged or gave back: once settled, what was used.
  function usageSection(rule) {
    const nodes = [el("h3", {}, "Units charged per minute"), unitsChart(rule), el("h3", {}, "Top spenders")];
    const spenders = rule.topSpenders || [];
    if (spenders.length === 0) {
      nodes.push(el("div", { class: "empty" }, "none"));
      return nodes;
    }
    const table = el("table", { class: "top-spenders" });
    for (const { key, units, label } of spenders) {
      const row = el("tr", { "data-key": key });
      row.append(keyCell(key, label), el("td", { class: "count" }, units));
      table.append(row);
    }
    nodes.push(table);
    return nodes;
  }
`;
