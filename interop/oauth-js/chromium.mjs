// Headless Chromium approving delegateos serve's consent page, driven over
// the DevTools protocol on a pipe (--remote-debugging-pipe): no npm
// package, only Node's standard library.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// approveInChromium opens the consent page at url in headless Chromium,
// reads what it shows (returned), unticks the capabilities named in untick
// (comma-separated), signs in with password, approves, and waits for the
// page it is sent on to (the client's redirect URI) to load. onPage is
// given what the page showed before it is approved.
export async function approveInChromium(url, { chromiumPath, password, untick = "", onPage = () => {} }) {
  let shown;
  const profile = mkdtempSync(join(tmpdir(), "dos-chromium-"));
  const proc = spawn(chromiumPath, ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
    "--remote-debugging-pipe", `--user-data-dir=${profile}`, "about:blank"], { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"] });
  let stderr = "";
  proc.stderr.on("data", (d) => (stderr += d));
  const exited = new Promise((r) => proc.on("exit", r));
  const pipeIn = proc.stdio[3], pipeOut = proc.stdio[4];
  let next = 1, buf = "";
  const waiting = new Map(), events = [];
  let onEvent = () => {};
  pipeOut.on("data", (d) => {
    buf += d.toString();
    let i;
    while ((i = buf.indexOf("\0")) >= 0) {
      const msg = JSON.parse(buf.slice(0, i));
      buf = buf.slice(i + 1);
      if (msg.id && waiting.has(msg.id)) {
        const { resolve, reject } = waiting.get(msg.id);
        waiting.delete(msg.id);
        msg.error ? reject(new Error(JSON.stringify(msg.error))) : resolve(msg.result);
      } else if (msg.method) {
        events.push(msg);
        onEvent(msg);
      }
    }
  });
  const send = (method, params = {}, sessionId) =>
    new Promise((resolve, reject) => {
      const id = next++;
      waiting.set(id, { resolve, reject });
      pipeIn.write(JSON.stringify({ id, method, params, sessionId }) + "\0");
    });
  const event = (method, sessionId) =>
    new Promise((resolve) => {
      onEvent = (m) => m.method === method && m.sessionId === sessionId && resolve(m);
    });
  try {
    const { targetInfos } = await send("Target.getTargets");
    const page = targetInfos.find((t) => t.type === "page");
    const { sessionId } = await send("Target.attachToTarget", { targetId: page.targetId, flatten: true });
    await send("Page.enable", {}, sessionId);
    const loaded = event("Page.loadEventFired", sessionId);
    await send("Page.navigate", { url }, sessionId);
    await loaded;
    const evaluate = async (expression) => {
      const r = await send("Runtime.evaluate", { expression, returnByValue: true }, sessionId);
      if (r.exceptionDetails) throw new Error(JSON.stringify(r.exceptionDetails));
      return r.result.value;
    };
    shown = await evaluate(`({
      client: document.getElementById("client-name")?.textContent,
      capabilities: [...document.querySelectorAll("input[name=cap]")].map((b) => {
        const cells = b.closest("tr").querySelectorAll("td");
        return cells[1].textContent + ":" + cells[2].textContent + ":" + cells[3].textContent;
      }),
      budget: document.getElementById("budget")?.value,
      expiresIn: document.getElementById("expires_in")?.value,
    })`);
    onPage(shown);
    const next = event("Page.loadEventFired", sessionId);
    await evaluate(`(() => {
      const untick = ${JSON.stringify(untick ? untick.split(",") : [])};
      for (const b of document.querySelectorAll("input[name=cap]")) {
        const cells = b.closest("tr").querySelectorAll("td");
        if (untick.includes(cells[1].textContent + ":" + cells[2].textContent + ":" + cells[3].textContent)) b.checked = false;
      }
      document.getElementById("password").value = ${JSON.stringify(password)};
      document.getElementById("approve").click();
    })()`);
    await next;
  } catch (e) {
    throw new Error(`driving Chromium: ${e.message}\n${stderr}`);
  } finally {
    proc.kill("SIGKILL");
    await exited;
    // Chromium's helper processes may still be writing into the profile
    // for a moment after the browser is killed: retry, and leave a temporary
    // directory behind rather than fail the flow that already ran.
    try {
      rmSync(profile, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
    } catch {}
  }
  return shown;
}
