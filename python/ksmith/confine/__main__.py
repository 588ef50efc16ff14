"""``python -m ksmith.confine --policy JSON -- ARGS...``: see `launch`."""

import sys

from .launch import main

sys.exit(main())
