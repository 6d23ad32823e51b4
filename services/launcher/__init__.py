"""Start the mesh as local processes (`pdd-emu up`), stop it (`down`), report it (`status`)."""
