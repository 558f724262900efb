// Starts loading the workspace (GET /api/history) while the page's modules
// are still loading: app.js picks the parsed answer (or null) up from
// window.__history. It runs before the first frame, so it does only that:
// the tab's session id (sessionStorage, another synchronous round trip to
// the browser's storage) is api.js's business; the history does not use it.
"use strict";
(function () {
  var h = {};
  var token = localStorage.getItem("metaclaw.token");
  if (token) h.Authorization = "Bearer " + token;
  // The body is read and parsed as it arrives, not when app.js asks for
  // it: on a busy machine that took 100-300 ms more after the modules ran.
  window.__history = fetch("/api/history", { headers: h }).then(function (r) { return r.ok ? r.json() : null; });
})();
