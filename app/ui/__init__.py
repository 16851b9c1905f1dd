"""The Chainlit side: the file Chainlit loads, the chat handlers, history in the sidebar, the status panel, preset
commands, branding, Markdown rules and the page's own static files. Only this wing (and app/chainlit_internals.py,
the one door to Chainlit's private parts) knows Chainlit."""
