// Opens a pkprof HTML report in Debian's headless Chromium and checks it as a person would:
// no console errors and no network request, then clicks a frame of the flame graph (it must zoom),
// types into the search box (tables filter, frames highlight), and saves a screenshot.
//
// Usage: node check.js FILE.html SCREENSHOT.png FRAME_NAME SEARCH_TERM
// Prints one JSON object (what it saw) and exits 1 if anything failed, 2 if it could not run.
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");

const [file, screenshot, frameName, term] = process.argv.slice(2);
if (!file || !screenshot || !frameName || !term) {
  console.error("usage: node check.js FILE.html SCREENSHOT.png FRAME_NAME SEARCH_TERM");
  process.exit(2);
}
const CHROMIUM = process.env.PKPROF_CHROMIUM || "/usr/bin/chromium";

let chromium;
try {
  ({ chromium } = require("playwright-core"));
} catch (e) {
  console.error("check.js: playwright-core is not installed next to it: run scripts/setup.sh");
  process.exit(2);
}

async function main() {
  const profileDir = fs.mkdtempSync(path.join(os.tmpdir(), "pkprof-chromium-"));
  const context = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1400, height: 1000 },
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--no-first-run",
    ],
  });
  const seen = { consoleErrors: [], pageErrors: [], requests: [], failures: [] };
  const fail = (msg) => seen.failures.push(msg);
  try {
    const page = context.pages()[0] || (await context.newPage());
    page.on("console", (m) => {
      if (m.type() === "error" || m.type() === "warning") seen.consoleErrors.push(m.type() + ": " + m.text());
    });
    page.on("pageerror", (e) => seen.pageErrors.push(String(e)));
    page.on("request", (r) => {
      if (!r.url().startsWith("file://")) seen.requests.push(r.url());
    });
    await page.goto("file://" + path.resolve(file), { waitUntil: "load" });
    seen.title = await page.title();
    seen.frames = await page.locator("#frames > g").count();
    seen.rows = await page.locator("#pk-flat-table tbody tr").count();
    if (seen.frames < 2) fail("the flame graph has " + seen.frames + " frames");
    if (seen.rows < 1) fail("the table has no rows");
    // Names too long for their column keep their end in view (the ellipsis goes in the middle):
    // every name cell shows its tail whole, inside the cell.
    seen.tails = await page.locator("#pk-flat-table tbody td.pk-name").evaluateAll((tds) =>
      tds.map((td) => {
        const tail = td.querySelector(".pk-nm-tail");
        if (!tail) return { name: td.title, shown: false };
        const c = td.getBoundingClientRect(), t = tail.getBoundingClientRect();
        const head = td.querySelector(".pk-nm-head");
        // Shown: inside the cell, and nothing of the cell's content overflows it (an overflowing
        // line would be clipped or replaced by the cell's own ellipsis).
        return {
          name: td.title, tail: tail.textContent, cut: head.scrollWidth > head.clientWidth,
          shown: t.width > 0 && t.left >= c.left - 0.5 && t.right <= c.right + 0.5 &&
            td.scrollWidth <= td.clientWidth + 1,
        };
      }));
    const hidden = seen.tails.filter((t) => !t.shown || !t.name.endsWith(t.tail));
    if (hidden.length) fail("names whose end is not shown: " + JSON.stringify(hidden.slice(0, 3)));

    await page.screenshot({ path: screenshot.replace(/\.png$/, "") + "-overview.png" });

    // Click the frame: it must fill the width, and "Reset Zoom" must show.
    const frame = page.locator("#frames > g", {
      has: page.locator("title", { hasText: new RegExp("^" + escapeRe(frameName) + " \\(") }),
    }).first();
    if ((await frame.count()) === 0) {
      fail("no frame named " + frameName);
    } else {
      const rect = frame.locator("rect");
      const before = await rect.boundingBox();
      const full = await page.locator("#frames").boundingBox();
      const unzoomHiddenBefore = await page.locator("#unzoom").evaluate((e) => e.classList.contains("hide"));
      await rect.click();
      await page.waitForTimeout(200);
      const after = await rect.boundingBox();
      seen.click = {
        widthBefore: before.width, widthAfter: after.width, graphWidth: full.width,
        unzoomHiddenBefore,
        unzoomVisibleAfter: await page.locator("#unzoom").isVisible(),
        hiddenFrames: await page.locator("#frames > g.hide").count(),
        callGraphTitle: (await page.locator("#pk-graph-body h3").count())
          ? await page.locator("#pk-graph-body h3").textContent() : null,
      };
      if (!(after.width > before.width)) fail("the clicked frame did not widen");
      if (Math.abs(after.width - full.width) > 2) fail("the zoomed frame does not span the graph");
      if (!unzoomHiddenBefore || !seen.click.unzoomVisibleAfter) fail("Reset Zoom did not appear");
    }

    // Search: the tables filter, matching frames turn magenta, the status line counts.
    await page.locator("#pk-search").click();
    await page.keyboard.type(term, { delay: 20 });
    await page.waitForTimeout(500);
    const names = await page.locator("#pk-flat-table tbody td.pk-name").allTextContents();
    seen.search = {
      term,
      rows: names.length,
      highlighted: await page.locator('#frames rect[fill="rgb(230,0,230)"]').count(),
      status: await page.locator("#pk-status").textContent(),
      matched: await page.locator("#matched").textContent(),
    };
    const re = new RegExp(term, "i");
    if (names.length === 0) fail("no table row matches " + term);
    if (names.some((n) => !re.test(n))) fail("a row that does not match " + term + " is shown");
    if (seen.search.highlighted === 0) fail("no frame highlighted for " + term);

    await page.screenshot({ path: screenshot, fullPage: true });
    seen.screenshot = screenshot;
  } finally {
    await context.close();
    fs.rmSync(profileDir, { recursive: true, force: true });
  }
  if (seen.consoleErrors.length) fail("console: " + seen.consoleErrors.join(" | "));
  if (seen.pageErrors.length) fail("page errors: " + seen.pageErrors.join(" | "));
  if (seen.requests.length) fail("network requests: " + seen.requests.join(" "));
  console.log(JSON.stringify(seen, null, 1));
  process.exit(seen.failures.length ? 1 : 0);
}

function escapeRe(s) {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

main().catch((e) => {
  console.error("check.js: " + (e && e.stack ? e.stack : e));
  process.exit(2);
});
