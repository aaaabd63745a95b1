"""Workspace file tools: read, write, edit, and search files inside the sandbox roots.

Every tool here asks the sandbox policy (``ctx.service("sandbox")``) for a canonical path
*before* touching the file system, so a path the policy refuses is never opened, listed,
created or stat'ed on the tool's own initiative.
"""
