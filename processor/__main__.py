import sys

from processor.cli import main

sys.exit(main())
