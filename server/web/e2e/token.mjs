// A server with tokens: the page asks for one, keeps it in this browser
// only, and then lists the token's workspace live.
import { BASE, run, step, assert, eq, usePage } from "./lib.mjs";

await run(async (browser) => {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  ctx.setDefaultTimeout(60000);
  const page = await ctx.newPage();
  usePage(page);
  await step("the page asks for a token", async () => {
    await page.goto(BASE + "/");
    await page.locator("#token-dialog[open]").waitFor();
    await page.fill("#token-input", process.env.TOKEN);
    await page.click("#token-ok");
    await page.locator(".file-row[data-name='team-notes.md']").waitFor();
    await page.locator("html[data-live='1']").waitFor();
    eq(await page.textContent("#ws"), "team", "workspace of the token");
    eq(await page.evaluate(() => localStorage.getItem("metaclaw.token")), process.env.TOKEN, "kept in this browser");
  });
  await step("connect explains the token", async () => {
    await page.click("#connect-btn");
    await page.locator("#connect[open]").waitFor();
    assert((await page.textContent("#token-info")).includes("needs a bearer token"), "token info");
    assert((await page.textContent("#mcp-config")).includes("Authorization"), "config has the header");
  });
});
