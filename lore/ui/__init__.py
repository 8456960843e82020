"""`lore ui`: a local, read-only web view of a memory (search, timeline, records, graph, health).

Standard library only (``http.server``); pages are rendered on the server, the
graph as inline SVG, and the one stylesheet and script ship in ``static/``.
"""
