"""Turns the JSON log lines of `ebb serve` into lines for people: each action, change of an
Auto Scaling group's capacity and spot migration step as it happens, an hourly mark of the simulated clock, and every warning and error. Reads stdin."""

import signal

# Ctrl-C reaches every process of the pipeline. ebb shuts down after its tick in flight and
# closes its output; this script ignores the signal and reads on to the end, so ebb's last lines
# ("shut down") still show and no traceback does. Set first, before anything slow can run.
signal.signal(signal.SIGINT, signal.SIG_IGN)

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from datetime import datetime  # noqa: E402


def main():
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
        elif message == "group capacity changed":
            outcome = fields.get("outcome")
            mark = {"succeeded": " ", "failed": "✗"}.get(outcome, "?")
            print(
                f"{mark} {when:%H:%M}  {fields.get('action', ''):<9} group {fields.get('group', ''):<8}"
                f" {fields.get('policy') or '-':<22} {outcome}: {fields.get('detail', '')}",
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


try:
    main()
except BrokenPipeError:
    # Whatever read this output (a pager, `tee`) is gone: stop quietly, with stdout pointed at
    # /dev/null so that the interpreter's last flush does not complain either.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(1)
