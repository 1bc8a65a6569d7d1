// Frontdoor dashboard: progressive enhancement only (every page works without it).
// Loaded from our own origin; the CSP allows no inline script.
(function () {
  "use strict";

  function csrfToken() {
    var meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.getAttribute("content") : "";
  }

  // Every htmx request carries the CSRF token the server checks (Litestar: x-csrftoken).
  document.addEventListener("htmx:configRequest", function (event) {
    event.detail.headers["x-csrftoken"] = csrfToken();
  });

  // A refused htmx request (403 for viewers, 404, 422) says so instead of doing nothing.
  document.addEventListener("htmx:responseError", function (event) {
    var flash = document.getElementById("flash");
    if (!flash) { return; }
    var status = event.detail.xhr ? event.detail.xhr.status : 0;
    flash.textContent = status === 403 ? "Not allowed." : "That did not work (HTTP " + status + "). Reload and try again.";
    flash.hidden = false;
  });

  // Copy buttons: <button class="copy" data-copy="element-id">.
  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-copy]");
    if (!button) { return; }
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source || !navigator.clipboard) { return; }
    navigator.clipboard.writeText(source.textContent.trim()).then(function () {
      var label = button.textContent;
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = label; }, 1500);
    });
  });
})();
