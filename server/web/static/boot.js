// Starts loading the workspace (GET /api/history) while the page's modules
// are still loading: app.js picks the parsed answer (or null) up from
// window.__history.
"use strict";
(function () {
  var session = sessionStorage.getItem("metaclaw.session");
  if (!session) {
    var b = new Uint8Array(6);
    crypto.getRandomValues(b);
    session = "web-" + Array.prototype.map.call(b, function (x) { return x.toString(16).padStart(2, "0"); }).join("");
    sessionStorage.setItem("metaclaw.session", session);
  }
  var h = { "X-Session-Id": session };
  var token = localStorage.getItem("metaclaw.token");
  if (token) h.Authorization = "Bearer " + token;
  // The body is read and parsed as it arrives, not when app.js asks for
  // it: on a busy machine that took 100-300 ms more after the modules ran.
  window.__history = fetch("/api/history", { headers: h }).then(function (r) { return r.ok ? r.json() : null; });
})();
