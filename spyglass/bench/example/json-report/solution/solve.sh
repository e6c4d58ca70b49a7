#!/bin/bash
# the reference solution (never shown to the agent)
python3 ../skills/json-report/scripts/report.py items.json report.txt
