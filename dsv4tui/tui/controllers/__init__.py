"""The plain objects the dashboard App composes, one per thing they own: the server
(:mod:`.server`: restart, pickers, sanity, adopt), sweeps and campaigns (:mod:`.sweeps`, the
state they share with the server in :mod:`.watch`), the run store and the files
(:mod:`.runs`), the connection from arriving to leaving (:mod:`.visit`), the fleet
(:mod:`.fleet`). Each gets its dependencies in its constructor: the model, the host link, the
store, and :class:`.ui.Ui` (the dialogs, notices and workers it drives). None imports the
App (a contract in pyproject.toml)."""
