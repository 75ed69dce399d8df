"""Every file streamconv reads from or writes for the user, and the package's own data folders."""
