"""Telegram: Bot API long-polling; the one channel that can stream a draft edited in place."""
