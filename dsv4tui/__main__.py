from dsv4tui.cli import main

raise SystemExit(main())
