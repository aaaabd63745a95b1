"""Skill and delegation tools: skill_view/list/create/reload/run and subagents."""
