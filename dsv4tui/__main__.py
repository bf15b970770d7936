from dsv4tui.main import main

raise SystemExit(main())
