"""The web dashboard: server-rendered pages over the same app as the HTTP API."""
