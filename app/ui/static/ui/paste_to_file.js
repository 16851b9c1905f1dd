// A very long paste into the message box becomes an attached text file, as in llama.cpp's web UI (issue 23):
// the chat stays readable and the text reaches the model as a document with a name.
// Chainlit's message box (#chat-input, a textarea) already turns a pasted *file* into an upload; so a long text
// paste is stopped before Chainlit sees it and sent to the box again as a paste of a file holding that text.
(() => {
  const LONG_PASTE_CHARS = 2500;  // llama.cpp's default (pasteLongTextToFileLen)

  function fileName() {
    const now = new Date();
    const pad = (n) => String(n).padStart(2, "0");
    return `pasted-${now.getFullYear()}${pad(now.getMonth() + 1)}${pad(now.getDate())}-` +
      `${pad(now.getHours())}${pad(now.getMinutes())}${pad(now.getSeconds())}.txt`;
  }

  document.addEventListener("paste", (event) => {
    const box = event.target;
    if (!(box instanceof HTMLElement) || box.id !== "chat-input" || !event.clipboardData) return;
    const text = event.clipboardData.getData("text/plain");
    if (text.length <= LONG_PASTE_CHARS) return;  // also our own paste below: it carries a file, no text
    const files = new DataTransfer();
    files.items.add(new File([text], fileName(), { type: "text/plain" }));
    const asFile = new ClipboardEvent("paste", { clipboardData: files, bubbles: true, cancelable: true });
    // A browser that cannot carry a file in a made-up paste keeps the ordinary paste: the text is never lost.
    if (!asFile.clipboardData || asFile.clipboardData.files.length !== 1) return;
    event.preventDefault();
    event.stopImmediatePropagation();  // capture phase on the document: runs before React's listener
    box.dispatchEvent(asFile);
  }, true);
})();
