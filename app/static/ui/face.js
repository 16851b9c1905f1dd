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
      // Its own close button (the sheet's X, a direct child of the dialog), not an Escape: Radix gives an Escape
      // to whichever dialog is on top, and opening the sidebar draws the side view again beneath it, so an
      // Escape closed the sidebar the user had just opened (issue 35 item 8: the first tap did nothing).
      const close = sheet.querySelector(":scope > button");
      if (close) {
        close.click();
        closingUnasked = true;
      }
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

  // The first time the sidebar is opened on a phone after an answer began a chat, Chainlit's whole page mounts
  // again (its router catches up with the /thread/<id> address the answer set), and the new sidebar starts
  // closed: the tap did nothing, the second one opened it (issue 35 item 8). A tap that such a re-mount swallowed
  // is given to the new button, once, after any unasked status sheet that came with it has gone.
  const SWALLOWED_WITHIN_MS = 3000;
  let tappedTrigger = null; // { button, at }: the sidebar button the user tapped, until the sidebar is open
  document.addEventListener("click", (event) => {
    const button = event.isTrusted && event.target.closest ? event.target.closest("#sidebar-trigger-button") : null;
    if (button && NARROW.matches && !document.querySelector('[role="dialog"] #thread-history')) {
      tappedTrigger = { button, at: performance.now() };
    }
  }, true);

  function replaySwallowedTap() {
    if (!tappedTrigger) return;
    if (document.querySelector('[role="dialog"] #thread-history') || performance.now() - tappedTrigger.at >
        SWALLOWED_WITHIN_MS) {
      tappedTrigger = null; // it opened, or too long ago to be that tap
      return;
    }
    const button = document.getElementById("sidebar-trigger-button");
    if (tappedTrigger.button.isConnected || !button || statusSheet() || closingUnasked) return;
    tappedTrigger = null;
    button.click();
  }

  // The address of the chat the first message began (app/chat_address.py says why): the page moves there now,
  // through its own router (a popstate), if it is still on the home address.
  window.addEventListener("message", (event) => {
    const data = event.data;
    if (event.origin !== window.location.origin || !data || data.ernie_chat !== "chat_opened") return;
    if (typeof data.path !== "string" || window.location.pathname.replace(/\/?$/, "/") !== data.home) return;
    window.history.replaceState(window.history.state, "", data.path);
    window.dispatchEvent(new PopStateEvent("popstate", { state: window.history.state }));
  });

  new MutationObserver(() => {
    addButton();
    closeUnasked();
    replaySwallowedTap();
  }).observe(document.documentElement, { childList: true, subtree: true, attributes: true,
                                          attributeFilter: ["data-state", "style"] });
})();
