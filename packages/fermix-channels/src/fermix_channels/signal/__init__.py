"""Signal: a ``signal-cli`` subprocess polled for new messages."""
