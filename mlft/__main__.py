from mlft.cli import main

raise SystemExit(main())
