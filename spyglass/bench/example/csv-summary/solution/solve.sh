#!/bin/bash
# the reference solution (never shown to the agent)
python3 ../skills/csv-summary/scripts/summarize.py data.csv
