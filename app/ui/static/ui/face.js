// ernie-chat's page script (Chainlit's custom_js): on a phone the status panel opens only when asked.
//
// Below 768px Chainlit shows a side element as a modal sheet over the whole chat, and opens it again each time
// the element changes; the status panel changes at load and as the engine starts, so the chat was covered on
// every load. Here, on a narrow page, a sheet nobody asked for is closed (face.css hides it before it paints),
// and a "Status" button in the header asks the app for the panel: the page passes window messages to the app
// over its socket (Chainlit's on_window_message), and the app draws the panel again (app/ui/chat.py).
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
  const SHOW_STATUS = { ernie_chat: "show_status" }; // app/ui/status_panel.py SHOW_STATUS_MESSAGE
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

  // The address of the chat the first message began (app/ui/chat_address.py says why): the page moves there now,
  // through its own router (a popstate), if it is still on the home address. The move mounts Chainlit's page
  // again, and the status sheet that comes with it is closed as at the start: <html data-chat-address> is "moved"
  // until the new page is there without a sheet, then "settled".
  let movedFrom = null; // the composer before the move: gone once the page has mounted again
  window.addEventListener("message", (event) => {
    const data = event.data;
    if (event.origin !== window.location.origin || !data || data.ernie_chat !== "chat_opened") return;
    if (typeof data.path !== "string" || window.location.pathname.replace(/\/?$/, "/") !== data.home) return;
    movedFrom = document.getElementById("chat-input");
    root.dataset.chatAddress = "moved";
    window.history.replaceState(window.history.state, "", data.path);
    window.dispatchEvent(new PopStateEvent("popstate", { state: window.history.state }));
  });

  // A chat forked from this one (app/ui/fork_chat.py): the page loads its address whole, so that the sidebar
  // lists the new chat as it opens it. Only an address of a chat on this site is followed.
  window.addEventListener("message", (event) => {
    const data = event.data;
    if (event.origin !== window.location.origin || !data || data.ernie_chat !== "chat_forked") return;
    if (typeof data.path !== "string" || !/^(\/[\w.-]+)*\/thread\/[0-9a-f-]{36}$/.test(data.path)) return;
    window.location.assign(data.path);
  });

  function settleMove() {
    if (!movedFrom || movedFrom.isConnected || statusSheet() || closingUnasked) return;
    movedFrom = null;
    root.dataset.chatAddress = "settled";
  }

  new MutationObserver(() => {
    addButton();
    closeUnasked();
    settleMove();
  }).observe(document.documentElement, { childList: true, subtree: true, attributes: true,
                                          attributeFilter: ["data-state", "style"] });
})();
