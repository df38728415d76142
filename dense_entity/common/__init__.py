"""Helpers every layer uses: workspace paths (WORKSPACE.md), publishing finished files and
directories atomically, reading JSONL.

May import: nothing of this project (the bottom layer).
"""
