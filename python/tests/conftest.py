"""Puts the `python/` folder on sys.path, so every test imports the `ksmith` package as it is in
the checkout, however pytest is started."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
