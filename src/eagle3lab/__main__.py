import sys

from eagle3lab.commands.cli import main

sys.exit(main())
