"""A tiny Chainlit app for the browser test of app/ui/markdown_nesting.py: it answers with the user's text, as a
model that writes deep Markdown would; "raw:" answers without the guard (the control)."""
import chainlit as cl

from app.ui.markdown_nesting import limit_nesting


@cl.on_message
async def echo(message: cl.Message) -> None:
    text = message.content
    await cl.Message(content=text[4:] if text.startswith("raw:") else limit_nesting(text)).send()
