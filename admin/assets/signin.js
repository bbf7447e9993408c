// Sign-in: exchange the pasted admin key for the session cookie, then load
// the dashboard. The key is sent once and never stored by the page.
"use strict";
document.getElementById("signin").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const input = document.getElementById("key");
  const error = document.getElementById("error");
  error.hidden = true;
  let res;
  try {
    res = await fetch("/admin/session", {
      method: "POST",
      headers: {"Content-Type": "application/json", "X-Inventory-CSRF": "1"},
      body: JSON.stringify({key: input.value.trim()}),
      credentials: "same-origin",
    });
  } catch (e) {
    res = null;
  }
  if (res && res.status === 204) {
    input.value = "";
    location.assign("/admin");
    return;
  }
  let message = "the server could not be reached";
  if (res) {
    try { message = (await res.json()).error || res.statusText; } catch (e) { message = res.statusText; }
  }
  error.textContent = "Sign-in failed: " + message;
  error.hidden = false;
});
