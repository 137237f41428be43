// A scripted user agent for toolgate's OAuth tests: toolgate runs it (TOOLGATE_BROWSER) with
// the authorization URL. It follows the authorization server's redirects to the loopback
// callback, as a browser whose user approves would, and appends what happened to
// $OAUTH_BROWSER_LOG (one JSON line per run). With OAUTH_BROWSER_FORGE=1 it first sends the
// callback a response with a wrong `state` (what a hostile page could do) and records the
// callback's status for it.
import { appendFileSync } from 'node:fs';

const log = (entry) => {
  if (process.env.OAUTH_BROWSER_LOG) appendFileSync(process.env.OAUTH_BROWSER_LOG, JSON.stringify(entry) + '\n');
};

let url = process.argv[2];
const entry = { url, hops: [] };
try {
  for (let i = 0; i < 10; i++) {
    const target = new URL(url);
    if (target.hostname === '127.0.0.1' && target.pathname === '/callback') {
      if (process.env.OAUTH_BROWSER_FORGE === '1') {
        const forged = new URL(target);
        forged.searchParams.set('state', 'forged-state');
        forged.searchParams.set('code', 'forged-code');
        entry.forged = (await fetch(forged)).status;
      }
      const res = await fetch(target);
      entry.callback = res.status;
      break;
    }
    const res = await fetch(target, { redirect: 'manual' });
    entry.hops.push(res.status);
    const next = res.headers.get('location');
    if (!next) { entry.stopped = res.status; entry.body = (await res.text()).slice(0, 300); break; }
    url = new URL(next, target).href;
  }
} catch (e) {
  entry.error = String(e);
}
log(entry);
