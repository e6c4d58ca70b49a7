#!/bin/sh
set -e
printf 'lines words chars: '
wc -l -w -c < "$1"
