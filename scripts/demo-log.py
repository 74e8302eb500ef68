"""Turns the JSON log lines of `ebb serve` into lines for people: each action and spot
migration step as it happens, an hourly mark of the simulated clock, and every warning and error. Reads stdin."""

import json
import sys
from datetime import datetime

last_hour = None
for line in sys.stdin:
    try:
        event = json.loads(line)
    except ValueError:
        print(line, end="")
        continue
    fields = event.get("fields", {})
    message = fields.get("message", "")
    level = event.get("level", "INFO")
    at = fields.get("at")
    if at:
        when = datetime.strptime(at, "%Y-%m-%dT%H:%M:%SZ")
        hour = when.strftime("%a %d %b %H:00 UTC")
        if hour != last_hour:
            last_hour = hour
            print(f"\n── {hour} ──", flush=True)
    if message == "action":
        outcome = fields.get("outcome")
        mark = {"succeeded": " ", "failed": "✗", "skipped": "·"}.get(outcome, "?")
        dry = " (dry run)" if fields.get("dry_run") else ""
        print(
            f"{mark} {when:%H:%M}  {fields.get('action', ''):<9} {fields.get('instance', ''):<14}"
            f" {fields.get('policy') or '-':<22} {outcome}{dry}: {fields.get('detail', '')}",
            flush=True,
        )
    elif message == "migration":
        print(
            f"» {when:%H:%M}  spot #{fields.get('migration', '')}   {fields.get('instance', ''):<14}"
            f" {fields.get('state', ''):<22} {fields.get('detail', '')}",
            flush=True,
        )
    elif message == "tick":
        if fields.get("policy_error"):
            print(f"! policies are not valid, acting on the last valid set: {fields['policy_error']}", flush=True)
    elif level in ("WARN", "ERROR"):
        print(f"! {level.lower()}: {message}", flush=True)
    elif message in ("became the leader", "API listening", "shut down"):
        print(f"  ebb: {message}", flush=True)
