// ernie-chat's page script (Chainlit's custom_js): on a phone the status panel opens only when asked.
//
// Below 768px Chainlit shows a side element as a modal sheet over the whole chat, and opens it again each time
// the element changes; the status panel changes at load and as the engine starts, so the chat was covered on
// every load. Here, on a narrow page, a sheet nobody asked for is closed (face.css hides it before it paints),
// and a "Status" button in the header asks the app for the panel: the page passes window messages to the app
// over its socket (Chainlit's on_window_message), and the app draws the panel again (app/chat.py).
// Chainlit's custom_js is one script: the page's other scripts are loaded from beside this one.
(() => {
  const here = document.currentScript && document.currentScript.src;
  if (!here) return;
  for (const name of ["paste_to_file.js"]) {
    const script = document.createElement("script");
    script.src = new URL(name, here).href;
    document.head.appendChild(script);
  }
})();

(() => {
  const NARROW = window.matchMedia("(max-width: 767px)");
  const ASKED = "ernie-status-asked"; // on <html> while the user wants the sheet open
  const SHOW_STATUS = { ernie_chat: "show_status" }; // app/status_panel.py SHOW_STATUS_MESSAGE
  const LABEL = (navigator.language || "").toLowerCase().startsWith("zh") ? "状态" : "Status";
  const root = document.documentElement;
  let shownSinceAsked = false; // the asked-for sheet came: its going away means the user closed it
  let closingUnasked = false; // an unasked sheet was told to close and is still in the page (modal till it goes)

  function statusSheet() {
    const content = document.querySelector('[role="dialog"] #side-view-content');
    return content ? content.closest('[role="dialog"]') : null;
  }

  function closeUnasked() {
    const sheet = statusSheet();
    const asked = root.classList.contains(ASKED);
    if (!sheet) {
      if (asked && shownSinceAsked) root.classList.remove(ASKED); // closed by the user: the next one is unasked
      if (closingUnasked && document.body.style.pointerEvents !== "none") {
        // Gone, and the page takes taps again (a modal sheet turns them off on <body> until it has left). Counted
        // on <html> (data-unasked-status-closed): the page says the panel came, and what became of it.
        closingUnasked = false;
        root.dataset.unaskedStatusClosed = String(Number(root.dataset.unaskedStatusClosed || 0) + 1);
      }
      return;
    }
    if (asked) {
      shownSinceAsked = true;
    } else if (NARROW.matches && sheet.dataset.state === "open") {
      // The sheet's own Escape handling closes it (Radix listens on the document).
      sheet.dispatchEvent(new KeyboardEvent("keydown", { key: "Escape", bubbles: true, cancelable: true }));
      closingUnasked = true;
    }
  }

  function addButton() {
    const header = document.getElementById("header");
    if (!header || document.getElementById("ernie-status-button")) return;
    const button = document.createElement("button");
    button.id = "ernie-status-button";
    button.type = "button";
    button.textContent = LABEL;
    button.addEventListener("click", () => {
      root.classList.add(ASKED);
      shownSinceAsked = false;
      window.postMessage(SHOW_STATUS, window.location.origin);
    });
    const readme = document.getElementById("readme-button");
    if (readme && readme.parentElement) readme.parentElement.insertBefore(button, readme);
    else header.lastElementChild ? header.lastElementChild.prepend(button) : header.append(button);
  }

  new MutationObserver(() => {
    addButton();
    closeUnasked();
  }).observe(document.documentElement, { childList: true, subtree: true, attributes: true,
                                          attributeFilter: ["data-state", "style"] });
})();
