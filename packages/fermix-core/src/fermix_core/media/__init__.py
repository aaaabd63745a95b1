"""Inbound media handled before (and for) the model: images live in :mod:`.images`.

Importing this package costs nothing; each module imports its own dependencies, and the
imaging library (Pillow) only when a picture actually has to be decoded.
"""
