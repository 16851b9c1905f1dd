"""Documents attached to a chat message (issue 23): read off the event loop, put into the prompt, kept with the chat.

- limits.py: what may be attached (size, count, kind by its first bytes), checked before anything is read;
- extract.py: a file's text (text, HTML, PDF text layer, DOCX), or one ``DocumentRefused`` line;
- worker.py: runs extract.py in a short-lived process of its own, under a time limit and a memory cap;
- passages.py: a document too long for the context -> the chunks most relevant to the question (BM25, FTS5);
- prompt.py: documents into the user's turn, inside a delimiter that carries each file's name;
- attach.py: the chat's side: a message's uploaded files -> documents kept in the message's metadata.

Where they are kept: in the user message's metadata (``documents``), so the chat database holds them (a 0600 file
in the 0700 data directory), a resumed chat puts them back into the prompt, export/import carry them and deleting
the chat deletes them, with no second store to keep in step.
"""
