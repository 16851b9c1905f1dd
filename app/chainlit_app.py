"""The file Chainlit loads (mount_chainlit's target). It only registers the handlers in app/chat.py."""
from app.chat import install

install()
