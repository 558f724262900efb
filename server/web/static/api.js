// The server's HTTP API as the page uses it: a bearer token kept in this
// browser, a session id per tab (provenance of uploads and runs), JSON
// calls with SPEC 7 errors, meta-tool calls and Server-Sent Event streams
// read with fetch (EventSource cannot send a token).

export const auth = {
  token: localStorage.getItem("metaclaw.token") || "",
  session: sessionStorage.getItem("metaclaw.session") || "",
  onUnauthorized: () => {},
};
if (!auth.session) {
  const b = new Uint8Array(6);
  crypto.getRandomValues(b);
  auth.session = "web-" + [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  sessionStorage.setItem("metaclaw.session", auth.session);
}

export function setToken(t) {
  auth.token = t;
  localStorage.setItem("metaclaw.token", t);
}

export function headers(extra) {
  const h = Object.assign({ "X-Session-Id": auth.session }, extra || {});
  if (auth.token) h["Authorization"] = "Bearer " + auth.token;
  return h;
}

// ApiError carries SPEC 7's code.
export class ApiError extends Error {
  constructor(code, message, status) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

async function errorOf(res) {
  let body = null;
  try { body = await res.json(); } catch (_) { /* not JSON */ }
  if (res.status === 401) auth.onUnauthorized();
  if (body && body.error) return new ApiError(body.error.code, body.error.message, res.status);
  return new ApiError("HTTP_" + res.status, res.status + " " + res.statusText, res.status);
}

// api calls a JSON route and returns its parsed body.
export async function api(path, opts) {
  opts = opts || {};
  const init = Object.assign({}, opts, { headers: headers(opts.headers) });
  if (opts.json !== undefined) {
    init.body = JSON.stringify(opts.json);
    init.headers["Content-Type"] = "application/json";
    init.method = init.method || "POST";
  }
  const res = await fetch(path, init);
  if (!res.ok) throw await errorOf(res);
  const ct = res.headers.get("Content-Type") || "";
  return ct.includes("json") ? res.json() : res.text();
}

// raw fetches a route and returns the Response (errors thrown as ApiError).
export async function raw(path, opts) {
  opts = opts || {};
  const res = await fetch(path, Object.assign({}, opts, { headers: headers(opts.headers) }));
  if (!res.ok) throw await errorOf(res);
  return res;
}

// tool calls a meta-tool with snake_case arguments. The viewer's reads are
// not runs: they stay out of the run feed (X-Metaclaw-Feed: off).
export function tool(name, args, opts) {
  const h = opts && opts.quiet ? { "X-Metaclaw-Feed": "off" } : {};
  return api("/api/tools/" + encodeURIComponent(name), { json: args || {}, headers: h });
}

export const fileURL = (id, what) => "/api/files/" + encodeURIComponent(id) + (what ? "/" + what : "");

// blobURL fetches a file route with the token and returns an object URL.
export async function blobURL(path) {
  const res = await raw(path);
  return URL.createObjectURL(await res.blob());
}

// stream follows a Server-Sent Events route, reconnecting with the last
// event id; onEvent(type, data, id) gets each event; onState("live" |
// "reconnecting" | "unauthorized") tells the connection's state. It returns
// a function that stops it.
export function stream(path, onEvent, onState) {
  let lastId = "";
  let stopped = false;
  let ctrl = null;
  (async () => {
    for (let delay = 500; !stopped; delay = Math.min(delay * 2, 10000)) {
      try {
        ctrl = new AbortController();
        const h = headers({ Accept: "text/event-stream" });
        if (lastId) h["Last-Event-ID"] = lastId;
        const res = await fetch(path, { headers: h, signal: ctrl.signal });
        if (res.status === 401) { auth.onUnauthorized(); onState("unauthorized"); return; }
        if (!res.ok || !res.body) throw new Error(path + ": " + res.status);
        onState("live");
        delay = 500;
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let i;
          while ((i = buf.indexOf("\n\n")) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            let ev = "message", data = "", id = "";
            for (const line of block.split("\n")) {
              if (line.startsWith("event: ")) ev = line.slice(7);
              else if (line.startsWith("data: ")) data += line.slice(6);
              else if (line.startsWith("id: ")) id = line.slice(4);
            }
            if (id) lastId = id;
            if (!data) continue;
            try { onEvent(ev, JSON.parse(data), id); } catch (e) { console.error(e); }
          }
        }
      } catch (e) {
        if (stopped) return;
        console.warn(e);
      }
      if (stopped) return;
      onState("reconnecting");
      await new Promise((r) => setTimeout(r, delay));
    }
  })();
  return () => { stopped = true; if (ctrl) ctrl.abort(); };
}
