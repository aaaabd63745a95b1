"""Exec tools: the shell, git, and the in-chat request for directory access.

They run programs, so they go through the sandbox twice: the working directory must be
inside its roots, and the command itself through its checks (the command profile and the
catastrophic-command guard for ``shell``; a stricter allowlist of its own for git).
"""
