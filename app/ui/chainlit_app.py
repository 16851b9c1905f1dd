"""The file Chainlit loads (mount_chainlit's target). It only registers the handlers in app/ui/chat.py."""
from app.ui.chat import install

install()
