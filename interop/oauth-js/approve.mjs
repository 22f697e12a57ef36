// A "browser" for a client that opens the authorization URL itself (the
// Inspector CLI, through xdg-open's $BROWSER): headless Chromium approves
// the consent page (chromium.mjs) and what the page showed is written to
// REPORT before the page is approved; REPORT.done is written when the
// browser is gone.
//
//   node approve.mjs CHROMIUM PASSWORD_FILE REPORT URL
import { readFileSync, writeFileSync } from "node:fs";
import { approveInChromium } from "./chromium.mjs";

const [chromiumPath, passwordFile, out, url] = process.argv.slice(2);
const password = readFileSync(passwordFile, "utf8").trim();
try {
  await approveInChromium(url, { chromiumPath, password, onPage: (page) => writeFileSync(out, JSON.stringify({ page })) });
} catch (e) {
  writeFileSync(out, JSON.stringify({ error: e.message }));
  process.exitCode = 1;
}
writeFileSync(out + ".done", "");
