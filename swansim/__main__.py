import sys

from swansim.cli import main

sys.exit(main())
