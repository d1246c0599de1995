"""Guarded probe scripts. Each runs as its own process (``python <file>``), imports one heavy library,
and prints one marked JSON line. They import nothing from rocmstack, so they run in any interpreter."""
