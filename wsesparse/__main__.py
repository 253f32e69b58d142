import sys

from wsesparse.cli import main

sys.exit(main())
