#!/bin/sh
set -e
{
  echo "# Changelog"
  echo
  git log --pretty='- %s (%an)'
} > CHANGELOG.md
