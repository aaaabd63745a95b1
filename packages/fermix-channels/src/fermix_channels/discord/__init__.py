"""Discord: WebSocket gateway in, REST replies out."""
