"""Helpers every layer uses: workspace paths (WORKSPACE.md), publishing finished files and
directories atomically, reading JSONL; the import hook that takes a module's compiled build only
while it matches its source (compiled).

May import: nothing of this project (the bottom layer).
"""
