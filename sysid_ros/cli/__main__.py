"""`python -m sysid_ros.cli`: the `sysid-ros` command."""

from .commands import main

raise SystemExit(main())
